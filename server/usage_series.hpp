// The traffic of `opcache serve` over time: counters in fixed-size rings of
// time buckets (one per minute for a day, one per hour for 30 days), with
// the hits of each bucket by op type and by scenario. Memory is fixed by the
// ring size and k_named_per_bucket. Part of server/usage_stats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::server {

/// What the statistics count (docs/protocol.md "Statistics").
struct UsageCounts {
  std::int64_t requests = 0;          ///< API requests other than monitoring (stats, status, metrics, healthz, ui)
  std::int64_t lookups = 0;           ///< kernels asked for: hits + misses
  std::int64_t hits = 0;              ///< kernels the team cache gave a client, once per client and episode
  std::int64_t misses = 0;            ///< kernels it did not, once per client and episode
  std::int64_t bytes_served = 0;      ///< bundle bytes sent (GET 200 and batch frames)
  std::int64_t uploads = 0;           ///< PUTs of an entry answered 200 or 201
  std::int64_t bytes_uploaded = 0;    ///< their bodies
  std::int64_t compile_ms_saved = 0;  ///< the recorded build_ms of each kernel sent, once per client and episode

  UsageCounts& operator+=(const UsageCounts& other);
};

/// The counters as JSON, with "hit_rate" (hits / lookups, null without
/// lookups).
nlohmann::json counts_to_json(const UsageCounts& counts);
/// The counters of counts_to_json's JSON; missing fields are 0. A field that
/// is not a non-negative integer is a `corrupt` error naming it.
Result<UsageCounts> counts_from_json(const nlohmann::json& value);

/// Hits by name (an op type, or a scenario's canonical JSON; "" when
/// unknown).
using HitsByName = std::unordered_map<std::string, std::int64_t>;

/// One time bucket.
struct UsageBucket {
  std::int64_t start_ms = -1;  ///< Unix ms at its start; -1 when the slot was never used
  UsageCounts counts;
  HitsByName op_types;   ///< at most k_named_per_bucket names
  HitsByName scenarios;  ///< at most k_named_per_bucket names
};

/// Names kept per bucket in each of UsageBucket's hit maps; hits of further
/// names count in the totals only.
inline constexpr std::size_t k_named_per_bucket = 16;

/// A ring of `slots` buckets of `resolution_ms` each: it holds the last
/// resolution_ms × slots of traffic. Not thread-safe (UsageStats locks).
class UsageSeries {
 public:
  UsageSeries(std::int64_t resolution_ms, std::size_t slots);

  std::int64_t resolution_ms() const noexcept { return m_resolution_ms; }
  /// How far back the ring reaches.
  std::int64_t span_ms() const noexcept { return m_resolution_ms * static_cast<std::int64_t>(m_slots.size()); }

  /// Adds `counts` to the bucket of `at_ms`. A slot that held an older
  /// bucket is reset first (as in name_hit).
  void add(std::int64_t at_ms, const UsageCounts& counts);
  /// Adds one hit of `op_type` and one of `scenario` ("" when unknown) to the
  /// bucket of `at_ms`'s hits by name; the hit itself is counted by add().
  void name_hit(std::int64_t at_ms, const std::string& op_type, const std::string& scenario);

  /// Takes back one miss (and its lookup) from the bucket of `at_ms`, when
  /// the ring still holds that bucket: the miss became a hit later
  /// (server/kernel_lookups).
  void take_back_miss(std::int64_t at_ms);

  /// Adds the buckets of `other` (of the same resolution and size): a
  /// bucket this ring holds with the same start is summed (hits by name
  /// too, at most k_named_per_bucket names); where this ring holds an older
  /// bucket in the slot, other's replaces it; a newer one stays. Sums the
  /// series of several replicas (server/usage_tables).
  void add_series(const UsageSeries& other);

  /// The sums over the buckets starting in [from_ms, to_ms).
  UsageCounts sum(std::int64_t from_ms, std::int64_t to_ms) const;
  /// The sums over each step of `step_ms` from `from_ms` up to `to_ms`,
  /// oldest first; `step_ms` is a multiple of resolution_ms().
  std::vector<UsageCounts> steps(std::int64_t from_ms, std::int64_t to_ms, std::int64_t step_ms) const;
  /// Adds the hits by op type and by scenario of the buckets starting in
  /// [from_ms, to_ms) to `op_types` and `scenarios`.
  void add_named_hits(std::int64_t from_ms, std::int64_t to_ms, HitsByName& op_types, HitsByName& scenarios) const;

  /// The used buckets as a JSON array (for server/usage_stats's file).
  nlohmann::json to_json() const;
  /// Puts back the buckets of to_json's array; buckets of another
  /// resolution or malformed are a `corrupt` error and change nothing.
  Status from_json(const nlohmann::json& value);

 private:
  UsageBucket& bucket_for(std::int64_t at_ms);
  // The bucket that starts at `start_ms` (a multiple of the resolution), or null.
  const UsageBucket* find(std::int64_t start_ms) const;
  template <class Visit>
  void for_each_in(std::int64_t from_ms, std::int64_t to_ms, Visit visit) const;

  std::int64_t m_resolution_ms;
  std::vector<UsageBucket> m_slots;
};

}  // namespace opcache::server
