// LocalStore's hit path (declared in store/local_store.hpp): get, through
// the key record or the index, delivering a verified object into a
// directory; hits counted in memory, journaled and folded into the index;
// opening a stored bundle or its manifest.
#include <sys/stat.h>

#include <chrono>

#include "base/try.hpp"
#include "store/bundle_reader.hpp"
#include "store/directory_sink.hpp"
#include "store/key.hpp"
#include "store/local_store.hpp"

namespace opcache::store {

namespace {

// Hits are counted in memory and written in one transaction per batch, so a
// hit costs no index write: at most this many, or this old, before a flush.
constexpr std::int64_t k_hit_batch = 256;
constexpr auto k_hit_batch_age = std::chrono::seconds(1);

// A reader that finds a row's object gone retries the lookup this many times:
// a concurrent replace (force mode) retires the old object after the new row
// is committed, so a second lookup finds the new one.
constexpr int k_lookup_attempts = 3;

// Decodes the object of `entry` into `sink`, checking that the bundle is the
// one the row names (same key, same digest).
// `key_check`: hits trust the digest (the key was checked when the bundle was
// stored, and the digest check below proves these are the same bytes);
// verify() recomputes it anyway.
Status decode_entry(base::ByteSource& source, const BundleLimits& limits, const IndexEntry& entry, MemberSink& sink,
                    KeyCheck key_check) {
  BundleReader reader(source, limits, key_check,
                      key_check == KeyCheck::trust_digest ? ReadFor::local_hit : ReadFor::verification);
  OPCACHE_TRY_ASSIGN(Manifest manifest, reader.read_manifest());
  if (manifest.key != entry.key) {
    return Error::corrupt("bundle holds key " + manifest.key + ", not " + entry.key);
  }
  OPCACHE_TRY(reader.read_members(sink));
  std::string digest = reader.finish_digest();
  if (digest != entry.digest) {
    return Error::corrupt("bundle digest " + digest + " differs from the index (" + entry.digest + ")");
  }
  return {};
}

// Objects up to this size are read whole, in one call, instead of in the
// reader's pieces (header, manifest, frame magic, payload, end check).
constexpr off_t k_read_whole_bytes = 1 << 20;

// The whole object in `buffer` when it is small (one fstat and one read),
// else nothing (the caller streams it).
Result<std::optional<std::string_view>> read_small_object(int fd, const std::filesystem::path& path,
                                                          std::string& buffer) {
  struct stat info {};
  if (::fstat(fd, &info) != 0 || info.st_size > k_read_whole_bytes) {
    return std::optional<std::string_view>();
  }
  buffer.resize(static_cast<std::size_t>(info.st_size));
  OPCACHE_TRY_ASSIGN(std::size_t have, base::read_up_to(fd, buffer.data(), buffer.size(), path));
  return std::optional<std::string_view>(std::string_view(buffer.data(), have));
}

}  // namespace

void LocalStore::drop_bad_entry(const IndexEntry& entry, const std::string& why, const char* counter_name) {
  m_options.warn("entry " + entry.key + " (" + entry.op_type + ") is unusable and was dropped: " + why);
  erase_key_records({entry.key});  // before the row (see remove())
  bool removed = false;
  {
    base::MutexLock lock(m_index_mutex);
    if (!open_index()) {
      return;
    }
    auto transaction = m_index->begin();
    if (!transaction) {
      return;
    }
    auto dropped = m_index->remove(entry.key, entry.digest);
    (void)m_index->add_counter(counter_name, 1);
    const bool committed = static_cast<bool>(transaction->commit());
    removed = committed && dropped && *dropped;
  }
  if (removed) {
    (void)retire_objects({entry.digest});
  }
}

Status LocalStore::record_hit(const IndexEntry& entry) {
  const std::int64_t now = m_options.clock();
  bool flush_now = false;
  {
    base::MutexLock lock(m_hits_mutex);
    auto& pending = m_pending_hits;
    if (pending.hits == 0) {
      pending.first = std::chrono::steady_clock::now();
    }
    // Access time 0: none kept (aging off here: max_op_cache_size -1 keeps them).
    const HitRecord hit{entry.key, 1, m_options.aging.enabled() ? now : 0, entry.raw_size, entry.build_ms};
    auto& record = pending.keys[entry.key];
    record.key = entry.key;
    add_hits(record, hit);
    ++pending.hits;
    // An access that aging could soon need is journaled at once (so another
    // process's gc never removes an entry in use); the rest wait for a batch.
    // With the default 30 min idle rule that is one append per key per 15 min.
    auto journaled = m_journaled_ms.find(entry.key);
    const bool access_is_stale =
        m_options.aging.enabled() &&
        (journaled == m_journaled_ms.end() || now - journaled->second >= m_options.aging.min_idle_ms / 2);
    flush_now = access_is_stale || pending.hits >= k_hit_batch ||
                std::chrono::steady_clock::now() - pending.first >= k_hit_batch_age;
  }
  return flush_now ? flush_hits() : Status{};
}

Status LocalStore::flush_hits() {
  std::vector<HitRecord> records;
  {
    base::MutexLock lock(m_hits_mutex);
    for (auto& [key, record] : m_pending_hits.keys) {
      m_journaled_ms[key] = record.last_access_ms;
      records.push_back(std::move(record));
    }
    m_pending_hits = PendingHits();
  }
  OPCACHE_TRY_ASSIGN(std::int64_t journal_bytes, m_journal.append(records));
  return journal_bytes >= k_hit_journal_fold_bytes ? fold_journal() : Status{};
}

Status LocalStore::fold_hits() {
  OPCACHE_TRY(flush_hits());
  return fold_journal();
}

Status LocalStore::fold_journal() {
  OPCACHE_TRY_ASSIGN(auto records, m_journal.take());
  if (records.empty()) {
    return {};
  }
  auto folded = [&]() -> Status {
    base::MutexLock lock(m_index_mutex);
    OPCACHE_TRY(open_index());
    // Losing the last hit records to a power cut is harmless; syncing them
    // would cost two fsyncs.
    auto statistics_only = m_index->defer_sync();
    OPCACHE_TRY_ASSIGN(Transaction transaction, m_index->begin());
    std::int64_t hits = 0, bytes = 0, saved_ms = 0;
    for (const auto& record : records) {
      // The access time as the hitting process kept it (0: it keeps none);
      // the process that ages may not be this one.
      OPCACHE_TRY(m_index->record_hits(record.key, record.hits, record.last_access_ms,
                                       /*update_access=*/record.last_access_ms > 0));
      hits += record.hits;
      bytes += record.bytes;
      saved_ms += record.saved_ms;
    }
    OPCACHE_TRY(m_index->add_counter(counter::hits, hits));
    OPCACHE_TRY(m_index->add_counter(counter::bytes_served, bytes));
    OPCACHE_TRY(m_index->add_counter(counter::saved_ms, saved_ms));
    return transaction.commit();
  }();
  if (!folded) {
    (void)m_journal.append(records);  // for the next fold
  }
  return folded;
}

LocalStore::~LocalStore() {
  if (auto flushed = flush_hits(); !flushed) {
    m_options.warn("hits not recorded: " + flushed.error().message());
  }
}

Result<std::optional<std::vector<std::filesystem::path>>> LocalStore::deliver(const IndexEntry& entry,
                                                                              const std::filesystem::path& out_dir,
                                                                              std::optional<Error>& problem) {
  using Files = std::optional<std::vector<std::filesystem::path>>;
  auto object = m_layout.object_path(entry.digest);
  auto fd = base::open_for_reading(object, /*follow_symlinks=*/false);
  if (!fd && fd.error().code() == ErrorCode::not_found) {
    problem = Error::not_found("its object file " + object.string() + " is missing");
    return Files();
  }
  if (!fd) {
    return fd.error();
  }
  // Objects never change once published, and the digest check covers
  // every byte read: reading a small one whole is as safe as streaming it.
  static thread_local std::string object_bytes;
  OPCACHE_TRY_ASSIGN(auto small, read_small_object(fd->get(), object, object_bytes));
  base::FdSource file_source(fd->get(), object);
  std::optional<base::MemorySource> memory_source;
  if (small) {
    memory_source.emplace(*small);
  }
  base::ByteSource& source = memory_source ? static_cast<base::ByteSource&>(*memory_source) : file_source;
  DirectorySink sink(out_dir);
  auto decoded = decode_entry(source, m_options.limits, entry, sink, KeyCheck::trust_digest);
  if (!decoded && decoded.error().code() == ErrorCode::corrupt) {
    problem = decoded.error();
    return Files();
  }
  OPCACHE_TRY(decoded);
  OPCACHE_TRY_ASSIGN(auto files, sink.commit());
  return Files(std::move(files));
}

Result<std::optional<GetOutcome>> LocalStore::get(const std::string& key, const std::filesystem::path& out_dir,
                                                  CountMisses misses) {
  OPCACHE_TRY(check_key(key));
  OPCACHE_TRY(base::ensure_directory(out_dir));
  OPCACHE_TRY_ASSIGN(auto hit, get_by_record(key, out_dir));
  if (hit) {
    return hit;
  }
  return get_by_index(key, out_dir, misses);
}

Result<std::optional<GetOutcome>> LocalStore::get_by_record(const std::string& key,
                                                            const std::filesystem::path& out_dir) {
  auto entry = key_record(key);
  if (!entry || local_refusal(*entry)) {
    return std::optional<GetOutcome>();  // the index decides (and says why)
  }
  std::optional<Error> problem;
  OPCACHE_TRY_ASSIGN(auto files, deliver(*entry, out_dir, problem));
  if (!files) {
    forget_key_record(key);
    return std::optional<GetOutcome>();  // a stale record, or a bad object the index path drops
  }
  entry->last_access_ms = m_options.clock();
  if (auto recorded = record_hit(*entry); !recorded) {
    // The files are out and verified; failing to count the hit must not fail the hit.
    m_options.warn("hit on " + key + " not recorded: " + recorded.error().message());
  }
  return std::optional<GetOutcome>(GetOutcome{std::move(*entry), std::move(*files)});
}

Result<std::optional<GetOutcome>> LocalStore::get_by_index(const std::string& key,
                                                           const std::filesystem::path& out_dir,
                                                           CountMisses misses) {
  auto miss = [&]() -> Result<std::optional<GetOutcome>> {
    if (misses == CountMisses::yes) {
      OPCACHE_TRY(count(counter::misses));
    }
    return std::optional<GetOutcome>();
  };
  for (int attempt = 1;; ++attempt) {
    OPCACHE_TRY_ASSIGN(auto entry, find(key));
    if (!entry) {
      erase_key_records({key});  // a record a removal raced with, if any
      return miss();
    }
    if (auto refusal = local_refusal(*entry)) {
      m_options.warn("entry " + key + " (" + entry->op_type + ") refused: " + refusal->describe() +
                     " (require_signature=all)");
      OPCACHE_TRY(count(counter::refused_untrusted));
      return miss();
    }
    std::optional<Error> problem;
    OPCACHE_TRY_ASSIGN(auto files, deliver(*entry, out_dir, problem));
    if (!files && problem->code() == ErrorCode::not_found && attempt < k_lookup_attempts) {
      continue;  // replaced meanwhile: the next lookup finds the new row
    }
    if (!files) {
      drop_bad_entry(*entry, problem->message(),
                     problem->code() == ErrorCode::not_found ? counter::missing_objects : counter::corrupt_entries);
      return miss();
    }
    write_key_record(*entry);  // the next hit needs no index
    if (auto recorded = record_hit(*entry); !recorded) {
      m_options.warn("hit on " + key + " not recorded: " + recorded.error().message());
    }
    return std::optional<GetOutcome>(GetOutcome{*entry, std::move(*files)});
  }
}

Result<std::optional<std::pair<IndexEntry, base::FileDescriptor>>> LocalStore::open_bundle(const std::string& key) {
  using Found = std::optional<std::pair<IndexEntry, base::FileDescriptor>>;
  OPCACHE_TRY(check_key(key));
  for (int attempt = 1; attempt <= k_lookup_attempts; ++attempt) {
    OPCACHE_TRY_ASSIGN(auto entry, find(key));
    if (!entry) {
      return Found();
    }
    auto fd = base::open_for_reading(m_layout.object_path(entry->digest), /*follow_symlinks=*/false);
    if (fd) {
      return Found(std::make_pair(std::move(*entry), std::move(*fd)));
    }
    if (fd.error().code() != ErrorCode::not_found) {
      return fd.error();
    }
  }
  return Found();
}

Result<std::optional<Manifest>> LocalStore::read_manifest(const std::string& key) {
  OPCACHE_TRY_ASSIGN(auto found, open_bundle(key));
  if (!found) {
    return std::optional<Manifest>();
  }
  auto object = m_layout.object_path(found->first.digest);
  base::FdSource source(found->second.get(), object);
  BundleReader reader(source, m_options.limits, KeyCheck::trust_digest);
  OPCACHE_TRY_ASSIGN(Manifest manifest, reader.read_manifest());
  return std::optional<Manifest>(std::move(manifest));
}

Status LocalStore::recheck_object(base::ByteSource& source, const IndexEntry& entry) const {
  DiscardingSink sink;
  return decode_entry(source, m_options.limits, entry, sink, KeyCheck::recompute);
}

}  // namespace opcache::store
