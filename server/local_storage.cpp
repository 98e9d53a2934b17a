#include "server/local_storage.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/file_io.hpp"
#include "base/try.hpp"
#include "server/bundle_cache.hpp"
#include "store/exec_manifest_file.hpp"

namespace opcache::server {

namespace {

// The whole file behind `fd` (`size` bytes), or std::nullopt when it cannot
// be read completely; the offset is then back at the start, for streaming.
std::optional<std::string> read_whole(int fd, std::int64_t size) {
  std::string bytes(static_cast<std::size_t>(size), '\0');
  auto got = base::read_up_to(fd, bytes.data(), bytes.size(), "bundle");
  if (!got || *got != bytes.size()) {
    ::lseek(fd, 0, SEEK_SET);
    return std::nullopt;
  }
  return bytes;
}

// A kept bundle is trusted this long after its object was last seen;
// stat()ing the object on every hit cost 12% of the server's CPU (perf).
constexpr std::int64_t k_recheck_ns = 1'000'000'000;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StoredBundle from_memory(std::shared_ptr<const CachedBundle> kept) {
  StoredBundle bundle;
  bundle.size = static_cast<std::int64_t>(kept->bytes.size());
  bundle.digest = kept->digest;
  bundle.signatures = kept->signatures;
  bundle.facts = std::static_pointer_cast<const EntryFacts>(kept->facts);
  bundle.memory = std::shared_ptr<const std::string>(kept, &kept->bytes);
  bundle.memory_file = kept->file;
  return bundle;
}

std::shared_ptr<const EntryFacts> facts_of(const store::IndexEntry& entry) {
  return std::make_shared<const EntryFacts>(EntryFacts{entry.op_type, entry.scenario, entry.build_ms});
}

class LocalStorage final : public Storage {
 public:
  LocalStorage(std::unique_ptr<store::LocalStore> store, base::FileDescriptor objects, std::size_t cache_bytes,
               std::size_t open_files)
      : m_store(std::move(store)),
        m_objects(std::move(objects)),
        m_cache(cache_bytes, k_cached_bundle_limit),
        m_open_files(open_files) {}

  std::string describe() const override { return "local " + m_store->layout().root().string(); }
  std::string public_description() const override { return "local"; }
  std::optional<std::filesystem::path> state_dir() const override { return m_store->layout().root(); }
  bool reads_are_local() const override { return true; }

  Result<std::optional<StoredBundle>> open(const std::string& key) override {
    if (auto kept = m_cache.find(key)) {
      const std::int64_t now = steady_ns();
      const bool recent = now - kept->checked_ns.load(std::memory_order_relaxed) < k_recheck_ns;
      if (recent || object_present(kept->digest)) {
        if (!recent) {
          kept->checked_ns.store(now, std::memory_order_relaxed);
        }
        return std::optional<StoredBundle>(from_memory(std::move(kept)));
      }
      m_cache.erase(key);  // deleted, replaced or evicted since it was read
    }
    OPCACHE_TRY_ASSIGN(auto found, m_store->open_bundle(key));
    if (!found) {
      return std::optional<StoredBundle>();
    }
    struct stat info {};
    if (::fstat(found->second.get(), &info) != 0) {
      return Error::io("cannot stat the bundle of " + key);
    }
    if (!S_ISREG(info.st_mode)) {
      // Streaming a directory or a device would answer 200 and then break.
      return Error::corrupt("the object of " + key + " in " + m_store->layout().objects().string() +
                            " is not a regular file");
    }
    auto facts = facts_of(found->first);
    if (info.st_size <= static_cast<std::int64_t>(k_cached_bundle_limit)) {
      if (auto bytes = read_whole(found->second.get(), info.st_size)) {
        auto file = info.st_size >= static_cast<std::int64_t>(k_zero_copy_bytes)
                        ? m_open_files.keep(std::move(found->second))
                        : nullptr;
        auto kept = std::make_shared<const CachedBundle>(found->first.digest, std::move(*bytes), steady_ns(),
                                                         found->first.signatures, facts, std::move(file));
        m_cache.insert(key, kept);
        return std::optional<StoredBundle>(from_memory(std::move(kept)));
      }
      // Unreadable: stream the file instead, which reports the error.
    }
    StoredBundle bundle;
    bundle.fd = std::move(found->second);
    bundle.size = info.st_size;
    bundle.digest = found->first.digest;
    bundle.signatures = std::move(found->first.signatures);
    bundle.facts = std::move(facts);
    return std::optional<StoredBundle>(std::move(bundle));
  }

  Result<base::AtomicFile> create_upload() override { return m_store->create_temp(); }

  Result<UploadOutcome> store_verified(base::AtomicFile upload, const store::Manifest& manifest,
                                       const std::string& digest, std::int64_t bytes,
                                       const store::Signatures& signatures) override {
    // Not from_remote: the server judged the signatures itself (api.cpp);
    // the store keeps those that verify (all of them, the caller checked).
    const store::Provenance provenance{false, "upload", signatures};
    OPCACHE_TRY_ASSIGN(auto outcome, m_store->adopt_verified(std::move(upload), manifest, digest, bytes,
                                                             ReplacePolicy::keep_existing, base::Durability::synced,
                                                             provenance));
    m_cache.erase(manifest.key);
    return UploadOutcome{outcome.stored, outcome.digest, outcome.bundle_bytes};
  }

  Result<std::optional<int>> add_signatures(const std::string& key, const store::Signatures& signatures) override {
    auto update = m_store->add_signatures(key, signatures);
    m_cache.erase(key);  // the kept copy carries the old signatures
    if (!update) {
      if (update.error().code() == ErrorCode::not_found) {
        return std::optional<int>();
      }
      return update.error();
    }
    return std::optional<int>(update->added);
  }

  Result<bool> remove(const std::string& key) override {
    auto removed = m_store->remove(key);
    m_cache.erase(key);
    return removed;
  }

  Result<std::vector<bool>> present(const std::vector<std::string>& keys) override {
    std::vector<bool> found;
    found.reserve(keys.size());
    for (const auto& key : keys) {
      OPCACHE_TRY_ASSIGN(bool here, m_store->contains(key));
      found.push_back(here);
    }
    return found;
  }

  Result<ListPage> list(const ListQuery& query) override {
    ListFilter filter;
    filter.device_mode = query.device_mode;
    filter.phase = query.phase;
    filter.toolchain = query.toolchain;
    filter.soc = query.soc;
    filter.op_type = query.op_type;
    filter.after_key = query.after;
    filter.limit = query.limit + 1;  // one more tells whether a next page exists
    OPCACHE_TRY_ASSIGN(auto entries, m_store->list(filter));
    ListPage page;
    for (const auto& entry : entries) {
      if (static_cast<int>(page.entries.size()) == query.limit) {
        page.next = page.entries.back().key;
        break;
      }
      page.entries.push_back(ListedEntry{entry.key, entry.op_type,
                                         nlohmann::json::parse(entry.scenario, nullptr, false), entry.bundle_size,
                                         entry.created_ms});
    }
    return page;
  }

  Result<std::optional<store::Tombstone>> revocation(const std::string& key) override {
    return m_store->revocation(key);
  }

  Result<bool> revoke(const store::Tombstone& tombstone) override {
    auto revoked = m_store->revoke(tombstone);
    m_cache.erase(tombstone.key);
    return revoked;
  }

  Result<bool> unrevoke(const std::string& key) override { return m_store->unrevoke(key); }

  Result<std::vector<store::Tombstone>> revocations(std::int64_t since_ms, std::size_t limit,
                                                   bool* truncated) override {
    return tombstones().list(since_ms, limit, truncated);
  }

  // manifests/<xx>/<command key>.json of the store, as a client's cache keeps them.
  Result<std::optional<store::ExecManifest>> exec_manifest(const std::string& command_key) override {
    return store::read_exec_manifest(m_store->layout(), command_key);
  }

  Result<store::ExecManifest> merge_exec_manifest(const store::ExecManifest& manifest) override {
    return store::merge_into_exec_manifest(m_store->layout(), manifest);
  }

  StorageGauges gauges() override {
    StorageGauges gauges;
    if (auto stats = m_store->stats()) {
      gauges.entries = stats->totals.entries;
      gauges.bytes = stats->totals.bundle_bytes;
      auto it = stats->counters.find("evictions");
      gauges.evictions = it == stats->counters.end() ? 0 : it->second;
    }
    if (const auto& aging = m_store->options().aging; aging.enabled()) {
      gauges.limit_bytes = aging.max_bytes;
    }
    return gauges;
  }

 private:
  store::TombstoneDirectory tombstones() const { return store::TombstoneDirectory(m_store->layout().revocations()); }

  // The object's name under objects/ ("ab/ab12…").
  static std::string object_name(const std::string& digest) { return digest.substr(0, 2) + "/" + digest; }

  // Whether objects/<d0d1>/<digest> is still a regular file: relative to
  // the objects directory, so the check walks two path components.
  bool object_present(const std::string& digest) const {
    struct stat info {};
    return ::fstatat(m_objects.get(), object_name(digest).c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISREG(info.st_mode);
  }

  std::unique_ptr<store::LocalStore> m_store;
  base::FileDescriptor m_objects;  // the store's objects/ directory (O_PATH)
  BundleCache m_cache;
  OpenFileBudget m_open_files;  // of the large bundles in m_cache
};

}  // namespace

Result<std::unique_ptr<Storage>> make_local_storage(store::StoreOptions options, std::size_t cache_bytes,
                                                    std::size_t open_files) {
  OPCACHE_TRY_ASSIGN(auto local, store::LocalStore::open(std::move(options)));
  const auto objects_path = local->layout().objects();
  base::FileDescriptor objects(::open(objects_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!objects.valid()) {
    return Error::io("cannot open the store's objects directory " + objects_path.string() + ": " +
                     std::strerror(errno));
  }
  return std::unique_ptr<Storage>(new LocalStorage(std::move(local), std::move(objects), cache_bytes, open_files));
}

}  // namespace opcache::server
