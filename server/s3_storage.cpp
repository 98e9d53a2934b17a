#include "server/s3_storage.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "remote/s3/layout.hpp"
#include "base/byte_stream.hpp"
#include "base/canonical_json.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"

namespace opcache::server {

namespace {

namespace fs = std::filesystem;

// When a query names more keys than this, one listing of the bundles is
// cheaper than a HEAD per key.
constexpr std::size_t k_head_query_limit = 32;

std::string json_text(const nlohmann::json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// SHA-256 of a file from its start; the descriptor is left at the start.
Result<std::string> digest_of(int fd, const fs::path& path) {
  base::Sha256 hash;
  char buffer[1 << 16];
  ::lseek(fd, 0, SEEK_SET);
  for (;;) {
    OPCACHE_TRY_ASSIGN(std::size_t n, base::read_some(fd, buffer, sizeof buffer, path));
    if (n == 0) {
      break;
    }
    hash.update(buffer, n);
  }
  ::lseek(fd, 0, SEEK_SET);
  return hash.finish_hex();
}

class S3Storage final : public Storage {
 public:
  S3Storage(remote::S3Client client, fs::path temp_dir, std::int64_t max_bundle_bytes)
      : m_client(std::move(client)), m_temp_dir(std::move(temp_dir)), m_max_bundle_bytes(max_bundle_bytes) {}

  std::string describe() const override {
    const auto& location = m_client.location();
    return "s3 " + location.bucket + (location.prefix.empty() ? "" : "/" + location.prefix) + " at " +
           location.endpoint;
  }

  Result<std::optional<StoredBundle>> open(const std::string& key) override {
    // Download to an unlinked temp file, then stream it to the client.
    OPCACHE_TRY_ASSIGN(auto temp, base::AtomicFile::create(m_temp_dir));
    OPCACHE_TRY_ASSIGN(bool found, m_client.get_to_fd(remote::s3_bundle_name(key), temp.fd(), m_max_bundle_bytes));
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
    bundle.fd = std::move(fd);
    return std::optional<StoredBundle>(std::move(bundle));
  }

  Result<base::AtomicFile> create_upload() override { return base::AtomicFile::create(m_temp_dir); }

  Result<UploadOutcome> store_verified(base::AtomicFile upload, const store::Manifest& manifest,
                                       const std::string& digest, std::int64_t bytes) override {
    const auto bundle = remote::s3_bundle_name(manifest.key);
    OPCACHE_TRY_ASSIGN(auto existing, m_client.head(bundle));
    if (existing) {
      auto stored_digest = existing->metadata.find(remote::k_s3_meta_digest);
      return UploadOutcome{false, stored_digest == existing->metadata.end() ? "" : stored_digest->second,
                           existing->size};
    }
    OPCACHE_TRY(upload.finish_writing());
    remote::S3IndexFields fields{json_text(manifest.scenario, "device_mode"), json_text(manifest.scenario, "phase"),
                         json_text(manifest.scenario, "toolchain"), json_text(manifest.scenario, "soc"),
                         manifest.op_type()};
    const auto marker = remote::s3_index_name(fields, manifest.key);
    // The bundle first, its listing marker second: a listed entry always exists.
    OPCACHE_TRY(m_client.put_from_file(bundle, upload.temp_path(), {{remote::k_s3_meta_digest, digest}, {remote::k_s3_meta_index, marker}},
                                       "application/vnd.opcache.bundle"));
    auto empty = base::AtomicFile::create(m_temp_dir);
    if (empty) {
      (void)empty->finish_writing();
      (void)m_client.put_from_file(marker, empty->temp_path(), {}, "application/octet-stream");
    }
    return UploadOutcome{true, digest, bytes};
  }

  Result<bool> remove(const std::string& key) override {
    OPCACHE_TRY_ASSIGN(auto existing, m_client.head(remote::s3_bundle_name(key)));
    if (!existing) {
      return false;
    }
    OPCACHE_TRY(m_client.remove(remote::s3_bundle_name(key)));
    if (auto marker = existing->metadata.find(remote::k_s3_meta_index); marker != existing->metadata.end()) {
      OPCACHE_TRY(m_client.remove(marker->second));
    }
    return true;
  }

  Result<std::vector<bool>> present(const std::vector<std::string>& keys) override {
    std::vector<bool> found;
    found.reserve(keys.size());
    if (keys.size() <= k_head_query_limit) {
      for (const auto& key : keys) {
        OPCACHE_TRY_ASSIGN(auto object, m_client.head(remote::s3_bundle_name(key)));
        found.push_back(object.has_value());
      }
      return found;
    }
    std::set<std::string> stored;
    std::string token;
    do {
      OPCACHE_TRY_ASSIGN(auto page, m_client.list("v1/bundles/", "", token, 1000));
      for (const auto& object : page.objects) {
        stored.insert(object.name.substr(std::string("v1/bundles/").size()));
      }
      token = page.next_continuation_token;
    } while (!token.empty());
    for (const auto& key : keys) {
      found.push_back(stored.count(key) != 0);
    }
    return found;
  }

  Result<ListPage> list(const ListQuery& query) override {
    remote::S3IndexFields filter{query.device_mode, query.phase, query.toolchain, query.soc, query.op_type};
    const auto prefix = remote::s3_index_prefix(filter);
    ListPage page;
    const std::string after = query.after;
    std::string token;
    std::string last_returned;
    for (;;) {
      OPCACHE_TRY_ASSIGN(auto listed, m_client.list(prefix, token.empty() ? after : "", token, 1000));
      for (const auto& object : listed.objects) {
        auto parsed = remote::parse_s3_index_name(object.name);
        if (!parsed || !matches(parsed->first, filter)) {
          continue;
        }
        if (static_cast<int>(page.entries.size()) == query.limit) {
          page.next = last_returned;
          return page;
        }
        const auto& fields = parsed->first;
        page.entries.push_back(ListedEntry{parsed->second, fields.op_type,
                                           nlohmann::json{{"device_mode", fields.device_mode},
                                                          {"phase", fields.phase},
                                                          {"toolchain", fields.toolchain},
                                                          {"soc", fields.soc}},
                                           -1, 0});
        last_returned = object.name;
      }
      token = listed.next_continuation_token;
      if (token.empty()) {
        return page;
      }
    }
  }

  StorageGauges gauges() override { return {}; }  // unknown without listing the bucket

 private:
  static bool matches(const remote::S3IndexFields& fields, const remote::S3IndexFields& filter) {
    auto same = [](const std::string& want, const std::string& have) { return want.empty() || want == have; };
    return same(filter.device_mode, fields.device_mode) && same(filter.phase, fields.phase) &&
           same(filter.toolchain, fields.toolchain) && same(filter.soc, fields.soc) &&
           same(filter.op_type, fields.op_type);
  }

  remote::S3Client m_client;
  fs::path m_temp_dir;
  std::int64_t m_max_bundle_bytes;
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
