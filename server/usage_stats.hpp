// What the team cache is used for, as the dashboard (/ui/) and the
// /v1/stats/* endpoints show it: traffic over time (server/usage_series),
// the keys that were missed (server/miss_table) and activity per token.
// Counts this process's traffic (one replica) into its tables
// (server/usage_tables); persisted to a file when the storage is local, so a
// restart keeps the history, or to the shared bucket by each replica over
// one (server/usage_history, server/team_usage), whose answers then add the
// other replicas' last figures (set_team). Fixed memory and file size
// (docs/operations.md "Usage statistics").
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/mutex.hpp"
#include "opcache/result.hpp"
#include "remote/lookup_headers.hpp"
#include "server/kernel_lookups.hpp"
#include "server/miss_table.hpp"
#include "server/routes.hpp"
#include "server/storage.hpp"
#include "server/usage_series.hpp"
#include "server/usage_tables.hpp"

namespace opcache::server {

/// The windows the statistics answer for.
enum class StatsWindow { hour, day, days30 };

/// A window's name in the API, its length and the resolution it is kept at.
struct WindowSpec {
  const char* name;                  ///< "hour", "day" or "30d"
  std::int64_t seconds;              ///< its length
  std::int64_t resolution_seconds;   ///< its buckets: 60, or 3600 for 30d
  std::int64_t default_step_seconds;
};

/// The spec of `window`.
const WindowSpec& window_spec(StatsWindow window) noexcept;
/// "hour", "day" or "30d"; else a `usage` error naming the allowed values.
Result<StatsWindow> parse_window(std::string_view name);

/// One frame of a batch fetch that said whether the kernel is there (frames
/// that ask the client to come back later say nothing).
struct FetchedKernel {
  std::string key;
  bool sent = false;       ///< its bundle is in the response; else the server has no such entry (or revoked it)
  std::int64_t bytes = 0;  ///< the bundle's size, when sent
  std::shared_ptr<const EntryFacts> facts;  ///< of the entry sent, when the storage told
};

/// One answered request, as the session saw it.
struct UsageEvent {
  RouteId route = RouteId::unknown;  ///< Route::id
  std::string_view method;
  int status = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::string_view token_name;  ///< "-" when anonymous
  std::string_view client;      ///< the client's address (no port)
  std::string_view key;         ///< for entry routes
  const EntryFacts* facts = nullptr;  ///< of the entry served, when the storage told
  std::string_view op_type_header;    ///< X-Opcache-Op-Type, as received (may be empty)
  std::string_view scenario_header;   ///< X-Opcache-Scenario, as received (may be empty)
  std::span<const FetchedKernel> fetched;  ///< a batch fetch's frames
};

/// The lookup headers a client may send (docs/protocol.md "Lookup hints"),
/// named where the client builds them.
using remote::k_op_type_header;
using remote::k_scenario_header;

/// The X-Opcache-Op-Type value if it is one (1 to 128 printable ASCII
/// bytes), else "".
std::string op_type_from_header(std::string_view value);
/// The canonical JSON of the scenario object whose unpadded base64url is
/// `value` (at most 2048 bytes), or "" when it is not one.
std::string scenario_from_header(std::string_view value);

/// The statistics. Thread-safe: one mutex, held for a record (no I/O) or
/// while an answer is copied out.
///
/// Every answer (totals, summary, timeseries, misses, tokens) is the team's:
/// this process's own figures plus those of set_team, when a replica over a
/// shared bucket has given the other replicas' (docs/protocol.md
/// "Statistics"); replica_totals() is this process's alone.
class UsageStats {
 public:
  /// Unix time in milliseconds.
  using Clock = std::function<std::int64_t()>;

  /// Keys kept in the misses table; token names kept.
  static constexpr std::size_t k_missed_keys = k_usage_missed_keys;
  static constexpr std::size_t k_token_names = k_usage_token_names;

  /// Starts empty, with the history beginning now (`clock`: the system
  /// clock unless a test gives its own).
  explicit UsageStats(Clock clock = {});

  /// Counts `event` as its route's UsageRule says (docs/protocol.md
  /// "Statistics"): each kernel once per client and episode
  /// (server/kernel_lookups).
  void record(const UsageEvent& event);

  /// The counters since the history began, the team's: what /v1/status
  /// reports as hits and misses.
  UsageCounts totals() const;
  /// This process's own counters since its history began: what /metrics
  /// reports (per replica, as Prometheus expects).
  UsageCounts replica_totals() const;

  /// Adds `team` (the other replicas' figures; null for none) to every
  /// answer from now on, replacing the previous team figures. Thread-safe.
  void set_team(std::shared_ptr<const TeamFigures> team);

  /// The traffic part of GET /v1/stats/summary for `window`: window, from_ms,
  /// to_ms, the counters, all_time, top_op_types and top_scenarios.
  nlohmann::json summary(StatsWindow window) const;
  /// GET /v1/stats/timeseries: `step_seconds` (0: the window's default) must
  /// be a positive multiple of the window's resolution giving at most 1440
  /// points, else a `usage` error saying so.
  Result<nlohmann::json> timeseries(StatsWindow window, std::int64_t step_seconds) const;
  /// GET /v1/stats/misses with at most `limit` groups.
  nlohmann::json misses(std::size_t limit) const;
  /// GET /v1/stats/tokens: every token name seen, most recently seen first.
  nlohmann::json tokens() const;

  /// This process's history as a document (server/usage_tables: format
  /// "opcache-serve-stats", version 1), saved_ms now. Never the team's.
  nlohmann::json document() const;
  /// Adds the history of `tables` to this process's own (add_tables): a
  /// replica restarted under its name takes back what it had written,
  /// keeping what it counted since it started.
  void absorb(const UsageTables& tables);

  /// Writes this process's whole history to `file` atomically (document()).
  Status save(const std::filesystem::path& file) const;
  /// Replaces the history with that of `file`. Absent: nothing changes, no
  /// error. Unreadable, malformed or of another format version: a `corrupt`
  /// (or `io`) error naming the file, and nothing changes.
  Status load(const std::filesystem::path& file);

 private:
  std::int64_t now_ms() const;
  /// Counts `answer` about `key` to the event's client into `counts` (and the
  /// series' named hits, the misses table, a miss taken back).
  void count_kernel(const UsageEvent& event, std::string_view key, KernelAnswer answer, const EntryFacts* facts,
                    std::int64_t bytes_sent, std::int64_t now, UsageCounts& counts, TokenActivity& token)
      REQUIRES(m_mutex);
  /// The activity of the event's token name (a scratch one past k_token_names).
  TokenActivity& token_of(std::string_view name, TokenActivity& scratch) REQUIRES(m_mutex);

  Clock m_clock;
  mutable base::Mutex m_mutex;
  UsageTables m_own GUARDED_BY(m_mutex);
  KernelLookups m_episodes GUARDED_BY(m_mutex);
  std::shared_ptr<const TeamFigures> m_team GUARDED_BY(m_mutex);
};

/// The file the history is kept in, inside Storage::state_dir().
inline constexpr const char* k_usage_file_name = "serve-stats.json";

}  // namespace opcache::server
