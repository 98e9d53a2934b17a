// LocalStore's core (declared in store/local_store.hpp): opening the store
// and its index, the key records a hit reads instead of the index, lookups,
// removal and revocation, listing, statistics and pins. The hit path is in
// local_store_hit.cpp, the write path in local_store_write.cpp, verify in
// local_store_verify.cpp, the signatures in local_store_signatures.cpp and
// aging in aging.cpp.
#include "store/local_store.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "base/try.hpp"
#include "store/key.hpp"

namespace opcache::store {

namespace {

// Key records a store remembers in memory, at most (about 0.5 KiB each).
constexpr std::size_t k_remembered_records = 4096;

}  // namespace

Clock system_clock_ms() {
  return [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
}

Result<std::unique_ptr<LocalStore>> LocalStore::open(StoreOptions options) {
  if (!options.clock) {
    options.clock = system_clock_ms();
  }
  if (!options.warn) {
    options.warn = [](const std::string& message) { std::fprintf(stderr, "opcache: warning: %s\n", message.c_str()); };
  }
  StoreLayout layout(options.root, options.sharing);
  OPCACHE_TRY(layout.create_directories());
  const bool create_index = options.new_index == NewIndex::on_open;
  std::unique_ptr<LocalStore> store(new LocalStore(std::move(options)));
  struct stat info {};
  if (create_index && ::lstat(layout.index().c_str(), &info) != 0) {
    // A new store gets its index now, as part of its layout; an existing
    // one opens it on first use (a hit through a key record never does).
    // With NewIndex::on_first_use (the cache bypassed: --mode disable) it
    // is created on first use too, so a run that uses nothing of the store
    // loads no SQLite and writes no index. A key record is written only
    // after its row is committed, so no store has records without an index
    // (schema 2 keeps out an opcache that does not know them).
    base::MutexLock lock(store->m_index_mutex);
    OPCACHE_TRY(store->open_index());
  }
  return store;
}

LocalStore::LocalStore(StoreOptions options)
    : m_options(std::move(options)), m_layout(m_options.root, m_options.sharing) {}

Status LocalStore::open_index() {
  if (!m_index) {
    OPCACHE_TRY_ASSIGN(Index index, Index::open(m_layout.index(), m_options.busy_timeout_ms));
    m_index.emplace(std::move(index));
  }
  return {};
}

bool LocalStore::index_opened() {
  base::MutexLock lock(m_index_mutex);
  return m_index.has_value();
}

void LocalStore::warm_for_put() {
  {
    base::MutexLock lock(m_index_mutex);
    if (open_index()) {
      m_index->prepare_put_statements();
    }
  }
  auto temp = base::AtomicFile::create(m_layout.tmp());
  if (temp) {
    base::MutexLock lock(m_spare_mutex);
    m_spare_temp.emplace(std::move(*temp));
  }
}

std::optional<IndexEntry> LocalStore::key_record(const std::string& key) {
  {
    base::MutexLock lock(m_records_mutex);
    if (auto it = m_records.find(key); it != m_records.end()) {
      return it->second;
    }
  }
  auto record = m_keys.read(key);
  if (record) {
    remember_record(*record);
  }
  return record;
}

void LocalStore::remember_record(const IndexEntry& entry) {
  base::MutexLock lock(m_records_mutex);
  if (m_records.size() >= k_remembered_records) {
    m_records.clear();  // a bound, not a policy: the files stay
  }
  m_records.insert_or_assign(entry.key, entry);
}

void LocalStore::forget_key_record(const std::string& key) {
  base::MutexLock lock(m_records_mutex);
  m_records.erase(key);
}

void LocalStore::write_key_record(const IndexEntry& entry) {
  remember_record(entry);
  if (auto written = m_keys.write(entry); !written) {
    m_options.warn("key record of " + entry.key + " not written (its hits read the index): " +
                   written.error().message());
  }
}

void LocalStore::erase_key_records(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    forget_key_record(key);
    if (auto erased = m_keys.erase(key); !erased) {
      m_options.warn("key record of removed entry " + key + " left behind: " + erased.error().message());
    }
  }
}

bool LocalStore::object_exists(const std::string& digest) const {
  struct stat info {};
  return ::lstat(m_layout.object_path(digest).c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

Status LocalStore::unlink_if_unreferenced(const std::string& digest) {
  OPCACHE_TRY_ASSIGN(bool referenced, m_index->digest_referenced(digest));
  if (!referenced) {
    auto path = m_layout.object_path(digest);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return base::errno_error("cannot remove", path, errno);
    }
  }
  return {};
}

Status LocalStore::count(const char* counter_name, std::int64_t delta) {
  base::MutexLock lock(m_index_mutex);
  OPCACHE_TRY(open_index());
  auto statistics_only = m_index->defer_sync();
  return m_index->add_counter(counter_name, delta);
}

void LocalStore::record_miss_with_next_write() {
  base::MutexLock lock(m_index_mutex);
  ++m_pending_misses;
}

Status LocalStore::flush_pending_misses() {
  base::MutexLock lock(m_index_mutex);
  if (m_pending_misses == 0) {
    return {};
  }
  OPCACHE_TRY(open_index());
  auto statistics_only = m_index->defer_sync();
  OPCACHE_TRY(m_index->add_counter(counter::misses, m_pending_misses));
  m_pending_misses = 0;
  return {};
}

Result<std::optional<IndexEntry>> LocalStore::find(const std::string& key) {
  base::MutexLock lock(m_index_mutex);
  OPCACHE_TRY(open_index());
  return m_index->lookup(key);
}

Result<std::optional<IndexEntry>> LocalStore::lookup(const std::string& key) {
  OPCACHE_TRY(fold_hits());
  return find(key);
}

Result<bool> LocalStore::contains(const std::string& key) {
  OPCACHE_TRY(check_key(key));
  OPCACHE_TRY_ASSIGN(auto entry, find(key));
  return entry.has_value() && object_exists(entry->digest);
}

Result<bool> LocalStore::remove(const std::string& key) {
  OPCACHE_TRY(check_key(key));
  std::optional<IndexEntry> entry;
  // The record first: from here on a hit asks the index, so a kill at any
  // later instant cannot leave a record naming a removed entry's object.
  erase_key_records({key});
  {
    base::MutexLock lock(m_index_mutex);
    OPCACHE_TRY(open_index());
    OPCACHE_TRY_ASSIGN(Transaction transaction, m_index->begin());
    OPCACHE_TRY_ASSIGN(entry, m_index->lookup(key));
    if (!entry) {
      return false;
    }
    OPCACHE_TRY(m_index->remove(key));
    OPCACHE_TRY(m_index->add_counter(counter::removals, 1));
    OPCACHE_TRY(transaction.commit());
  }
  // Only after the row is gone for good: a kill in between leaves an orphan
  // object (verify --repair removes it), never a row without its object.
  OPCACHE_TRY(retire_objects({entry->digest}));
  return true;
}

Result<bool> LocalStore::revoke(const Tombstone& tombstone) {
  OPCACHE_TRY(check_key(tombstone.key));
  OPCACHE_TRY(check_revocation_reason(tombstone.reason));
  OPCACHE_TRY(m_layout.ensure_directory(m_layout.revocations()));
  OPCACHE_TRY(TombstoneDirectory(m_layout.revocations()).add(tombstone));
  return remove(tombstone.key);
}

Result<bool> LocalStore::unrevoke(const std::string& key) {
  OPCACHE_TRY(check_key(key));
  return TombstoneDirectory(m_layout.revocations()).remove(key);
}

Result<std::optional<Tombstone>> LocalStore::revocation(const std::string& key) const {
  OPCACHE_TRY(check_key(key));
  return TombstoneDirectory(m_layout.revocations()).find(key);
}

Result<std::vector<IndexEntry>> LocalStore::list(const ListFilter& filter) {
  OPCACHE_TRY(fold_hits());
  base::MutexLock lock(m_index_mutex);
  OPCACHE_TRY(open_index());
  return m_index->list(filter);
}

Result<StoreStats> LocalStore::stats() {
  OPCACHE_TRY(fold_hits());
  base::MutexLock lock(m_index_mutex);
  OPCACHE_TRY(open_index());
  StoreStats stats;
  OPCACHE_TRY_ASSIGN(stats.totals, m_index->totals());
  OPCACHE_TRY_ASSIGN(stats.counters, m_index->counters());
  return stats;
}

Result<bool> LocalStore::set_pinned(const std::string& key, bool pinned) {
  OPCACHE_TRY(check_key(key));
  base::MutexLock lock(m_index_mutex);
  OPCACHE_TRY(open_index());
  OPCACHE_TRY_ASSIGN(bool changed, m_index->set_pinned(key, pinned));
  if (changed) {
    OPCACHE_TRY_ASSIGN(auto entry, m_index->lookup(key));
    if (entry) {
      write_key_record(*entry);  // hits report the pin too
    }
  }
  return changed;
}

}  // namespace opcache::store
