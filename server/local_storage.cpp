#include "server/local_storage.hpp"

#include <sys/stat.h>

#include "base/try.hpp"

namespace opcache::server {

namespace {

class LocalStorage final : public Storage {
 public:
  explicit LocalStorage(std::unique_ptr<store::LocalStore> store) : m_store(std::move(store)) {}

  std::string describe() const override { return "local " + m_store->layout().root().string(); }

  Result<std::optional<StoredBundle>> open(const std::string& key) override {
    OPCACHE_TRY_ASSIGN(auto found, m_store->open_bundle(key));
    if (!found) {
      return std::optional<StoredBundle>();
    }
    struct stat info {};
    if (::fstat(found->second.get(), &info) != 0) {
      return Error::io("cannot stat the bundle of " + key);
    }
    StoredBundle bundle;
    bundle.fd = std::move(found->second);
    bundle.size = info.st_size;
    bundle.digest = found->first.digest;
    return std::optional<StoredBundle>(std::move(bundle));
  }

  Result<base::AtomicFile> create_upload() override { return m_store->create_temp(); }

  Result<UploadOutcome> store_verified(base::AtomicFile upload, const store::Manifest& manifest,
                                       const std::string& digest, std::int64_t bytes) override {
    OPCACHE_TRY_ASSIGN(auto outcome, m_store->adopt_verified(std::move(upload), manifest, digest, bytes,
                                                             ReplacePolicy::keep_existing));
    return UploadOutcome{outcome.stored, outcome.digest, outcome.bundle_bytes};
  }

  Result<bool> remove(const std::string& key) override { return m_store->remove(key); }

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

  StorageGauges gauges() override {
    StorageGauges gauges;
    if (auto stats = m_store->stats()) {
      gauges.entries = stats->totals.entries;
      gauges.bytes = stats->totals.bundle_bytes;
      auto it = stats->counters.find("evictions");
      gauges.evictions = it == stats->counters.end() ? 0 : it->second;
    }
    return gauges;
  }

 private:
  std::unique_ptr<store::LocalStore> m_store;
};

}  // namespace

Result<std::unique_ptr<Storage>> make_local_storage(store::StoreOptions options) {
  OPCACHE_TRY_ASSIGN(auto local, store::LocalStore::open(std::move(options)));
  return std::unique_ptr<Storage>(new LocalStorage(std::move(local)));
}

}  // namespace opcache::server
