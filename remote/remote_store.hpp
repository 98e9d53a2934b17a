// A remote store: somewhere bundles can be fetched from and uploaded to. One
// small interface, one file pair per backend (http_remote, s3_remote,
// file_remote), picked by URL scheme. Callers verify everything they fetch.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "opcache/result.hpp"
#include "opcache/types.hpp"
#include "remote/remote_config.hpp"
#include "store/scenario.hpp"

namespace opcache::remote {

/// A remote. Implementations are thread-safe (push/pull call them from many
/// threads) and reuse connections. Transport failures are `remote` or
/// `timeout` errors; absence is not an error.
class RemoteStore {
 public:
  virtual ~RemoteStore() = default;

  /// The URL without credentials, for messages.
  virtual std::string name() const = 0;

  /// Writes the bundle of `key` to `fd` (an empty regular file, written from
  /// its start); false on a miss. The bytes are NOT trusted: verify them.
  virtual Result<bool> fetch(const std::string& key, int fd) = 0;

  /// Uploads the bundle file of `key` (verified locally). Idempotent: an
  /// existing entry is kept.
  virtual Status upload(const std::string& key, const std::filesystem::path& bundle) = 0;

  /// Whether each key is present, in order, in as few round trips as the
  /// backend allows.
  virtual Result<std::vector<bool>> query(const std::vector<std::string>& keys) = 0;

  /// Every key whose entry matches `filter` (scenario fields, op type).
  virtual Result<std::vector<std::string>> list_keys(const ListFilter& filter) = 0;

  /// Whether list_keys() can filter by scenario (device mode, phase,
  /// toolchain, soc); prefetching needs it.
  virtual bool lists_by_scenario() const { return true; }
};

/// Opens the backend for `options.url` (scheme → factory). Performs no I/O
/// beyond what the backend needs to be usable (none for http and file).
Result<std::unique_ptr<RemoteStore>> open_remote(const RemoteOptions& options, const base::EnvLookup& env);

/// Backend factories (one per file).
Result<std::unique_ptr<RemoteStore>> make_http_remote(const RemoteOptions& options);
Result<std::unique_ptr<RemoteStore>> make_s3_remote(const RemoteOptions& options, const base::EnvLookup& env);
Result<std::unique_ptr<RemoteStore>> make_file_remote(const RemoteOptions& options);

}  // namespace opcache::remote
