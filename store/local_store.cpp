#include "store/local_store.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "base/canonical_json.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"
#include "store/bundle_reader.hpp"
#include "store/directory_sink.hpp"
#include "store/key.hpp"

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

// Key records a store remembers in memory, at most (about 0.5 KiB each).
constexpr std::size_t k_remembered_records = 4096;

// Temp files of a live process are left alone unless this old.
constexpr auto k_stale_temp_age = std::chrono::hours(24);

std::string json_string_field(const nlohmann::json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

IndexEntry entry_from_manifest(const Manifest& manifest, const std::string& digest, std::int64_t bundle_bytes,
                               std::int64_t now_ms) {
  IndexEntry entry;
  entry.key = manifest.key;
  entry.digest = digest;
  entry.bundle_size = bundle_bytes;
  entry.raw_size = static_cast<std::int64_t>(manifest.total_size());
  entry.op_type = manifest.op_type();
  entry.device_mode = json_string_field(manifest.scenario, "device_mode");
  entry.phase = json_string_field(manifest.scenario, "phase");
  entry.toolchain = json_string_field(manifest.scenario, "toolchain");
  entry.soc = json_string_field(manifest.scenario, "soc");
  entry.scenario = base::canonical_json(manifest.scenario).value();  // validated manifest: cannot fail
  entry.created_ms = now_ms;
  entry.last_access_ms = now_ms;
  entry.build_ms = manifest.build_ms;
  return entry;
}

// Decodes the object of `entry` into `sink`, checking that the bundle is the
// one the row names (same key, same digest).
// `key_check`: hits trust the digest (the key was checked when the bundle was
// stored, and the digest check below proves these are the same bytes);
// verify() recomputes it anyway.
Status decode_entry(base::ByteSource& source, const BundleLimits& limits, const IndexEntry& entry, MemberSink& sink,
                    KeyCheck key_check) {
  BundleReader reader(source, limits, key_check,
                      key_check == KeyCheck::trust_digest ? ManifestFields::for_hit : ManifestFields::all);
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

std::uint64_t source_bytes(int fd) {
  struct stat info {};
  return ::fstat(fd, &info) == 0 ? static_cast<std::uint64_t>(info.st_size) : 0;
}

bool older_than(const std::filesystem::path& path, std::chrono::seconds age) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    return false;
  }
  return std::time(nullptr) - info.st_mtime > age.count();
}

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
  std::unique_ptr<LocalStore> store(new LocalStore(std::move(options)));
  struct stat info {};
  if (::lstat(layout.index().c_str(), &info) != 0) {
    // A new store gets its index now, as part of its layout; an existing
    // one opens it on first use (a hit through a key record never does).
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

Result<std::optional<PutOutcome>> LocalStore::keep_if_present(const std::string& key) {
  OPCACHE_TRY_ASSIGN(auto existing, find(key));
  if (!existing || !object_exists(existing->digest) || local_refusal(*existing)) {
    return std::optional<PutOutcome>();
  }
  OPCACHE_TRY(count(counter::already_present));
  return std::optional<PutOutcome>(
      PutOutcome{existing->key, existing->digest, existing->bundle_size, existing->raw_size, false});
}

Result<PutOutcome> LocalStore::put(const BundleInput& input, ReplacePolicy policy, base::Durability durability) {
  OPCACHE_TRY_ASSIGN(std::string key, derive_key(input.descriptor, input.scenario));
  if (policy == ReplacePolicy::keep_existing) {
    // Cheap early exit: no encoding when the entry is already there.
    OPCACHE_TRY_ASSIGN(auto kept, keep_if_present(key));
    if (kept) {
      return *kept;
    }
  }
  OPCACHE_TRY_ASSIGN(base::AtomicFile file, create_temp());
  base::FdSink sink(file.fd(), file.temp_path());
  BundleWriteOptions write_options{m_options.compression_level, m_options.limits};
  OPCACHE_TRY_ASSIGN(WrittenBundle written, write_bundle(input, sink, write_options));
  OPCACHE_TRY_ASSIGN(Signatures signatures, own_signatures(written.manifest.key, written.digest));
  return publish(std::move(file), written.manifest, written.digest, static_cast<std::int64_t>(written.bytes), policy,
                 durability, std::move(signatures));
}

Result<base::AtomicFile> LocalStore::create_temp() const { return base::AtomicFile::create(m_layout.tmp()); }

Result<VerifiedBundle> LocalStore::verify_for_adoption(base::AtomicFile file, const std::string& expected_key,
                                                       base::Durability durability, Provenance provenance) {
  OPCACHE_TRY(file.finish_writing(durability));
  OPCACHE_TRY_ASSIGN(base::FileDescriptor fd, base::open_for_reading(file.temp_path()));
  base::FdSource source(fd.get(), file.temp_path());
  std::string digest;
  OPCACHE_TRY_ASSIGN(Manifest manifest, verify_bundle(source, m_options.limits, &digest));
  if (manifest.key != expected_key) {
    return Error::corrupt("bundle is for key " + manifest.key + ", not the requested " + expected_key);
  }
  const auto bytes = static_cast<std::int64_t>(source_bytes(fd.get()));
  return VerifiedBundle{std::move(file), std::move(manifest), std::move(digest), bytes, std::move(provenance)};
}

Result<PutOutcome> LocalStore::adopt(base::AtomicFile file, const std::string& expected_key, ReplacePolicy policy,
                                     base::Durability durability, const Provenance& provenance) {
  OPCACHE_TRY_ASSIGN(VerifiedBundle bundle, verify_for_adoption(std::move(file), expected_key, durability, provenance));
  return adopt_verified(std::move(bundle.file), bundle.manifest, bundle.digest, bundle.bundle_bytes, policy, durability,
                        bundle.provenance);
}

Result<PutOutcome> LocalStore::adopt_verified(base::AtomicFile file, const Manifest& manifest, const std::string& digest,
                                              std::int64_t bundle_bytes, ReplacePolicy policy,
                                              base::Durability durability, const Provenance& provenance) {
  std::vector<VerifiedBundle> one;
  one.push_back(VerifiedBundle{std::move(file), manifest, digest, bundle_bytes, provenance});
  return std::move(adopt_batch(std::move(one), policy, durability).front());
}

Result<PutOutcome> LocalStore::publish(base::AtomicFile file, const Manifest& manifest, const std::string& digest,
                                       std::int64_t bundle_bytes, ReplacePolicy policy, base::Durability durability,
                                       Signatures signatures) {
  std::vector<std::optional<Publication>> staged;
  OPCACHE_TRY_ASSIGN(Publication publication,
                     stage(std::move(file), manifest, digest, bundle_bytes, policy, durability, std::move(signatures)));
  staged.emplace_back(std::move(publication));
  OPCACHE_TRY(record_rows(staged, policy, durability));
  OPCACHE_TRY(finish_publication(*staged.front()));
  if (staged.front()->outcome.stored) {
    age_after_write(manifest.key);
  }
  return staged.front()->outcome;
}

Result<LocalStore::Publication> LocalStore::stage(base::AtomicFile file, const Manifest& manifest,
                                                  const std::string& digest, std::int64_t bundle_bytes,
                                                  ReplacePolicy policy, base::Durability durability,
                                                  Signatures signatures) {
  const auto object = m_layout.object_path(digest);
  OPCACHE_TRY(m_layout.ensure_directory(object.parent_path()));
  OPCACHE_TRY(file.link_if_absent(object, durability));
  IndexEntry entry = entry_from_manifest(manifest, digest, bundle_bytes, m_options.clock());
  entry.signatures = std::move(signatures);
  if (policy == ReplacePolicy::replace) {
    // Before the row changes: a kill between the commit and the new record
    // must not leave the old record naming the old object, still there.
    erase_key_records({manifest.key});
  }
  PutOutcome outcome{manifest.key, digest, bundle_bytes, static_cast<std::int64_t>(manifest.total_size()), true};
  return Publication{std::move(file), std::move(entry), std::move(outcome), std::nullopt};
}

Status LocalStore::record_row(Publication& publication, ReplacePolicy policy, base::Durability durability) {
  IndexEntry& entry = publication.entry;
  OPCACHE_TRY_ASSIGN(auto existing, m_index->lookup(entry.key));
  if (existing && policy == ReplacePolicy::keep_existing && object_exists(existing->digest) &&
      !local_refusal(*existing)) {
    // Another process stored this key first; keep its entry.
    if (existing->digest != entry.digest) {
      OPCACHE_TRY(unlink_if_unreferenced(entry.digest));
    }
    publication.outcome = PutOutcome{existing->key, existing->digest, existing->bundle_size, existing->raw_size, false};
    return m_index->add_counter(counter::already_present, 1);
  }
  // A concurrent `verify --repair` may have taken our object for an orphan.
  if (!object_exists(entry.digest)) {
    const auto object = m_layout.object_path(entry.digest);
    OPCACHE_TRY(m_layout.ensure_directory(object.parent_path()));
    OPCACHE_TRY(publication.file.link_if_absent(object, durability));
  }
  if (existing) {
    entry.pinned = existing->pinned;
    if (existing->digest != entry.digest) {
      publication.retired_digest = existing->digest;
    }
  }
  OPCACHE_TRY(m_index->upsert(entry));
  OPCACHE_TRY(m_index->add_counter(counter::stores, 1));
  return m_index->add_counter(counter::bytes_stored, entry.bundle_size);
}

Status LocalStore::finish_publication(const Publication& publication) {
  if (!publication.outcome.stored) {
    return {};  // the entry another process stored stays as it is
  }
  // After the commit (the index is the truth), and before the old object
  // goes, so a hit that read the old record finds its object gone and asks
  // the index.
  write_key_record(publication.entry);
  if (publication.retired_digest) {
    // After the commit, so a reader of the old row either still opens the old
    // object or, finding it gone, looks up again and sees the new row.
    OPCACHE_TRY(retire_objects({*publication.retired_digest}));
  }
  return {};
}

Result<PutOutcome> LocalStore::stage_adoption(VerifiedBundle& bundle, ReplacePolicy policy, base::Durability durability,
                                              std::optional<Publication>& staged) {
  OPCACHE_TRY_ASSIGN(Signatures signatures, admit(bundle.manifest.key, bundle.digest, bundle.provenance));
  if (policy == ReplacePolicy::keep_existing) {
    OPCACHE_TRY_ASSIGN(auto kept, keep_if_present(bundle.manifest.key));
    if (kept) {
      return *kept;
    }
  }
  OPCACHE_TRY_ASSIGN(Publication publication, stage(std::move(bundle.file), bundle.manifest, bundle.digest,
                                                    bundle.bundle_bytes, policy, durability, std::move(signatures)));
  PutOutcome pending = publication.outcome;
  staged.emplace(std::move(publication));
  return pending;
}

Status LocalStore::record_rows(std::vector<std::optional<Publication>>& staged, ReplacePolicy policy,
                               base::Durability durability) {
  if (std::none_of(staged.begin(), staged.end(), [](const auto& publication) { return publication.has_value(); })) {
    return {};
  }
  base::MutexLock lock(m_index_mutex);
  OPCACHE_TRY(open_index());
  auto unsynced_commit = m_index->defer_sync_if(durability == base::Durability::deferred);
  OPCACHE_TRY_ASSIGN(Transaction transaction, m_index->begin());
  for (auto& publication : staged) {
    if (publication) {
      OPCACHE_TRY(record_row(*publication, policy, durability));
    }
  }
  return transaction.commit();
}

std::vector<Result<PutOutcome>> LocalStore::adopt_batch(std::vector<VerifiedBundle> bundles, ReplacePolicy policy,
                                                        base::Durability durability) {
  std::vector<Result<PutOutcome>> outcomes;
  outcomes.reserve(bundles.size());
  std::vector<std::optional<Publication>> staged(bundles.size());
  for (std::size_t i = 0; i < bundles.size(); ++i) {
    outcomes.push_back(stage_adoption(bundles[i], policy, durability, staged[i]));
  }
  const Status committed = record_rows(staged, policy, durability);
  // Every row is in, so the store's size is the same for each key below:
  // while it is under the limit, one look answers for the whole batch (and a
  // batch that stored nothing does not look, nor open the index to).
  const bool stored_any = committed && std::any_of(staged.begin(), staged.end(), [](const auto& publication) {
                            return publication && publication->outcome.stored;
                          });
  const bool may_age = stored_any && aging_due();
  for (std::size_t i = 0; i < bundles.size(); ++i) {
    if (!staged[i]) {
      continue;  // refused, kept early, or failed before its row
    }
    if (!committed) {
      outcomes[i] = committed.error();
    } else if (auto finished = finish_publication(*staged[i]); !finished) {
      outcomes[i] = finished.error();
    } else {
      outcomes[i] = staged[i]->outcome;
      if (may_age && staged[i]->outcome.stored) {
        age_after_write(staged[i]->entry.key);
      }
    }
  }
  return outcomes;
}

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

Result<VerifyReport> LocalStore::verify(bool repair) {
  VerifyReport report;
  verify_entries(repair, report);
  verify_key_records(repair, report);
  verify_objects(repair, report);
  verify_temps(repair, report);
  return report;
}

void LocalStore::verify_entries(bool repair, VerifyReport& report) {
  std::vector<IndexEntry> entries;
  {
    base::MutexLock lock(m_index_mutex);
    auto status = open_index();
    if (status) {
      status = m_index->for_each([&entries](const IndexEntry& entry) {
        entries.push_back(entry);
        return true;
      });
    }
    if (!status) {
      report.problems.push_back({"index_unreadable", m_layout.index().string(), status.error().message(), false});
      return;
    }
  }
  for (const auto& entry : entries) {
    ++report.entries_checked;
    auto object = m_layout.object_path(entry.digest);
    auto fd = base::open_for_reading(object, /*follow_symlinks=*/false);
    std::optional<VerifyProblem> problem;
    if (!fd) {
      problem = VerifyProblem{"missing_object", entry.key, fd.error().message(), false};
    } else {
      base::FdSource source(fd->get(), object);
      DiscardingSink sink;
      auto decoded = decode_entry(source, m_options.limits, entry, sink, KeyCheck::recompute);
      report.bytes_checked += entry.bundle_size;
      if (!decoded) {
        problem = VerifyProblem{"corrupt_entry", entry.key, decoded.error().message(), false};
      }
    }
    if (!problem) {
      continue;
    }
    if (repair && (problem->kind == "corrupt_entry" || fd.error().code() == ErrorCode::not_found)) {
      bool removed = false;
      erase_key_records({entry.key});  // before the row (see remove())
      {
        base::MutexLock lock(m_index_mutex);
        auto transaction = m_index->begin();  // open: verify_entries read it
        removed = transaction && m_index->remove(entry.key, entry.digest) && transaction->commit();
      }
      // The row first, then the object (see remove()).
      problem->repaired = removed && retire_objects({entry.digest});
    }
    report.problems.push_back(*problem);
  }
}

void LocalStore::verify_key_records(bool repair, VerifyReport& report) {
  std::error_code ec;
  for (const auto& shard : std::filesystem::directory_iterator(m_layout.keys(), ec)) {
    for (const auto& file : std::filesystem::directory_iterator(shard.path(), ec)) {
      const std::string name = file.path().filename().string();
      if (!check_key(name) || name.compare(0, 2, shard.path().filename().string()) != 0) {
        report.problems.push_back({"unexpected_file", file.path().string(), "not a key record name", false});
        continue;
      }
      auto row = find(name);
      if (!row) {
        continue;  // verify_entries reported the index
      }
      const auto record = m_keys.read(name);
      if (record && *row && record->digest == (*row)->digest) {
        continue;
      }
      VerifyProblem problem{"stale_key_record", name,
                            !*row      ? "the index has no entry for this key"
                            : !record ? "unreadable or of another format"
                                      : "names object " + record->digest + ", the index " + (*row)->digest,
                            false};
      if (repair) {
        problem.repaired = *row ? static_cast<bool>(m_keys.write(**row)) : static_cast<bool>(m_keys.erase(name));
      }
      report.problems.push_back(problem);
    }
  }
}

void LocalStore::verify_objects(bool repair, VerifyReport& report) {
  std::error_code ec;
  for (const auto& shard : std::filesystem::directory_iterator(m_layout.objects(), ec)) {
    for (const auto& file : std::filesystem::directory_iterator(shard.path(), ec)) {
      ++report.objects_checked;
      std::string name = file.path().filename().string();
      if (!base::is_sha256_hex(name) || name.compare(0, 2, shard.path().filename().string()) != 0) {
        report.problems.push_back({"unexpected_file", file.path().string(), "not a bundle object name", false});
        continue;
      }
      base::MutexLock lock(m_index_mutex);
      if (!open_index()) {
        continue;  // verify_entries reported it
      }
      auto referenced = m_index->digest_referenced(name);
      if (!referenced || *referenced) {
        continue;
      }
      VerifyProblem problem{"orphan_object", name, "no index row refers to this object", false};
      if (repair) {
        // Re-checked inside a write transaction: a put that publishes this
        // object right now relinks it from its temp file if it finds it gone.
        auto transaction = m_index->begin();
        problem.repaired = transaction && unlink_if_unreferenced(name) && transaction->commit();
      }
      report.problems.push_back(problem);
    }
  }
}

void LocalStore::verify_temps(bool repair, VerifyReport& report) {
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(m_layout.tmp(), ec)) {
    std::string name = file.path().filename().string();
    long pid = base::temp_file_owner_pid(name);
    bool stale = (pid > 0 && !base::process_alive(pid)) ||
                 older_than(file.path(), std::chrono::duration_cast<std::chrono::seconds>(k_stale_temp_age));
    if (!stale) {
      continue;
    }
    VerifyProblem problem{"stale_temp", name,
                          pid > 0 && !base::process_alive(pid) ? "left by process " + std::to_string(pid) + ", which is gone"
                                                         : "older than 24 hours",
                          false};
    if (repair) {
      problem.repaired = ::unlink(file.path().c_str()) == 0;
    }
    report.problems.push_back(problem);
  }
}

}  // namespace opcache::store
