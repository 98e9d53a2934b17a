// The figures the usage statistics keep (server/usage_stats): totals, the
// two rings of time buckets, the missed keys, activity per token name and
// the recent uploads; their JSON document (the history file, and a
// replica's object in a shared bucket: docs/formats.md "Usage history"); and
// how the figures of several replicas add up into the team's
// (docs/protocol.md "Statistics"). Plain data: not thread-safe (UsageStats
// and TeamUsage lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"
#include "server/miss_table.hpp"
#include "server/usage_series.hpp"

namespace opcache::server {

/// Activity of one token name.
struct TokenActivity {
  UsageCounts counts;
  std::int64_t bytes_in = 0;
  std::int64_t bytes_out = 0;
  std::int64_t last_seen_ms = 0;
};

/// Activity by token name (ordered; lookups by string_view).
using TokenActivities = std::map<std::string, TokenActivity, std::less<>>;

/// One token name's activity as GET /v1/stats/tokens and the document show it.
nlohmann::json token_activity_json(const std::string& name, const TokenActivity& activity);

/// An upload the statistics remember, so that the misses other replicas
/// counted of its key can be dropped: the key is stored now.
struct UploadedKey {
  std::string key;
  std::int64_t at_ms = 0;
};

/// The latest upload of each key (Unix ms), over every replica merged.
using UploadTimes = std::unordered_map<std::string, std::int64_t>;

/// The bounds of the figures (docs/operations.md "Usage statistics").
inline constexpr std::int64_t k_usage_minute_ms = 60'000;
inline constexpr std::size_t k_usage_minutes_kept = 1440;    ///< a day of minutes
inline constexpr std::int64_t k_usage_hour_ms = 3'600'000;
inline constexpr std::size_t k_usage_hours_kept = 720;       ///< 30 days of hours
inline constexpr std::size_t k_usage_missed_keys = 5000;     ///< keys in the misses table
inline constexpr std::size_t k_usage_token_names = 1000;     ///< token names kept
inline constexpr std::size_t k_usage_recent_uploads = 5000;  ///< uploads remembered

/// One server's figures, or the sum of several replicas'.
struct UsageTables {
  std::int64_t since_ms = 0;  ///< when the history began; 0 for none (an empty sum)
  UsageCounts total;
  UsageSeries minutes{k_usage_minute_ms, k_usage_minutes_kept};
  UsageSeries hours{k_usage_hour_ms, k_usage_hours_kept};
  MissTable misses{k_usage_missed_keys};
  TokenActivities tokens;
  std::deque<UploadedKey> uploads;  ///< oldest first, at most k_usage_recent_uploads

  /// Remembers an upload of `key` at `at_ms` (dropping the oldest beyond the bound).
  void remember_upload(std::string key, std::int64_t at_ms);
};

/// The "format" of the document.
inline constexpr const char* k_usage_document_format = "opcache-serve-stats";
/// The version this server writes and reads.
inline constexpr int k_usage_document_version = 1;

/// The document of `tables` (format "opcache-serve-stats", version 1) with
/// `saved_ms`, the moment it is written.
nlohmann::json usage_document(const UsageTables& tables, std::int64_t saved_ms);

/// The tables of usage_document's JSON. Not an object of that format and
/// version, or a malformed field: a `corrupt` error saying what is wrong
/// (the caller adds where it came from). Fields a reader does not know are
/// ignored; "uploads" may be absent (a server before revision 9).
Result<UsageTables> parse_usage_document(const nlohmann::json& value);

/// The document's "saved_ms", or 0 when it has none.
std::int64_t usage_document_saved_ms(const nlohmann::json& value);

/// Adds `other` to `sum`: totals; time buckets with the same start summed
/// (hits by name too, at most k_named_per_bucket names a bucket); token
/// names summed by name (the latest last_seen_ms; at most
/// k_usage_token_names names); missed keys merged by key (merge_missed);
/// uploads interleaved by time; the earlier since_ms. Used to sum the other
/// replicas and to add a replica's own object back after a restart.
void add_tables(UsageTables& sum, const UsageTables& other);

/// Adds the activity of each name of `from` to that name's in `into`
/// (counts and bytes summed, the latest last_seen_ms); names new to `into`
/// only while it holds fewer than k_usage_token_names.
void add_token_activities(TokenActivities& into, const TokenActivities& from);

/// The latest upload of each key in `tables`' recent uploads, added to `times`.
void add_upload_times(UploadTimes& times, const UsageTables& tables);

/// The missed-key records (MissTable::to_json's form) of `tables` as one:
/// records of one key add their requests and unite their clients (at most
/// k_clients_per_key), keep the latest last_ms and the op type and scenario
/// of the latest record that names them. A record whose key was uploaded
/// (`uploaded`) at or after its last miss is dropped: the kernel is stored.
/// At most `capacity` records: those asked for most, then most recently.
nlohmann::json merge_missed(const std::vector<const nlohmann::json*>& tables, const UploadTimes& uploaded,
                            std::size_t capacity);

/// The other replicas' figures that UsageStats merges with its own
/// (server/team_usage builds them from the bucket).
struct TeamFigures {
  std::vector<std::string> replicas;  ///< the other replicas merged, by name
  UsageTables others;                 ///< their sum (misses already without keys uploaded anywhere)
  UploadTimes uploaded;               ///< their recent uploads
};

}  // namespace opcache::server
