// The bundle stream of POST /v1/entries/fetch (docs/protocol.md "Batch
// fetch", schemas/api/fetch-frame.schema.json): many bundles back to back in
// one response, each with its key and signatures, so that a fresh machine
// fetches a model's kernels in a few round trips. Written by the server
// (server/api_fetch.cpp) and read by the http remote as the bytes arrive;
// nothing here does I/O.
//
//   stream = magic frame* end-frame
//   magic  = "OPCSTRM1"                      (8 bytes: format version 1)
//   frame  = length header body
//   length = 4 bytes, big-endian: the header's size, 2 to 65536
//   header = a JSON object (fetch-frame.schema.json)
//   body   = `bytes` bytes of bundle for status "hit", nothing otherwise
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "opcache/result.hpp"
#include "store/signature.hpp"

namespace opcache::remote {

/// The stream's first bytes; the digit is the format's version.
inline constexpr std::string_view k_bundle_stream_magic = "OPCSTRM1";
/// The Content-Type of a bundle stream.
inline constexpr std::string_view k_bundle_stream_type = "application/vnd.opcache.bundle-stream";
/// Largest frame header.
inline constexpr std::size_t k_max_frame_header = 64 * 1024;
/// Largest bundle a frame may carry (as a single GET's).
inline constexpr std::int64_t k_max_frame_bundle = 2ll << 30;

/// One frame's header.
struct StreamFrame {
  enum class Status {
    hit,        ///< the bundle follows: `bytes` bytes, with `signatures`
    miss,       ///< the remote has no entry for `key`
    revoked,    ///< the remote refuses `key` (a tombstone; `reason`)
    later,      ///< not in this response (it is full): ask again
    too_large,  ///< larger than a batch response may carry: GET it alone
    end,        ///< the stream is complete; `entries` frames came before it
  };
  Status status = Status::miss;
  std::string key;                ///< all but `end`
  std::int64_t bytes = 0;         ///< hit: the bundle's size
  std::string digest;             ///< hit: the bundle's SHA-256 (hex), as the ETag of a GET
  store::Signatures signatures;   ///< hit: as stored with the entry (unverified)
  std::string reason;             ///< revoked
  std::int64_t entries = 0;       ///< end: how many frames came before it

  /// A frame of `status` about `key` (empty for the end frame), other members defaulted.
  static StreamFrame about(Status status, std::string key = {}) {
    StreamFrame frame;
    frame.status = status;
    frame.key = std::move(key);
    return frame;
  }
};

/// "hit", "miss", "revoked", "later", "too_large" or "end".
std::string_view frame_status_name(StreamFrame::Status status) noexcept;

/// The length prefix and JSON header of `frame` (the body, for a hit, is
/// the caller's to append). Pure; thread-safe.
std::string encode_frame(const StreamFrame& frame);

/// Reads a bundle stream incrementally: feed() it the bytes as they arrive,
/// in pieces of any size; it calls the sink for each frame and each piece of
/// bundle. Not thread-safe; one per response.
class BundleStreamReader {
 public:
  /// Receives the stream. An error returned by a callback stops the stream
  /// and is returned by feed().
  class Sink {
   public:
    virtual ~Sink() = default;
    /// A frame's header; for a hit, its bytes follow through bundle_bytes().
    virtual Status frame(const StreamFrame& frame) = 0;
    /// The next bytes of the current hit's bundle.
    virtual Status bundle_bytes(const char* data, std::size_t size) = 0;
    /// The current hit's bundle is complete.
    virtual Status bundle_end() = 0;
  };

  explicit BundleStreamReader(Sink& sink) : m_sink(sink) {}

  /// Consumes `size` bytes. A malformed stream (bad magic, a header that is
  /// not a frame, bytes after the end frame) is a `remote` error; so is
  /// anything a callback returns.
  Status feed(const char* data, std::size_t size);

  /// Whether the end frame has been read (a stream without it was cut short).
  bool complete() const noexcept { return m_state == State::done; }

  /// Forgets everything read (the response is being received again).
  void reset() noexcept;

 private:
  enum class State { magic, length, header, body, done };
  Status on_header();

  Sink& m_sink;
  State m_state = State::magic;
  std::string m_pending;           // magic, length or header bytes read so far
  std::size_t m_header_size = 0;
  std::int64_t m_body_left = 0;
};

}  // namespace opcache::remote
