// The s3:// remote: straight to an S3-compatible bucket in the layout the
// server uses (remote/s3/layout.hpp), so both see the same entries.
#include <set>

#include "remote/remote_store.hpp"
#include "remote/s3/client.hpp"
#include "remote/s3/layout.hpp"
#include "store/bundle_reader.hpp"
#include "base/byte_stream.hpp"
#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::remote {

namespace {

constexpr std::size_t k_head_query_limit = 32;
constexpr std::int64_t k_max_bundle_bytes = 2ll << 30;

std::string json_text(const nlohmann::json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

class S3Remote final : public RemoteStore {
 public:
  S3Remote(RemoteOptions options, S3Client client) : m_options(std::move(options)), m_client(std::move(client)) {}

  std::string name() const override { return display_url(m_options.url); }

  Result<bool> fetch(const std::string& key, int fd) override {
    return m_client.get_to_fd(s3_bundle_name(key), fd, k_max_bundle_bytes);
  }

  Status upload(const std::string& key, const std::filesystem::path& bundle) override {
    if (m_options.read_only) {
      return Error::usage("remote " + name() + " is read-only");
    }
    OPCACHE_TRY_ASSIGN(auto existing, m_client.head(s3_bundle_name(key)));
    if (existing) {
      return {};
    }
    // The manifest names the listing marker; the digest goes into metadata.
    OPCACHE_TRY_ASSIGN(auto fd, base::open_for_reading(bundle));
    base::FdSource source(fd.get(), bundle);
    std::string digest;
    OPCACHE_TRY_ASSIGN(auto manifest, store::verify_bundle(source, {}, &digest));
    if (manifest.key != key) {
      return Error::corrupt(bundle.string() + " holds key " + manifest.key + ", not " + key);
    }
    S3IndexFields fields{json_text(manifest.scenario, "device_mode"), json_text(manifest.scenario, "phase"),
                         json_text(manifest.scenario, "toolchain"), json_text(manifest.scenario, "soc"),
                         manifest.op_type()};
    const auto marker = s3_index_name(fields, key);
    OPCACHE_TRY(m_client.put_from_file(s3_bundle_name(key), bundle,
                                       {{k_s3_meta_digest, digest}, {k_s3_meta_index, marker}},
                                       "application/vnd.opcache.bundle"));
    OPCACHE_TRY_ASSIGN(auto empty, base::AtomicFile::create(bundle.parent_path()));
    OPCACHE_TRY(empty.finish_writing());
    return m_client.put_from_file(marker, empty.temp_path(), {});
  }

  Result<std::vector<bool>> query(const std::vector<std::string>& keys) override {
    std::vector<bool> present;
    if (keys.size() <= k_head_query_limit) {
      for (const auto& key : keys) {
        OPCACHE_TRY_ASSIGN(auto object, m_client.head(s3_bundle_name(key)));
        present.push_back(object.has_value());
      }
      return present;
    }
    std::set<std::string> stored;
    std::string token;
    const std::string root = "v1/bundles/";
    do {
      OPCACHE_TRY_ASSIGN(auto page, m_client.list(root, "", token, 1000));
      for (const auto& object : page.objects) {
        stored.insert(object.name.substr(root.size()));
      }
      token = page.next_continuation_token;
    } while (!token.empty());
    for (const auto& key : keys) {
      present.push_back(stored.count(key) != 0);
    }
    return present;
  }

  Result<std::vector<std::string>> list_keys(const ListFilter& filter) override {
    S3IndexFields wanted{filter.device_mode, filter.phase, filter.toolchain, filter.soc, filter.op_type};
    std::vector<std::string> keys;
    std::string token;
    do {
      OPCACHE_TRY_ASSIGN(auto page, m_client.list(s3_index_prefix(wanted), "", token, 1000));
      for (const auto& object : page.objects) {
        auto parsed = parse_s3_index_name(object.name);
        if (parsed && matches(parsed->first, wanted)) {
          keys.push_back(parsed->second);
        }
      }
      token = page.next_continuation_token;
    } while (!token.empty());
    return keys;
  }

 private:
  static bool matches(const S3IndexFields& have, const S3IndexFields& want) {
    auto same = [](const std::string& w, const std::string& h) { return w.empty() || w == h; };
    return same(want.device_mode, have.device_mode) && same(want.phase, have.phase) &&
           same(want.toolchain, have.toolchain) && same(want.soc, have.soc) && same(want.op_type, have.op_type);
  }

  RemoteOptions m_options;
  S3Client m_client;
};

}  // namespace

Result<std::unique_ptr<RemoteStore>> make_s3_remote(const RemoteOptions& options, const base::EnvLookup& env) {
  OPCACHE_TRY_ASSIGN(auto location, parse_s3_url(options.url));
  OPCACHE_TRY_ASSIGN(auto credentials, load_s3_credentials(env));
  S3Options s3_options;
  s3_options.connect_timeout_ms = options.connect_timeout_ms;
  s3_options.timeout_ms = options.timeout_ms;
  s3_options.retries = options.retries;
  s3_options.retry_timeouts = false;  // like the http remote: a timeout is not retried (docs/remotes.md)
  return std::unique_ptr<RemoteStore>(
      new S3Remote(options, S3Client(std::move(location), std::move(credentials), s3_options)));
}

}  // namespace opcache::remote
