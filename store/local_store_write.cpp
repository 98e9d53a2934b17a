// LocalStore's write path (declared in store/local_store.hpp): put, and the
// adoption of bundles fetched from remotes, one at a time or in a batch:
// verified, staged (the object linked in), their rows written in one
// transaction, then their key records and the retirement of replaced objects.
#include <sys/stat.h>

#include <algorithm>

#include "base/canonical_json.hpp"
#include "base/try.hpp"
#include "store/bundle_reader.hpp"
#include "store/key.hpp"
#include "store/local_store.hpp"

namespace opcache::store {

namespace {

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

bool path_exists(const std::filesystem::path& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0;
}

std::uint64_t source_bytes(int fd) {
  struct stat info {};
  return ::fstat(fd, &info) == 0 ? static_cast<std::uint64_t>(info.st_size) : 0;
}

}  // namespace

bool LocalStore::key_record_exists(const std::string& key) const { return path_exists(m_keys.record_path(key)); }

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
  if (policy == ReplacePolicy::keep_existing && key_record_exists(key)) {
    // Cheap early exit: no encoding when the entry is already there. Every
    // entry stored since schema 2 has a key record, so without one the key
    // is (almost always) new: the index is not asked twice, and if it has a
    // row after all, record_row keeps it as this would have.
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

Result<base::AtomicFile> LocalStore::create_temp() const {
  {
    base::MutexLock lock(m_spare_mutex);
    if (m_spare_temp) {
      base::AtomicFile spare = std::move(*m_spare_temp);
      m_spare_temp.reset();
      return spare;
    }
  }
  return base::AtomicFile::create(m_layout.tmp());
}

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
  // The row was looked up in this transaction: a new key takes the cheaper INSERT.
  OPCACHE_TRY(existing ? m_index->upsert(entry) : m_index->insert(entry));
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
  const std::int64_t misses = m_pending_misses;
  if (misses != 0) {
    OPCACHE_TRY(m_index->add_counter(counter::misses, misses));
  }
  OPCACHE_TRY(transaction.commit());
  m_pending_misses -= misses;
  return {};
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

}  // namespace opcache::store
