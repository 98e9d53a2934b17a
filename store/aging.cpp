// LocalStore aging and clearing (the CANN contract; docs/configuration.md),
// and the retirement of removed entries' objects.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <limits>
#include <optional>

#include "base/file_io.hpp"
#include "base/lock_file.hpp"
#include "base/try.hpp"
#include "store/local_store.hpp"
#include "store/parallel_unlink.hpp"

namespace opcache::store {

namespace {

// Candidates are read in pages, and evicted in transactions, of this many rows:
// one synced commit and one rename pass per batch instead of per entry, yet
// writers in other processes are never blocked for long.
constexpr std::int64_t k_page = 256;

// From this many objects on, retire_objects renames them out of objects/
// under the lock and unlinks them after it (an unlink can wait ~1-2 ms for the
// device); fewer are unlinked in place.
constexpr std::size_t k_unlink_outside_lock = 8;

std::string idle_text(std::int64_t idle_ms) { return std::to_string(idle_ms / 1000) + " s"; }

// What bounds one aging pass.
struct Bounds {
  std::int64_t target_bytes = 0;
  std::int64_t min_idle_ms = 0;
  std::int64_t now = 0;
  std::int64_t idle_cutoff = 0;  // entries used after this stay
  std::int64_t max_entries = -1;  // -1: no bound
};

// Why aging stops at `candidate` with the store at `size` bytes after
// `removed` evictions, or nothing when the candidate may go.
std::optional<std::string> stop_before(const IndexEntry& candidate, std::int64_t size, std::int64_t removed,
                                       const Bounds& bounds) {
  if (size <= bounds.target_bytes) {
    return "reached the target size";
  }
  if (candidate.last_access_ms > bounds.idle_cutoff) {
    // CANN: stop at the first entry used within the grace period.
    return "the least recently used remaining entry was used " + idle_text(bounds.now - candidate.last_access_ms) +
           " ago (min idle " + idle_text(bounds.min_idle_ms) + ")";
  }
  if (bounds.max_entries >= 0 && removed >= bounds.max_entries) {
    return "removed the most one write may remove (" + std::to_string(bounds.max_entries) +
           " entries); the next writes go on";
  }
  return std::nullopt;
}

}  // namespace

Result<std::optional<std::filesystem::path>> LocalStore::move_out_if_unreferenced(const std::string& digest) {
  OPCACHE_TRY_ASSIGN(bool referenced, m_index->digest_referenced(digest));
  if (referenced) {
    return std::optional<std::filesystem::path>();
  }
  // A temp name of this process in tmp/: if we die before the unlink,
  // verify's stale-temp check removes it.
  auto object = m_layout.object_path(digest);
  auto doomed = m_layout.tmp() / (std::to_string(::getpid()) + "-" + base::random_token() + ".tmp");
  if (::rename(object.c_str(), doomed.c_str()) != 0) {
    if (errno == ENOENT) {
      return std::optional<std::filesystem::path>();
    }
    return base::errno_error("cannot move out", object, errno);
  }
  return std::optional<std::filesystem::path>(std::move(doomed));
}

Status LocalStore::retire_objects(const std::vector<std::string>& digests) {
  if (digests.empty()) {
    return {};
  }
  std::vector<std::filesystem::path> doomed;
  Status committed;
  {
    base::MutexLock lock(m_index_mutex);
    OPCACHE_TRY(open_index());
    // A write transaction only to serialize with publish(): a put that links
    // one of these objects again either commits its row first (and we keep the
    // object) or finds it gone inside its own transaction and relinks it.
    OPCACHE_TRY_ASSIGN(Transaction transaction, m_index->begin());
    for (const auto& digest : digests) {
      if (digests.size() < k_unlink_outside_lock) {
        committed = unlink_if_unreferenced(digest);
      } else if (auto moved = move_out_if_unreferenced(digest); !moved) {
        committed = moved.error();
      } else if (*moved) {
        doomed.push_back(std::move(**moved));
      }
      if (!committed) {
        break;
      }
    }
    auto commit = transaction.commit();
    committed = committed ? commit : committed;
  }
  // A batch's objects were only renamed under the lock (fast); their
  // unlinks, which wait for the device, run here, several at once.
  auto unlinked = unlink_all(doomed);
  return committed ? unlinked : committed;
}

Result<std::vector<IndexEntry>> LocalStore::evict(const std::vector<IndexEntry>& candidates,
                                                  std::int64_t idle_cutoff_ms) {
  std::vector<IndexEntry> removed;
  if (candidates.empty()) {
    return removed;
  }
  // The records first (see remove()); a candidate kept after all gets its
  // record again at its next hit.
  std::vector<std::string> keys;
  for (const auto& candidate : candidates) {
    keys.push_back(candidate.key);
  }
  erase_key_records(keys);
  {
    base::MutexLock lock(m_index_mutex);
    OPCACHE_TRY(open_index());
    OPCACHE_TRY_ASSIGN(Transaction transaction, m_index->begin());
    for (const auto& candidate : candidates) {
      // Re-check under the write lock: it may have been used or pinned since we listed it.
      OPCACHE_TRY_ASSIGN(auto current, m_index->lookup(candidate.key));
      if (!current || current->pinned || current->last_access_ms > idle_cutoff_ms ||
          current->digest != candidate.digest) {
        continue;
      }
      OPCACHE_TRY(m_index->remove(candidate.key, candidate.digest));
      removed.push_back(candidate);
    }
    OPCACHE_TRY(m_index->add_counter(counter::evictions, static_cast<std::int64_t>(removed.size())));
    OPCACHE_TRY(transaction.commit());
  }
  // The objects go only after the rows' removal is committed (see remove()).
  std::vector<std::string> digests;
  for (const auto& entry : removed) {
    digests.push_back(entry.digest);
  }
  OPCACHE_TRY(retire_objects(digests));
  return removed;
}

Result<GcReport> LocalStore::collect_garbage(const AgingPolicy& policy, GcMode mode, const std::string& keep_key) {
  return age(policy, mode, keep_key, /*max_entries=*/-1, /*continuing=*/false);
}

Result<GcReport> LocalStore::age(const AgingPolicy& policy, GcMode mode, const std::string& keep_key,
                                 std::int64_t max_entries, bool continuing) {
  GcReport report;
  report.aging_enabled = policy.enabled();
  report.dry_run = mode == GcMode::dry_run;
  report.limit_bytes = policy.max_bytes;
  report.target_bytes = policy.enabled() ? policy.target_bytes() : -1;
  report.min_idle_ms = policy.min_idle_ms;
  OPCACHE_TRY(fold_hits());  // aging decides on access times
  {
    base::MutexLock lock(m_index_mutex);
    OPCACHE_TRY(open_index());
    OPCACHE_TRY_ASSIGN(report.bytes_before, m_index->counter_value(counter::store_bytes));
    OPCACHE_TRY_ASSIGN(report.entries_before, m_index->counter_value(counter::store_entries));
  }
  report.bytes_after = report.bytes_before;
  if (!policy.enabled()) {
    report.stopped_because = "aging is disabled (max_op_cache_size = -1)";
    return report;
  }
  if (report.bytes_before <= (continuing ? report.target_bytes : policy.max_bytes)) {
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

  Bounds bounds;
  bounds.target_bytes = report.target_bytes;
  bounds.min_idle_ms = policy.min_idle_ms;
  bounds.now = m_options.clock();
  bounds.idle_cutoff = bounds.now - policy.min_idle_ms;
  bounds.max_entries = max_entries;
  std::int64_t after_access = std::numeric_limits<std::int64_t>::min();
  std::string after_key;
  report.stopped_because = "no more unpinned entries";
  for (;;) {
    std::vector<IndexEntry> page;
    {
      base::MutexLock lock(m_index_mutex);
      OPCACHE_TRY(open_index());
      OPCACHE_TRY_ASSIGN(page, m_index->least_recently_used(after_access, after_key, k_page));
    }
    if (page.empty()) {
      break;
    }
    // The page is evicted in batches; a batch ends where the projected size,
    // the idle rule or the bound says stop, and the stop is checked again with
    // what was really removed (an entry used or pinned meanwhile stays).
    std::size_t next = 0;
    while (next < page.size()) {
      std::vector<IndexEntry> batch;
      std::int64_t size = report.bytes_after;
      std::optional<std::string> stop;
      for (; next < page.size(); ++next) {
        const IndexEntry& candidate = page[next];
        stop = stop_before(candidate, size, report.entries_removed + static_cast<std::int64_t>(batch.size()), bounds);
        if (stop) {
          break;
        }
        if (candidate.key != keep_key) {
          size -= candidate.bundle_size;
          batch.push_back(candidate);
        }
      }
      std::vector<IndexEntry> removed = batch;
      if (mode == GcMode::remove) {
        OPCACHE_TRY_ASSIGN(removed, evict(batch, bounds.idle_cutoff));
      }
      for (auto& entry : removed) {
        report.bytes_after -= entry.bundle_size;
        report.bytes_removed += entry.bundle_size;
        ++report.entries_removed;
        report.removed.push_back(std::move(entry));
      }
      if (stop && removed.size() == batch.size()) {
        report.stopped_because = *stop;
        return report;
      }
    }
    after_access = page.back().last_access_ms;
    after_key = page.back().key;
  }
  if (report.bytes_after <= report.target_bytes) {
    report.stopped_because = "reached the target size";
  }
  return report;
}

bool LocalStore::aging_due() {
  if (!m_options.aging.enabled()) {
    return false;
  }
  std::int64_t size = 0;
  {
    base::MutexLock lock(m_index_mutex);
    if (!open_index()) {
      return false;
    }
    auto value = m_index->counter_value(counter::store_bytes);
    if (!value) {
      return false;
    }
    size = *value;
  }
  // Past the limit, aging starts; a pass cut short by the bound goes on at
  // the next writes until the store is down to its target.
  if (size <= (m_aging_continues.load() ? m_options.aging.target_bytes() : m_options.aging.max_bytes)) {
    m_aging_continues = false;
    return false;
  }
  return true;
}

void LocalStore::age_after_write(const std::string& written_key) {
  if (!aging_due()) {
    return;
  }
  const bool continuing = m_aging_continues.load();
  auto report = age(m_options.aging, GcMode::remove, written_key, m_options.evictions_per_write, continuing);
  if (!report) {
    m_options.warn("aging after a write failed: " + report.error().message());
    return;
  }
  m_aging_continues = m_options.evictions_per_write >= 0 &&
                      report->entries_removed >= m_options.evictions_per_write &&
                      report->bytes_after > report->target_bytes;
}

Result<ClearReport> LocalStore::clear() {
  ClearReport report;
  for (;;) {
    std::vector<IndexEntry> page;
    {
      base::MutexLock lock(m_index_mutex);
      OPCACHE_TRY(open_index());
      ListFilter filter;
      filter.limit = k_page;
      OPCACHE_TRY_ASSIGN(page, m_index->list(filter));
    }
    if (page.empty()) {
      break;
    }
    std::vector<std::string> retired, page_keys;
    std::int64_t removed_bytes = 0;
    for (const auto& entry : page) {
      page_keys.push_back(entry.key);
    }
    erase_key_records(page_keys);  // the records first (see remove())
    {
      base::MutexLock lock(m_index_mutex);
      OPCACHE_TRY(open_index());
      OPCACHE_TRY_ASSIGN(Transaction transaction, m_index->begin());
      for (const auto& entry : page) {
        OPCACHE_TRY_ASSIGN(bool removed, m_index->remove(entry.key, entry.digest));
        if (removed) {
          retired.push_back(entry.digest);
          removed_bytes += entry.bundle_size;
        }
      }
      OPCACHE_TRY(m_index->add_counter(counter::removals, static_cast<std::int64_t>(retired.size())));
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
