// The usage statistics of the replicas over one shared bucket
// (docs/protocol.md "Statistics", docs/formats.md "Replica usage objects"):
// each replica writes its own figures, with its name, to
// v1/stats/replicas/<name>.json every stats interval and at a graceful
// stop, reads that object back when it starts again under the same name,
// and merges every other replica's last object into its answers
// (UsageStats::set_team), so the dashboard and `opcache stats --remote` of
// any replica show the whole team. /metrics stays per replica.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.hpp"
#include "opcache/result.hpp"
#include "server/usage_stats.hpp"

namespace opcache::remote {
class S3Client;
}

namespace opcache::server {

/// Longest replica name (bytes).
inline constexpr std::size_t k_max_replica_name = 100;

/// Why `name` cannot name a replica (`--replica`): it must be 1 to
/// k_max_replica_name visible ASCII characters (no space, no control
/// character) other than '/'. std::nullopt when it can.
std::optional<std::string> replica_name_problem(std::string_view name);

/// The replica's name when `--replica` is not set: "<host name>:<port>",
/// `port` the first one the server listens on; characters the name may
/// not hold are replaced by '_' (and the host name shortened to fit).
std::string default_replica_name(int port);

/// One replica's share of the team's statistics in the bucket. Thread-safe:
/// the calls run one at a time (one mutex, held across their requests to
/// the bucket; the server calls them from one worker task at a time).
class TeamUsage {
 public:
  /// Unix time in milliseconds.
  using Clock = std::function<std::int64_t()>;
  /// Objects written longer ago than this are not merged: the 30 days the
  /// history keeps (a replica gone for good drops out of the team's figures
  /// then, all-time totals included).
  static constexpr std::int64_t k_retention_ms = 30LL * 86'400'000;
  /// The other replicas' objects are listed and read at most this often.
  static constexpr std::int64_t k_refresh_ms = 2000;
  /// The largest object read (a full history is about 32 MB at worst).
  static constexpr std::size_t k_max_object_bytes = std::size_t{64} << 20;

  /// `replica`'s share in `client`'s location (names relative to its
  /// prefix), of `stats`. `client` and `stats` must outlive this. Performs
  /// no I/O.
  TeamUsage(remote::S3Client& client, std::string replica, UsageStats& stats, Clock clock = {});

  const std::string& replica() const noexcept { return m_replica; }
  /// "v1/stats/replicas/<replica, percent-encoded>.json".
  const std::string& object_name() const noexcept { return m_name; }

  /// Adds this replica's own object back into the statistics
  /// (UsageStats::absorb): a restart under the same name loses at most one
  /// interval. Absent: nothing to add. An object that cannot be used (not
  /// JSON, another format or version, a malformed field) is copied to
  /// "<object>.bad", never deleted (the next save() replaces it), and the
  /// statistics go on without it. A failure to read it (the bucket
  /// unreachable) is retried by every save() before it writes, so a replica
  /// never replaces its object with less than it held. Returns a line for
  /// the log when there is something to say, else std::nullopt.
  std::optional<std::string> load();

  /// Writes this replica's figures (UsageStats::document, plus "replica")
  /// to its object, through a temp file. A line for the log when it could
  /// not (or when the object could still not be read first), else nullopt.
  std::optional<std::string> save();

  /// Lists the other replicas' objects, reads those new or changed since
  /// the last refresh (by ETag), and gives the sum of those written within
  /// k_retention_ms to the statistics (UsageStats::set_team); this
  /// replica's own object is never among them (its live figures stand for
  /// it). Nothing when the last refresh was less than k_refresh_ms ago.
  /// When the bucket fails, the figures read before stay. Returns lines for
  /// the log: the replicas merged when they change, an object that cannot
  /// be used (once per version of it), a listing that failed (once until
  /// one succeeds).
  std::vector<std::string> refresh();

 private:
  // One other replica's object as last read.
  struct Seen {
    std::string etag;
    std::shared_ptr<const UsageTables> tables;  // null when the object could not be used
    std::string replica;                        // the name inside it
    std::int64_t saved_ms = 0;
  };

  // Reads `name` whose listing said `etag` into `seen`; a line for the log
  // when it cannot be used (once per ETag).
  std::optional<std::string> read_other(const std::string& name, const std::string& etag, Seen& seen)
      REQUIRES(m_mutex);
  // Copies `body` (this replica's unusable object) to "<object>.bad".
  Status keep_aside(const std::string& body) REQUIRES(m_mutex);
  // Writes `text` to the object `name`.
  Status write_object(const std::string& name, const std::string& text) REQUIRES(m_mutex);
  std::optional<std::string> load_locked() REQUIRES(m_mutex);

  remote::S3Client& m_client;
  const std::string m_replica;
  const std::string m_name;
  UsageStats& m_stats;
  Clock m_clock;

  base::Mutex m_mutex;
  bool m_loaded GUARDED_BY(m_mutex) = false;
  std::optional<std::int64_t> m_last_refresh_ms GUARDED_BY(m_mutex);
  bool m_listing_failed GUARDED_BY(m_mutex) = false;
  std::map<std::string, Seen> m_seen GUARDED_BY(m_mutex);  // by object name
  std::vector<std::string> m_merged GUARDED_BY(m_mutex);   // the replicas in the team figures now
  std::optional<std::string> m_included GUARDED_BY(m_mutex);  // the objects they were made of (names, ETags)
};

}  // namespace opcache::server
