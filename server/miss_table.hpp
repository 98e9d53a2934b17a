// The keys the team asked `opcache serve` for and did not find: what to
// pre-build next. Bounded: at most `capacity` keys, each counting at most
// k_clients_per_key distinct clients. Part of server/usage_stats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::server {

/// Distinct clients counted per missed key (further ones are not told apart).
inline constexpr std::size_t k_clients_per_key = 64;

/// One missed key.
struct MissRecord {
  std::string op_type;   ///< from the lookup's X-Opcache-Op-Type; "" when never sent
  std::string scenario;  ///< canonical JSON from X-Opcache-Scenario; "" when never sent
  std::int64_t requests = 0;
  std::int64_t last_ms = 0;
  std::vector<std::uint64_t> clients;  ///< sorted hashes of (token name, client address)
};

/// Missed keys with what is known of them. Not thread-safe (UsageStats locks).
class MissTable {
 public:
  /// Holds at most `capacity` keys (at least 1): a new key beyond that
  /// replaces the key asked for least (the oldest of those).
  explicit MissTable(std::size_t capacity);

  /// Counts a miss of `key` by `client` at `at_ms`; a non-empty op type or
  /// scenario replaces what was known.
  void record(const std::string& key, const std::string& op_type, const std::string& scenario, std::uint64_t client,
              std::int64_t at_ms);
  /// Drops `key` (it is stored now); nothing when absent.
  void forget(const std::string& key);

  std::size_t size() const noexcept { return m_records.size(); }
  std::size_t capacity() const noexcept { return m_capacity; }

  /// The misses grouped by (op type, scenario), most requested group first,
  /// at most `limit` groups, each with its 10 most requested keys
  /// (docs/protocol.md "GET /v1/stats/misses").
  nlohmann::json groups_json(std::size_t limit) const;

  /// Every record, for server/usage_stats's file.
  nlohmann::json to_json() const;
  /// Puts back to_json's records (up to the capacity); a malformed record is
  /// a `corrupt` error and changes nothing.
  Status from_json(const nlohmann::json& value);

 private:
  void make_room();

  std::size_t m_capacity;
  std::unordered_map<std::string, MissRecord> m_records;
};

/// The hash identifying a client in MissRecord::clients (FNV-1a 64 of the
/// token name and the address; stable across runs and builds).
std::uint64_t client_hash(std::string_view token_name, std::string_view address);

}  // namespace opcache::server
