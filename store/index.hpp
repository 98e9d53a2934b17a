// The SQLite index (index.db) of a local store: one row per key, the object
// digest it points to, listing columns, access times, and counters.
// Schema and migrations: docs/formats.md "Index schema".
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "opcache/result.hpp"
#include "opcache/types.hpp"
#include "store/signature.hpp"
#include "store/sqlite.hpp"

namespace opcache::store {

/// The schema version this code creates and expects (PRAGMA user_version).
inline constexpr int k_index_schema_version = 2;

using IndexEntry = opcache::Entry;
using opcache::ListFilter;
using IndexTotals = opcache::StoreTotals;

/// Names of the counters kept in the index.
namespace counter {
inline constexpr const char* hits = "hits";
inline constexpr const char* misses = "misses";
inline constexpr const char* stores = "stores";
inline constexpr const char* already_present = "already_present";
inline constexpr const char* removals = "removals";
inline constexpr const char* evictions = "evictions";
inline constexpr const char* bytes_stored = "bytes_stored";
inline constexpr const char* bytes_served = "bytes_served";
inline constexpr const char* corrupt_entries = "corrupt_entries";
inline constexpr const char* missing_objects = "missing_objects";
inline constexpr const char* refused_untrusted = "refused_untrusted";  // entries a signature requirement refused
inline constexpr const char* saved_ms = "compile_ms_saved";
inline constexpr const char* store_bytes = "store_bytes";      // kept by triggers
inline constexpr const char* store_entries = "store_entries";  // kept by triggers
}  // namespace counter

/// The index. Owns one connection; not thread-safe (LocalStore serializes).
/// Safe for several processes at once: WAL, busy timeout, BEGIN IMMEDIATE.
class Index {
 public:
  /// Opens or creates the index, creating or migrating the schema under a
  /// write lock. A schema newer than this code is refused (`usage`), as is a
  /// file that is not an opcache index. `on_lock_wait` is called each time
  /// opening waits for another connection's lock (store/sqlite.hpp).
  static Result<Index> open(const std::filesystem::path& path, int busy_timeout_ms,
                            LockWaitObserver on_lock_wait = {});

  /// Starts a write transaction (BEGIN IMMEDIATE).
  Result<Transaction> begin() { return Transaction::begin(m_db); }
  /// Commits made while the returned guard lives are not synced to disk: for
  /// hit counts, access times and counters only (see DeferredSync).
  DeferredSync defer_sync() { return DeferredSync(m_db); }
  /// defer_sync() when `defer` is true; nothing (commits stay synced) otherwise.
  std::optional<DeferredSync> defer_sync_if(bool defer) {
    if (!defer) return std::nullopt;
    return std::optional<DeferredSync>(std::in_place, m_db);
  }

  Result<std::optional<IndexEntry>> lookup(const std::string& key);
  /// Inserts or replaces the row for entry.key.
  Status upsert(const IndexEntry& entry);
  /// Inserts the row for entry.key, which must have none (a constraint
  /// error otherwise): for a caller that looked in the same transaction.
  /// Cheaper to prepare than upsert().
  Status insert(const IndexEntry& entry);
  /// Deletes the row; when `only_if_digest` is set, only if it still points
  /// there. Returns whether a row was deleted.
  Result<bool> remove(const std::string& key, const std::optional<std::string>& only_if_digest = std::nullopt);
  Result<bool> digest_referenced(const std::string& digest);
  /// Replaces the signatures of `key` if its row still points at `digest`
  /// (docs/formats.md "Signatures"). Returns whether a row was updated.
  Result<bool> set_signatures(const std::string& key, const std::string& digest, const Signatures& signatures);
  /// Records `count` hits: hits+count, and last access = max(last access,
  /// `access_ms`) when `update_access`.
  Status record_hits(const std::string& key, std::int64_t count, std::int64_t access_ms, bool update_access);
  Status add_counter(const std::string& name, std::int64_t delta);
  /// Prepares now the statements a put of a new key runs (lookup, insert,
  /// add_counter), which are otherwise prepared on first use: for a caller
  /// with time to spare before it writes. A failure is left for that use.
  void prepare_put_statements();
  Result<std::map<std::string, std::int64_t>> counters();
  Result<IndexTotals> totals();
  Result<std::vector<IndexEntry>> list(const ListFilter& filter);
  /// Calls `visit` for every row in key order; stops early if it returns false.
  Status for_each(const std::function<bool(const IndexEntry&)>& visit);
  Result<bool> set_pinned(const std::string& key, bool pinned);
  /// One counter's value (0 when never set).
  Result<std::int64_t> counter_value(const std::string& name);
  /// Unpinned entries in least-recently-used order, starting strictly after
  /// (after_access_ms, after_key), at most `limit`. The statement is prepared
  /// once per connection (at its first use), so paging through a large store
  /// costs one index range scan per page.
  Result<std::vector<IndexEntry>> least_recently_used(std::int64_t after_access_ms, const std::string& after_key,
                                                      std::int64_t limit);

  Database& database() noexcept { return m_db; }

 private:
  explicit Index(Database db) : m_db(std::move(db)) {}
  Status prepare_statements();
  Status write_row(Statement& statement, const IndexEntry& entry);

  Database m_db;
  Statement m_lookup;
  Statement m_insert;
  Statement m_upsert;
  Statement m_remove;
  Statement m_remove_if_digest;
  Statement m_digest_referenced;
  Statement m_set_signatures;
  Statement m_record_hit;
  Statement m_record_hit_no_access;
  Statement m_add_counter;
  Statement m_least_recently_used;
};

}  // namespace opcache::store
