// LocalStore aging and clearing (the CANN contract; docs/configuration.md).
#include <unistd.h>

#include <limits>

#include "store/local_store.hpp"
#include "base/lock_file.hpp"
#include "base/try.hpp"

namespace opcache::store {

namespace {

// Candidates are read in pages; each eviction is its own short transaction so
// writers in other processes are never blocked for long.
constexpr std::int64_t k_page = 256;

std::string idle_text(std::int64_t idle_ms) { return std::to_string(idle_ms / 1000) + " s"; }

}  // namespace

Result<bool> LocalStore::evict(const IndexEntry& candidate, std::int64_t idle_cutoff_ms) {
  {
    std::lock_guard lock(m_index_mutex);
    OPCACHE_TRY_ASSIGN(Transaction transaction, m_index.begin());
    // Re-check under the write lock: it may have been used or pinned since we listed it.
    OPCACHE_TRY_ASSIGN(auto current, m_index.lookup(candidate.key));
    if (!current || current->pinned || current->last_access_ms > idle_cutoff_ms ||
        current->digest != candidate.digest) {
      return false;
    }
    OPCACHE_TRY(m_index.remove(candidate.key, candidate.digest));
    OPCACHE_TRY(m_index.add_counter(counter::evictions, 1));
    OPCACHE_TRY(transaction.commit());
  }
  // The object goes only after the row's removal is committed (see remove()).
  OPCACHE_TRY(retire_objects({candidate.digest}));
  return true;
}

Result<GcReport> LocalStore::collect_garbage(const AgingPolicy& policy, GcMode mode, const std::string& keep_key) {
  GcReport report;
  report.aging_enabled = policy.enabled();
  report.dry_run = mode == GcMode::dry_run;
  report.limit_bytes = policy.max_bytes;
  report.target_bytes = policy.enabled() ? policy.target_bytes() : -1;
  report.min_idle_ms = policy.min_idle_ms;
  OPCACHE_TRY(flush_hits());  // aging decides on access times
  {
    std::lock_guard lock(m_index_mutex);
    OPCACHE_TRY_ASSIGN(report.bytes_before, m_index.counter_value(counter::store_bytes));
    OPCACHE_TRY_ASSIGN(report.entries_before, m_index.counter_value(counter::store_entries));
  }
  report.bytes_after = report.bytes_before;
  if (!policy.enabled()) {
    report.stopped_because = "aging is disabled (max_op_cache_size = -1)";
    return report;
  }
  if (report.bytes_before <= policy.max_bytes) {
    report.stopped_because = "the store is within its limit";
    return report;
  }
  std::optional<base::LockFile> gc_lock;
  if (mode == GcMode::remove) {
    OPCACHE_TRY_ASSIGN(auto held, base::LockFile::try_acquire(m_layout.locks() / "gc.lock"));
    if (!held) {
      report.stopped_because = "another process is aging this store right now";
      return report;
    }
    gc_lock = std::move(held);
  }

  const std::int64_t now = m_options.clock();
  const std::int64_t idle_cutoff = now - policy.min_idle_ms;
  std::int64_t size = report.bytes_before;
  std::int64_t after_access = std::numeric_limits<std::int64_t>::min();
  std::string after_key;
  for (;;) {
    std::vector<IndexEntry> page;
    {
      std::lock_guard lock(m_index_mutex);
      OPCACHE_TRY_ASSIGN(page, m_index.least_recently_used(after_access, after_key, k_page));
    }
    if (page.empty()) {
      report.stopped_because = "no more unpinned entries";
      break;
    }
    for (const auto& candidate : page) {
      if (size <= report.target_bytes) {
        report.stopped_because = "reached the target size";
        report.bytes_after = size;
        return report;
      }
      if (candidate.last_access_ms > idle_cutoff) {
        // CANN: stop at the first entry used within the grace period.
        report.stopped_because = "the least recently used remaining entry was used " +
                                 idle_text(now - candidate.last_access_ms) + " ago (min idle " +
                                 idle_text(policy.min_idle_ms) + ")";
        report.bytes_after = size;
        return report;
      }
      if (candidate.key == keep_key) {
        continue;
      }
      bool removed = true;
      if (mode == GcMode::remove) {
        OPCACHE_TRY_ASSIGN(removed, evict(candidate, idle_cutoff));
      }
      if (removed) {
        size -= candidate.bundle_size;
        ++report.entries_removed;
        report.bytes_removed += candidate.bundle_size;
        report.removed.push_back(candidate);
      }
    }
    after_access = page.back().last_access_ms;
    after_key = page.back().key;
  }
  if (size <= report.target_bytes) {
    report.stopped_because = "reached the target size";
  }
  report.bytes_after = size;
  return report;
}

void LocalStore::age_after_write(const std::string& written_key) {
  if (!m_options.aging.enabled()) {
    return;
  }
  std::int64_t size = 0;
  {
    std::lock_guard lock(m_index_mutex);
    auto value = m_index.counter_value(counter::store_bytes);
    if (!value) {
      return;
    }
    size = *value;
  }
  if (size <= m_options.aging.max_bytes) {
    return;
  }
  auto report = collect_garbage(m_options.aging, GcMode::remove, written_key);
  if (!report) {
    m_options.warn("aging after a write failed: " + report.error().message());
  }
}

Result<ClearReport> LocalStore::clear() {
  ClearReport report;
  for (;;) {
    std::vector<IndexEntry> page;
    {
      std::lock_guard lock(m_index_mutex);
      ListFilter filter;
      filter.limit = k_page;
      OPCACHE_TRY_ASSIGN(page, m_index.list(filter));
    }
    if (page.empty()) {
      break;
    }
    std::vector<std::string> retired;
    std::int64_t removed_bytes = 0;
    {
      std::lock_guard lock(m_index_mutex);
      OPCACHE_TRY_ASSIGN(Transaction transaction, m_index.begin());
      for (const auto& entry : page) {
        OPCACHE_TRY_ASSIGN(bool removed, m_index.remove(entry.key, entry.digest));
        if (removed) {
          retired.push_back(entry.digest);
          removed_bytes += entry.bundle_size;
        }
      }
      OPCACHE_TRY(m_index.add_counter(counter::removals, static_cast<std::int64_t>(retired.size())));
      OPCACHE_TRY(transaction.commit());
    }
    report.entries_removed += static_cast<std::int64_t>(retired.size());
    report.bytes_removed += removed_bytes;
    // The objects go only after the rows' removal is committed (see remove()).
    OPCACHE_TRY(retire_objects(retired));
  }
  VerifyReport leftovers;
  verify_objects(/*repair=*/true, leftovers);
  verify_temps(/*repair=*/true, leftovers);
  return report;
}

}  // namespace opcache::store
