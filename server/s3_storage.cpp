#include "server/s3_storage.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <deque>
#include <unordered_map>

#include "base/mutex.hpp"
#include "remote/s3/bucket.hpp"
#include "remote/s3/presign.hpp"
#include "base/byte_stream.hpp"
#include "base/canonical_json.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"
#include "store/bundle_reader.hpp"

namespace opcache::server {

namespace {

namespace fs = std::filesystem;

// SHA-256 of a file from its start; the descriptor is left at the start.
Result<std::string> digest_of(int fd, const fs::path& path) {
  ::lseek(fd, 0, SEEK_SET);
  auto digest = base::sha256_hex_of_file(fd, path);
  ::lseek(fd, 0, SEEK_SET);
  return digest;
}

// The statistics' facts of a manifest.
std::shared_ptr<const EntryFacts> facts_of(const store::Manifest& manifest) {
  auto scenario = base::canonical_json(manifest.scenario);
  return std::make_shared<const EntryFacts>(
      EntryFacts{manifest.op_type(), scenario ? *scenario : std::string(), manifest.build_ms});
}

// The statistics' facts from the manifest of the bundle behind `fd`, or null
// when it cannot be read (the client verifies the bundle anyway); the
// descriptor is left at the start.
std::shared_ptr<const EntryFacts> facts_of(int fd, const fs::path& path) {
  ::lseek(fd, 0, SEEK_SET);
  base::FdSource source(fd, path);
  store::BundleReader reader(source, store::BundleLimits{}, store::KeyCheck::trust_digest);
  auto manifest = reader.read_manifest();
  ::lseek(fd, 0, SEEK_SET);
  return manifest ? facts_of(*manifest) : nullptr;
}

// The facts of the entries this replica has read or stored, for the
// statistics of downloads redirected to the bucket, which read no bundle
// (and of those no replica has read: none, and the statistics take the
// client's lookup hints). Objects never change, so facts never go stale.
// Bounded: the oldest are forgotten first. Thread-safe.
class FactsMemo {
 public:
  static constexpr std::size_t k_capacity = 20'000;

  void remember(const std::string& key, std::shared_ptr<const EntryFacts> facts) EXCLUDES(m_mutex) {
    if (!facts) {
      return;
    }
    base::MutexLock lock(m_mutex);
    if (!m_facts.emplace(key, std::move(facts)).second) {
      return;
    }
    m_order.push_back(key);
    if (m_order.size() > k_capacity) {
      m_facts.erase(m_order.front());
      m_order.pop_front();
    }
  }

  std::shared_ptr<const EntryFacts> find(const std::string& key) const EXCLUDES(m_mutex) {
    base::MutexLock lock(m_mutex);
    auto found = m_facts.find(key);
    return found == m_facts.end() ? nullptr : found->second;
  }

 private:
  mutable base::Mutex m_mutex;
  std::unordered_map<std::string, std::shared_ptr<const EntryFacts>> m_facts GUARDED_BY(m_mutex);
  std::deque<std::string> m_order GUARDED_BY(m_mutex);  // keys of m_facts, oldest first
};

class S3Storage final : public Storage {
 public:
  S3Storage(remote::S3Client client, fs::path temp_dir, std::int64_t max_bundle_bytes)
      : m_bucket(std::move(client)), m_temp_dir(std::move(temp_dir)), m_max_bundle_bytes(max_bundle_bytes) {}

  std::string describe() const override {
    const auto& location = m_bucket.client().location();
    return "s3 " + location.bucket + (location.prefix.empty() ? "" : "/" + location.prefix) + " at " +
           location.endpoint;
  }
  std::string public_description() const override {
    const auto& location = m_bucket.client().location();
    return "s3 " + location.bucket + (location.prefix.empty() ? "" : "/" + location.prefix);
  }
  std::optional<fs::path> state_dir() const override { return std::nullopt; }
  bool reads_are_local() const override { return false; }
  remote::S3Bucket* shared_bucket() override { return &m_bucket; }

  Result<std::optional<StoredBundle>> open(const std::string& key) override {
    // Download to an unlinked temp file, then stream it to the client.
    OPCACHE_TRY_ASSIGN(auto temp, base::AtomicFile::create(m_temp_dir));
    OPCACHE_TRY_ASSIGN(bool found, m_bucket.get_bundle(key, temp.fd(), m_max_bundle_bytes));
    if (!found) {
      return std::optional<StoredBundle>();
    }
    OPCACHE_TRY_ASSIGN(auto fd, base::open_for_reading(temp.temp_path()));
    // `temp` removes its name when it goes out of scope; `fd` keeps the data.
    StoredBundle bundle;
    struct stat info {};
    ::fstat(fd.get(), &info);
    bundle.size = info.st_size;
    OPCACHE_TRY_ASSIGN(bundle.digest, digest_of(fd.get(), temp.temp_path()));
    bundle.facts = facts_of(fd.get(), temp.temp_path());
    m_facts.remember(key, bundle.facts);
    // Read after the bundle, so signatures added meanwhile are included;
    // the client verifies each against the bytes it gets anyway.
    OPCACHE_TRY_ASSIGN(bundle.signatures, m_bucket.get_signatures(key, m_temp_dir));
    bundle.fd = std::move(fd);
    return std::optional<StoredBundle>(std::move(bundle));
  }

  bool locates_bundles() const override { return true; }

  // A HEAD of the bundle object (its size and the digest in its metadata)
  // and a read of its signatures: the bundle itself never passes here.
  Result<std::optional<LocatedBundle>> locate(const std::string& key, std::chrono::seconds expiry) override {
    OPCACHE_TRY_ASSIGN(auto object, m_bucket.head_bundle(key));
    if (!object) {
      return std::optional<LocatedBundle>();
    }
    LocatedBundle located;
    located.size = object->size;
    auto digest = object->metadata.find(remote::k_s3_meta_digest);
    if (digest == object->metadata.end() || !base::is_sha256_hex(digest->second)) {
      return std::optional<LocatedBundle>(std::move(located));  // no URL: the caller serves it
    }
    located.digest = digest->second;
    // Read after the HEAD, so signatures added meanwhile are included; the
    // client verifies each against the bytes it gets anyway.
    OPCACHE_TRY_ASSIGN(located.signatures, m_bucket.get_signatures(key, m_temp_dir));
    const auto& client = m_bucket.client();
    OPCACHE_TRY_ASSIGN(located.url, remote::presign_s3_get(client.location(), client.credentials(),
                                                          client.object_url(remote::s3_bundle_name(key)), expiry,
                                                          std::chrono::system_clock::now()));
    located.facts = m_facts.find(key);
    return std::optional<LocatedBundle>(std::move(located));
  }

  Result<base::AtomicFile> create_upload() override { return base::AtomicFile::create(m_temp_dir); }

  Result<UploadOutcome> store_verified(base::AtomicFile upload, const store::Manifest& manifest,
                                       const std::string& digest, std::int64_t bytes,
                                       const store::Signatures& signatures) override {
    OPCACHE_TRY_ASSIGN(auto existing, m_bucket.head_bundle(manifest.key));
    if (existing) {
      auto stored_digest = existing->metadata.find(remote::k_s3_meta_digest);
      return UploadOutcome{false, stored_digest == existing->metadata.end() ? "" : stored_digest->second,
                           existing->size};
    }
    OPCACHE_TRY(upload.finish_writing());
    OPCACHE_TRY(m_bucket.put_entry(manifest.key, upload.temp_path(), remote::index_fields_of(manifest), digest,
                                   signatures));
    m_facts.remember(manifest.key, facts_of(manifest));
    return UploadOutcome{true, digest, bytes};
  }

  // Read, merge, write: of two concurrent additions one may be lost (S3 has
  // no compare-and-swap here); adding it again is harmless.
  Result<std::optional<int>> add_signatures(const std::string& key, const store::Signatures& signatures) override {
    OPCACHE_TRY_ASSIGN(auto existing, m_bucket.head_bundle(key));
    if (!existing) {
      return std::optional<int>();
    }
    const auto digest = existing->metadata.find(remote::k_s3_meta_digest);
    if (digest == existing->metadata.end()) {
      return Error::corrupt("the bundle object of " + key + " has no " + remote::k_s3_meta_digest + " metadata");
    }
    OPCACHE_TRY_ASSIGN(auto merged, m_bucket.get_signatures(key, m_temp_dir));
    OPCACHE_TRY_ASSIGN(const int added, store::merge_verified_signatures(merged, signatures, key, digest->second));
    if (added > 0) {
      OPCACHE_TRY(m_bucket.put_signatures(key, merged, m_temp_dir));
    }
    return std::optional<int>(added);
  }

  Result<bool> remove(const std::string& key) override { return m_bucket.remove_entry(key); }

  Result<std::vector<bool>> present(const std::vector<std::string>& keys) override { return m_bucket.present(keys); }

  Result<ListPage> list(const ListQuery& query) override {
    const remote::S3IndexFields filter{query.device_mode, query.phase, query.toolchain, query.soc, query.op_type};
    ListPage page;
    std::string last_returned;
    OPCACHE_TRY(m_bucket.for_each_marker(filter, query.after, [&](const remote::S3Marker& marker) {
      if (static_cast<int>(page.entries.size()) == query.limit) {
        page.next = last_returned;
        return false;
      }
      const auto& fields = marker.fields;
      page.entries.push_back(ListedEntry{marker.key, fields.op_type,
                                         nlohmann::json{{"device_mode", fields.device_mode},
                                                        {"phase", fields.phase},
                                                        {"toolchain", fields.toolchain},
                                                        {"soc", fields.soc}},
                                         -1, 0});
      last_returned = marker.name;
      return true;
    }));
    return page;
  }

  Result<std::optional<store::Tombstone>> revocation(const std::string& key) override {
    return m_bucket.get_tombstone(key, m_temp_dir);
  }

  Result<bool> revoke(const store::Tombstone& tombstone) override {
    OPCACHE_TRY(m_bucket.put_tombstone(tombstone, m_temp_dir));
    return m_bucket.remove_entry(tombstone.key);
  }

  Result<bool> unrevoke(const std::string& key) override { return m_bucket.remove_tombstone(key); }

  Result<std::vector<store::Tombstone>> revocations(std::int64_t since_ms, std::size_t limit,
                                                   bool* truncated) override {
    return m_bucket.list_tombstones(since_ms, limit, truncated, m_temp_dir);
  }

  // <prefix>/v1/manifests/<command key>.json, shared with the s3:// remote.
  Result<std::optional<store::ExecManifest>> exec_manifest(const std::string& command_key) override {
    OPCACHE_TRY_ASSIGN(auto text, m_bucket.get_exec_manifest(command_key, m_temp_dir));
    if (!text) {
      return std::optional<store::ExecManifest>();
    }
    const auto name = "exec manifest object " + remote::s3_exec_manifest_name(command_key);
    OPCACHE_TRY_ASSIGN(auto manifest, store::parse_exec_manifest(*text, name));
    if (manifest.command_key != command_key) {
      return Error::corrupt(name + " holds the manifest of " + manifest.command_key);
    }
    return std::optional<store::ExecManifest>(std::move(manifest));
  }

  Result<store::ExecManifest> merge_exec_manifest(const store::ExecManifest& manifest) override {
    return m_bucket.merge_exec_manifest(manifest, m_temp_dir);
  }

  StorageGauges gauges() override { return {}; }  // unknown without listing the bucket

 private:
  remote::S3Bucket m_bucket;
  fs::path m_temp_dir;
  std::int64_t m_max_bundle_bytes;
  FactsMemo m_facts;
};

}  // namespace

Result<std::unique_ptr<Storage>> make_s3_storage(const std::string& url, const base::EnvLookup& env,
                                                 const fs::path& temp_dir, std::int64_t max_bundle_bytes) {
  OPCACHE_TRY_ASSIGN(auto location, remote::parse_s3_url(url));
  OPCACHE_TRY_ASSIGN(auto credentials, remote::load_s3_credentials(env));
  remote::S3Client client(std::move(location), std::move(credentials));
  OPCACHE_TRY(client.create_bucket_if_missing());
  fs::path spool = temp_dir.empty() ? fs::temp_directory_path() : temp_dir;
  OPCACHE_TRY(base::ensure_directory(spool));
  return std::unique_ptr<Storage>(new S3Storage(std::move(client), spool, max_bundle_bytes));
}

}  // namespace opcache::server
