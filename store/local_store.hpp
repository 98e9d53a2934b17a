// The local content-addressed store: bundles under objects/, rows in
// index.db, writes through tmp/. Crash-safe (a kill -9 at any instant leaves
// the store as before or after an operation) and shared by many processes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/byte_stream.hpp"
#include "base/file_io.hpp"
#include "base/mutex.hpp"
#include "opcache/result.hpp"
#include "store/aging.hpp"
#include "store/bundle_writer.hpp"
#include "store/cache_root.hpp"
#include "store/hit_journal.hpp"
#include "store/index.hpp"
#include "store/key_table.hpp"
#include "store/manifest.hpp"
#include "store/revocation.hpp"
#include "store/signature.hpp"
#include "store/trust.hpp"

namespace opcache::store {

using opcache::ReplacePolicy;

/// Unix time in milliseconds; injectable for tests.
using Clock = std::function<std::int64_t()>;
Clock system_clock_ms();

/// Receives reports about problems found and handled (a corrupt entry that
/// was dropped, ...). Never receives tokens or secrets.
using WarningSink = std::function<void(const std::string& message)>;

/// When LocalStore::open creates the index of a new store.
enum class NewIndex {
  on_open,       ///< with the layout (the default)
  on_first_use,  ///< when something needs it (the API's Store: --mode disable uses none, exec opens it during the build)
};

struct StoreOptions {
  std::filesystem::path root;
  BundleLimits limits;
  int compression_level = 3;
  int busy_timeout_ms = 60000;
  AgingPolicy aging;               ///< access times are recorded and gc runs only when enabled
  /// The aging that follows one write removes at most this many entries (-1:
  /// no bound); a store still above its target is aged further by the next
  /// writes of this process, so no write pays for aging a whole store.
  std::int64_t evictions_per_write = k_evictions_per_write;
  Sharing sharing = Sharing::owner;  ///< setting shared_group (store/cache_root.hpp)
  Clock clock;                     ///< default: system clock
  WarningSink warn;                ///< default: "opcache: warning: …" on stderr
  /// Signs every entry put() writes (docs/formats.md "Signatures"); null:
  /// entries are written unsigned.
  std::shared_ptr<const base::Ed25519PrivateKey> signing_key;
  /// Which entries must carry a valid signature by a trusted key
  /// (store/trust.hpp); null: none.
  std::shared_ptr<const TrustPolicy> trust;
  NewIndex new_index = NewIndex::on_open;
};

/// Where a bundle handed to adopt() comes from, and the signatures that
/// came with it.
struct Provenance {
  /// True for a remote's entry: the trust policy's remote requirement applies.
  bool from_remote = false;
  std::string origin;      ///< the remote's name, for messages
  Signatures signatures;   ///< as received; only those that verify are kept
};

/// A bundle in a temp file (made by LocalStore::create_temp), verified for
/// the key it was asked for by LocalStore::verify_for_adoption: what
/// LocalStore::adopt_batch stores.
struct VerifiedBundle {
  base::AtomicFile file;
  Manifest manifest;
  std::string digest;  ///< of the whole bundle: its object's name
  std::int64_t bundle_bytes = 0;
  Provenance provenance;
};

/// The outcome of add_signatures().
struct SignatureUpdate {
  int added = 0;    ///< signatures that were new
  int present = 0;  ///< signatures by keys that had already signed
};

using opcache::SignReport;

/// One entry that the trusted keys do not vouch for.
struct SignatureFinding {
  std::string key;
  std::string op_type;
  Refusal refusal;
};

/// Whether LocalStore::get() counts a miss.
enum class CountMisses { yes, no };

using PutOutcome = opcache::PutResult;
using GetOutcome = opcache::GetResult;
using opcache::ClearReport;
using opcache::GcReport;
using opcache::StoreStats;
using opcache::VerifyProblem;
using opcache::VerifyReport;

/// A local store. Thread-safe (index access is serialized by a mutex, file
/// work is not) and process-safe (any number of processes may share a root).
class LocalStore {
 public:
  /// Creates the layout if needed, and the index of a new store unless
  /// options.new_index says on_first_use; an existing index is opened on
  /// first use.
  static Result<std::unique_ptr<LocalStore>> open(StoreOptions options);
  /// Flushes hits counted in memory (see flush_hits).
  ~LocalStore();
  LocalStore(const LocalStore&) = delete;
  LocalStore& operator=(const LocalStore&) = delete;

  const StoreLayout& layout() const noexcept { return m_layout; }
  const StoreOptions& options() const noexcept { return m_options; }

  /// Encodes `input` into a bundle and stores it under its key. `synced`:
  /// the entry survives a power cut once this returns (docs/formats.md
  /// "Durability"); `deferred`: nothing is fsynced, for an entry that costs
  /// only a rebuild to lose (exec's, as ccache's): a power cut may drop it or
  /// leave its object short, which the next read detects and drops (a miss).
  Result<PutOutcome> put(const BundleInput& input, ReplacePolicy policy,
                         base::Durability durability = base::Durability::synced);

  /// A temp file in this store's tmp/ for building a bundle elsewhere (a
  /// download, an upload) before handing it to adopt(); the one
  /// warm_for_put() made, when there is one. Thread-safe.
  Result<base::AtomicFile> create_temp() const;

  /// Verifies a complete bundle in `file` (made by create_temp) and stores it
  /// if its manifest key equals `expected_key`; `corrupt` otherwise. With
  /// `Durability::deferred` nothing is fsynced (object, directory, index row):
  /// for copies of a remote's entries (pull), which a power cut may lose or
  /// leave short until the system writes them out; get() detects a short
  /// object, drops the entry and reports a miss — never serves it.
  ///
  /// With `provenance.from_remote` and a trust policy that checks remote
  /// entries, a bundle without a valid signature by a trusted key is refused
  /// before it is stored: `untrusted` error naming the key, the origin and
  /// the reason; counted as refused_untrusted and reported through the
  /// warning sink. Signatures that verify are stored with the entry.
  Result<PutOutcome> adopt(base::AtomicFile file, const std::string& expected_key, ReplacePolicy policy,
                           base::Durability durability = base::Durability::synced,
                           const Provenance& provenance = {});

  /// Stores a bundle the caller has already checked with verify_bundle()
  /// (`manifest`, `digest` and `bundle_bytes` are what that returned).
  /// The trust policy applies as in adopt().
  Result<PutOutcome> adopt_verified(base::AtomicFile file, const Manifest& manifest, const std::string& digest,
                                    std::int64_t bundle_bytes, ReplacePolicy policy,
                                    base::Durability durability = base::Durability::synced,
                                    const Provenance& provenance = {});

  /// adopt()'s checks without the storing: finishes writing `file` with
  /// `durability`, verifies the bundle, and that it is for `expected_key`
  /// (`corrupt` otherwise).
  Result<VerifiedBundle> verify_for_adoption(base::AtomicFile file, const std::string& expected_key,
                                             base::Durability durability, Provenance provenance);

  /// adopt_verified() of many bundles with one index transaction, for a
  /// pull: each bundle is admitted (the trust policy) and its object linked
  /// first, then every row is written in one transaction, then the key
  /// records. One outcome per bundle, in order; a transaction that fails
  /// fails every bundle in it (their objects stay, unreferenced, for gc).
  std::vector<Result<PutOutcome>> adopt_batch(std::vector<VerifiedBundle> bundles, ReplacePolicy policy,
                                              base::Durability durability);

  /// Adds `signatures` to the entry of `key`. Every one must verify for the
  /// entry's key and bundle digest (else `untrusted`, nothing added);
  /// `not_found` when the key is not stored.
  Result<SignatureUpdate> add_signatures(const std::string& key, const Signatures& signatures);

  /// Signs the entries `keys` (every entry when empty) with the configured
  /// signing key, after checking each object against its digest; `usage`
  /// error when no signing key is configured.
  Result<SignReport> sign_entries(const std::vector<std::string>& keys);

  /// Every entry that no valid signature by a trusted key vouches for, in
  /// key order (with no trusted keys: every entry).
  Result<std::vector<SignatureFinding>> find_untrusted_entries();

  /// The trust policy's refusal of `entry` as a local entry (only under
  /// `require_signature=all`), or std::nullopt when it may be used.
  std::optional<Refusal> local_refusal(const IndexEntry& entry) const;

  /// Verifies the entry and writes its members into `out_dir` (created if
  /// missing). A miss, a missing object or a corrupt object is std::nullopt;
  /// the latter two are reported through the warning sink and dropped.
  /// A hit finds its object through the key's record (store/key_table.hpp)
  /// and records itself in the hit journal, without opening the index; a
  /// record that is missing, stale or refused sends it to the index, which
  /// writes the record again. The entry of a hit has `hits` 0 and
  /// `last_access_ms` the time of this hit (lookup() has the counted ones).
  /// `misses`: whether a miss adds to the misses counter (get_or_build counts
  /// its misses itself, once per build).
  Result<std::optional<GetOutcome>> get(const std::string& key, const std::filesystem::path& out_dir,
                                        CountMisses misses = CountMisses::yes);

  /// Opens the verified-on-write bundle of `key` for streaming (server GET).
  /// Readers downstream verify it again. std::nullopt when absent.
  Result<std::optional<std::pair<IndexEntry, base::FileDescriptor>>> open_bundle(const std::string& key);

  /// Hits are counted in memory and appended to the hit journal
  /// (store/hit_journal.hpp) in batches: every 256 hits, after 1 s, and on
  /// destruction; a key's first hit in this process, and one whose last
  /// journaled hit is older than half the aging idle time, at once, so no
  /// other process ages an entry in use. The journal is folded into the index
  /// by fold_hits(). A process killed with hits pending loses those counts
  /// (never entries). Appends the pending hits now; never opens the index
  /// unless the journal has grown past k_hit_journal_fold_bytes.
  Status flush_hits();

  /// flush_hits(), then folds the hit journal into the index (hit counts,
  /// access times, the hits, bytes_served and compile_ms_saved counters):
  /// done before stats(), list(), lookup() and aging, so they see every hit
  /// journaled before them.
  Status fold_hits();

  /// Whether this store has opened its index (a hit on a key with a record
  /// does not). For tests and diagnostics.
  bool index_opened();

  /// Readies a put now rather than on its path, for a caller with time to
  /// spare before it writes (exec while its command runs): opens the index
  /// (loading SQLite, creating index.db in a new store), prepares the
  /// statements a put of a new key runs, and makes the temp file the next
  /// create_temp() returns (creating a file costs an inode). Thread-safe;
  /// an error is left for the first use, which meets it again.
  void warm_for_put();

  /// Counts a miss that did not go through get() (get_or_build's lookups).
  Status record_miss() { return count(counter::misses); }
  /// Counts a miss in the transaction of the next row this store writes
  /// (put, adopt), from any thread; until then only in memory. For a miss
  /// about to store its build (exec): one index commit instead of two.
  /// Follow with flush_pending_misses() so that a put that wrote no row
  /// does not leave it pending.
  void record_miss_with_next_write();
  /// Commits the misses of record_miss_with_next_write() that no write has
  /// taken yet; nothing (and no index opened) when there are none.
  Status flush_pending_misses();
  /// Adds `delta` to the counter `name` (remote hits, errors, ...).
  Status record_counter(const char* name, std::int64_t delta) { return count(name, delta); }

  /// The manifest of `key`'s bundle (header and manifest only, no payload;
  /// the members are not verified here). std::nullopt when absent.
  Result<std::optional<Manifest>> read_manifest(const std::string& key);

  /// The index row, without touching the object, including every hit
  /// journaled so far (fold_hits() first).
  Result<std::optional<IndexEntry>> lookup(const std::string& key);
  /// The index row as stored: cheaper (no flush), but hits of this process
  /// still pending in memory are not counted in it. For hot paths.
  Result<std::optional<IndexEntry>> find(const std::string& key);
  /// True when the key has a row and its object file exists.
  Result<bool> contains(const std::string& key);
  /// Removes the entry (and its object when no other row uses it).
  Result<bool> remove(const std::string& key);
  /// Revokes the key in this store (docs/formats.md "Tombstones"): writes
  /// its tombstone, revocations/<key>.json (replacing an earlier one), then
  /// removes the entry; true when there was one. Remote hits and pulls of a
  /// key with a tombstone are refused (remote/remote_set.hpp) until
  /// unrevoke(). Process-safe: the tombstone is a file.
  Result<bool> revoke(const Tombstone& tombstone);
  /// Removes the tombstone of `key`; false when it had none.
  Result<bool> unrevoke(const std::string& key);
  /// The tombstone of `key` in this store, or std::nullopt.
  Result<std::optional<Tombstone>> revocation(const std::string& key) const;
  /// Rows matching `filter` (hits folded first).
  Result<std::vector<IndexEntry>> list(const ListFilter& filter);
  Result<StoreStats> stats();
  Result<bool> set_pinned(const std::string& key, bool pinned);

  /// Ages the store (least recently used first, skipping pinned entries, stopping at
  /// the first entry used within min_idle) until it is at most limit × ratio,
  /// with no bound on the entries removed (writes age with a bound, see
  /// StoreOptions::evictions_per_write). Rows are removed in transactions of
  /// up to 256, each re-checked under the write lock; their objects are
  /// unlinked after each commit.
  /// Concurrent calls in other processes are skipped (`stopped_because` says so).
  /// Implemented in store/aging.cpp.
  /// `keep_key`, when not empty, is never removed (the entry a put just wrote).
  Result<GcReport> collect_garbage(const AgingPolicy& policy, GcMode mode, const std::string& keep_key = {});

  /// Removes every entry and object (pinned ones too), and stale temp files.
  /// Safe while other processes read and write: they see entries or misses.
  Result<ClearReport> clear();

  /// Checks every row against its object, every key record against its row
  /// (`stale_key_record`: repaired by rewriting or removing it), finds orphan
  /// objects and stale temp files; with `repair`, removes what is bad.
  Result<VerifyReport> verify(bool repair);

 private:
  explicit LocalStore(StoreOptions options);

  // A bundle on its way in (publish, adopt_batch): its object linked, its
  // row written in a transaction, then finished.
  struct Publication {
    base::AtomicFile file;
    IndexEntry entry;
    PutOutcome outcome;
    std::optional<std::string> retired_digest;  // the object of the row it replaced
  };

  Result<PutOutcome> publish(base::AtomicFile file, const Manifest& manifest, const std::string& digest,
                             std::int64_t bundle_bytes, ReplacePolicy policy, base::Durability durability,
                             Signatures signatures);
  // Links the object of the bundle in `file` (and, replacing, removes the
  // key's record first).
  Result<Publication> stage(base::AtomicFile file, const Manifest& manifest, const std::string& digest,
                            std::int64_t bundle_bytes, ReplacePolicy policy, base::Durability durability,
                            Signatures signatures);
  // Writes the row of `publication` in the caller's transaction, or keeps
  // the entry another process stored first (then `outcome` is that entry's).
  Status record_row(Publication& publication, ReplacePolicy policy, base::Durability durability)
      REQUIRES(m_index_mutex);
  // After the commit: the key record and the replaced object's retirement
  // (the caller then ages the store: age_after_write).
  Status finish_publication(const Publication& publication);
  // adopt_batch's first step for one bundle: admits it and stages it into
  // `staged`; the outcome of a bundle kept or refused here is final.
  Result<PutOutcome> stage_adoption(VerifiedBundle& bundle, ReplacePolicy policy, base::Durability durability,
                                    std::optional<Publication>& staged);
  // The rows of every staged publication (publish, adopt_batch), in one transaction.
  Status record_rows(std::vector<std::optional<Publication>>& staged, ReplacePolicy policy,
                     base::Durability durability);
  // The signatures an adopted bundle is stored with: those of `provenance`
  // that verify; refused (`untrusted`, counted, reported) when the trust
  // policy requires a trusted one and none is there.
  Result<Signatures> admit(const std::string& key, const std::string& digest, const Provenance& provenance);
  // This store's own signature of a bundle it wrote (none without a signing key).
  Result<Signatures> own_signatures(const std::string& key, const std::string& digest) const;
  Result<std::optional<PutOutcome>> keep_if_present(const std::string& key);
  // Whether keys/ holds a record of `key` (one lstat; not read).
  bool key_record_exists(const std::string& key) const;
  // Drops a row whose object is missing or corrupt, if it still points there.
  void drop_bad_entry(const IndexEntry& entry, const std::string& why, const char* counter_name);
  // Opens the index on first use (a hit through a key record never does).
  Status open_index() REQUIRES(m_index_mutex);
  // get() through the key record, without the index: std::nullopt when the
  // record is missing, refused or stale, or its object is missing or corrupt.
  Result<std::optional<GetOutcome>> get_by_record(const std::string& key, const std::filesystem::path& out_dir);
  // get() through the index (and a new key record on a hit).
  Result<std::optional<GetOutcome>> get_by_index(const std::string& key, const std::filesystem::path& out_dir,
                                                 CountMisses misses);
  // Writes the members of `entry`'s object into `out_dir`, checking the
  // bundle is the one `entry` names. std::nullopt and `problem` set when the
  // object is missing (`not_found`) or corrupt (`corrupt`); other errors fail.
  Result<std::optional<std::vector<std::filesystem::path>>> deliver(const IndexEntry& entry,
                                                                    const std::filesystem::path& out_dir,
                                                                    std::optional<Error>& problem);
  // Decodes the object of `entry` from `source` as deliver() does, but
  // recomputing the key and writing nothing: verify()'s check of an entry.
  Status recheck_object(base::ByteSource& source, const IndexEntry& entry) const;
  // The record of `key`: remembered from an earlier read or write of this
  // store, else read from its file. A remembered record is as safe as the
  // file (every hit checks the object it names); it only saves the read.
  std::optional<IndexEntry> key_record(const std::string& key);
  void remember_record(const IndexEntry& entry);
  // Forgets the remembered record of `key` (its object turned out stale).
  void forget_key_record(const std::string& key);
  // Writes the key record of `entry`; a failure is only reported (the index
  // still has the entry).
  void write_key_record(const IndexEntry& entry);
  // Removes the key records of `keys`; failures are only reported (a stale
  // record is checked against its object by every hit).
  void erase_key_records(const std::vector<std::string>& keys);
  Status record_hit(const IndexEntry& entry);
  // Folds the hit journal into the index.
  Status fold_journal();
  Status count(const char* counter_name, std::int64_t delta = 1);
  bool object_exists(const std::string& digest) const;
  // Unlinks the object unless a row references it; call inside a transaction.
  Status unlink_if_unreferenced(const std::string& digest) REQUIRES(m_index_mutex);
  // Unlinks the objects no row references any more, in one write transaction
  // (a batch: renamed out of objects/ in it, then unlinked outside the lock,
  // several at once).
  // Call only after the transaction that removed their rows has committed, so
  // a kill in between leaves orphan objects, never a row without its object.
  Status retire_objects(const std::vector<std::string>& digests);
  // Renames the object to a temp name in tmp/ unless a row references it;
  // call inside a transaction. The new path, or nothing when kept or absent.
  Result<std::optional<std::filesystem::path>> move_out_if_unreferenced(const std::string& digest)
      REQUIRES(m_index_mutex);
  void verify_entries(bool repair, VerifyReport& report);
  // Key records that name no entry or another object than the index does.
  void verify_key_records(bool repair, VerifyReport& report);
  void verify_objects(bool repair, VerifyReport& report);
  void verify_temps(bool repair, VerifyReport& report);
  // Runs aging after a write when the store grew past the limit (store/aging.cpp).
  void age_after_write(const std::string& written_key);
  // Whether the store is past the size at which a write ages it (its limit,
  // or its target while a bounded pass goes on); false when aging is off or
  // the index cannot tell.
  bool aging_due();
  // collect_garbage with a bound on the entries removed (-1: none); when
  // `continuing`, a store above its target (not only its limit) is aged.
  Result<GcReport> age(const AgingPolicy& policy, GcMode mode, const std::string& keep_key, std::int64_t max_entries,
                       bool continuing);
  // Removes the rows of `candidates` still idle since `idle_cutoff_ms`, unpinned
  // and pointing at the same object, in one transaction, then their objects.
  // Returns the entries removed (store/aging.cpp).
  Result<std::vector<IndexEntry>> evict(const std::vector<IndexEntry>& candidates, std::int64_t idle_cutoff_ms);

  struct PendingHits {
    std::map<std::string, HitRecord> keys;
    std::int64_t hits = 0;
    std::chrono::steady_clock::time_point first;
  };

  StoreOptions m_options;
  StoreLayout m_layout;
  // One connection, used by one thread at a time; other processes are kept
  // out by SQLite's own locks.
  // Opened on first use (open_index).
  base::Mutex m_index_mutex;
  std::optional<Index> m_index GUARDED_BY(m_index_mutex);
  // Misses of record_miss_with_next_write() not committed yet.
  std::int64_t m_pending_misses GUARDED_BY(m_index_mutex) = 0;
  KeyTable m_keys{m_layout};
  // Key records this store read or wrote, at most k_remembered_records.
  base::Mutex m_records_mutex;
  std::unordered_map<std::string, IndexEntry> m_records GUARDED_BY(m_records_mutex);
  // The temp file warm_for_put() made, until create_temp() takes it.
  mutable base::Mutex m_spare_mutex;
  mutable std::optional<base::AtomicFile> m_spare_temp GUARDED_BY(m_spare_mutex);
  HitJournal m_journal{m_layout};
  // Hits counted in memory and appended to the journal in batches
  // (flush_hits); never held together with m_index_mutex.
  base::Mutex m_hits_mutex;
  PendingHits m_pending_hits GUARDED_BY(m_hits_mutex);
  // When each key's hits last reached the journal (Unix ms).
  std::map<std::string, std::int64_t> m_journaled_ms GUARDED_BY(m_hits_mutex);
  // A write's aging stopped at its bound above the target: the next write goes on.
  std::atomic<bool> m_aging_continues{false};
};

}  // namespace opcache::store
