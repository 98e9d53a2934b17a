// Keeps the usage statistics (server/usage_stats) of a server over local
// storage across restarts: read at start, written once a minute on the
// worker pool and at a graceful stop, to <store root>/serve-stats.json.
// Over S3 (stateless replicas) there is no file: each replica's history
// lives as long as its process.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "server/usage_stats.hpp"

namespace opcache::server {

/// The file of one server's statistics.
class UsageHistory {
 public:
  /// Saves at most this often while serving.
  static constexpr int k_save_interval_s = 60;

  /// `stats` is kept in `state_dir`/serve-stats.json (Storage::state_dir);
  /// without a directory, load() and save() do nothing. `stats` must
  /// outlive this.
  UsageHistory(UsageStats& stats, std::optional<std::filesystem::path> state_dir);

  /// Whether the history survives a restart.
  bool persisted() const noexcept { return m_file.has_value(); }

  /// Reads the file into the statistics. A file that cannot be used is
  /// moved aside to serve-stats.json.bad (never deleted), the statistics
  /// start empty, and the returned text says so for the log; std::nullopt
  /// when all went well (or there was no file).
  std::optional<std::string> load();

  /// Writes the statistics to the file (atomically); the error's text for
  /// the log, or std::nullopt. Thread-safe.
  std::optional<std::string> save() const;

 private:
  UsageStats& m_stats;
  std::optional<std::filesystem::path> m_file;
};

}  // namespace opcache::server
