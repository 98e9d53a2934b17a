// Keeps the usage statistics (server/usage_stats) of a server across
// restarts: read at start, written on the worker pool at an interval and at
// a graceful stop. Over local storage to <store root>/serve-stats.json once a
// minute; over a bucket shared by replicas (s3://) to the replica's own
// object every stats interval, where the other replicas read it to count
// the whole team (server/team_usage).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/team_usage.hpp"
#include "server/usage_stats.hpp"

namespace opcache::server {

/// Where one server's statistics are kept.
class UsageHistory {
 public:
  /// Saves at most this often while serving, over local storage.
  static constexpr int k_save_interval_s = 60;

  /// `stats` is kept in `state_dir`/serve-stats.json (Storage::state_dir);
  /// without a directory, load() and save() do nothing until
  /// share_through() gives a bucket. `stats` must outlive this.
  UsageHistory(UsageStats& stats, std::optional<std::filesystem::path> state_dir);

  /// Keeps the statistics in the shared bucket of `client` instead, as the
  /// replica `replica`, written every `interval_s`; the other replicas'
  /// figures are added to `stats`' answers by refresh_team(). Call before
  /// load(), once. `client` must outlive this.
  void share_through(remote::S3Client& client, std::string replica, int interval_s);

  /// Whether the history survives a restart (a file, or the bucket).
  bool persisted() const noexcept { return m_file.has_value() || m_team != nullptr; }
  /// Whether the statistics are the team's (share_through was called).
  bool shared() const noexcept { return m_team != nullptr; }
  /// Seconds between saves.
  int interval_s() const noexcept { return m_interval_s; }

  /// Reads the history into the statistics. A file that cannot be used is
  /// moved aside to serve-stats.json.bad (never deleted), the statistics
  /// start empty, and the returned text says so for the log; std::nullopt
  /// when all went well (or there was no file). Over a bucket, see
  /// TeamUsage::load.
  std::optional<std::string> load();

  /// Writes the statistics (atomically); the error's text for the log, or
  /// std::nullopt. Thread-safe.
  std::optional<std::string> save() const;

  /// Over a bucket, reads the other replicas' figures into the statistics
  /// (TeamUsage::refresh) and returns its lines for the log; else nothing.
  std::vector<std::string> refresh_team();

 private:
  UsageStats& m_stats;
  std::optional<std::filesystem::path> m_file;
  std::unique_ptr<TeamUsage> m_team;
  int m_interval_s = k_save_interval_s;
};

}  // namespace opcache::server
