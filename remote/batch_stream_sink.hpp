// The client's side of a bundle stream (remote/bundle_stream.hpp): turns
// the frames of one or more responses into a BatchReceiver's calls — a file
// per bundle, each key answered once (a retried response repeats frames),
// frames for keys nobody asked for ignored — and keeps what is still to ask.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "remote/bundle_stream.hpp"
#include "remote/remote_store.hpp"

namespace opcache::remote {

/// Receives the bundle streams answering a request for `keys`. Not
/// thread-safe; one per fetch_batch call.
class BatchStreamSink final : public BundleStreamReader::Sink {
 public:
  BatchStreamSink(const std::vector<std::string>& keys, BatchReceiver& receiver);

  Status frame(const StreamFrame& frame) override;
  Status bundle_bytes(const char* data, std::size_t size) override;
  Status bundle_end() override;

  /// Drops a bundle cut short by the end of a response (its file is discarded).
  void abandon_bundle() noexcept;

  /// The keys asked for that no frame has answered yet (the responses' `later`
  /// ones included), in the order asked; `too_large` ones are not among them.
  std::vector<std::string> pending() const;
  /// The keys the remote said were too large for a batch.
  const std::vector<std::string>& too_large() const noexcept { return m_too_large; }
  /// How many keys have been answered (hit, miss or revoked) so far.
  std::size_t answered() const noexcept { return m_answered.size(); }

 private:
  std::vector<std::string> m_keys;
  std::set<std::string> m_wanted;
  std::set<std::string> m_answered;
  std::vector<std::string> m_too_large;
  BatchReceiver& m_receiver;
  // The hit being received: its file, or none when its bytes are skipped.
  std::optional<base::AtomicFile> m_file;
  std::string m_key;
  store::Signatures m_signatures;
};

}  // namespace opcache::remote
