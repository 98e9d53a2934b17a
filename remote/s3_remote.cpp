// The s3:// remote: straight to an S3-compatible bucket through the bucket
// layer the server's S3 storage uses too (remote/s3/bucket.hpp), so both see
// the same entries. Exec manifests are merged here, on the client (read,
// merge, write): of two clients racing on one command key the last one wins.

#include "remote/client_revocation.hpp"
#include "remote/remote_store.hpp"
#include "remote/s3/bucket.hpp"
#include "store/bundle_reader.hpp"
#include "base/byte_stream.hpp"
#include "base/file_io.hpp"
#include "base/try.hpp"
#include "store/key.hpp"

namespace opcache::remote {

namespace {

constexpr std::int64_t k_max_bundle_bytes = 2ll << 30;

class S3Remote final : public RemoteStore {
 public:
  S3Remote(RemoteOptions options, S3Client client)
      : RemoteStore(options.read_only), m_options(std::move(options)), m_bucket(std::move(client)) {}

  std::string name() const override { return display_url(m_options.url); }

  Result<Fetched> fetch(const std::string& key, int fd, store::Signatures* signatures,
                        const LookupHint& /*hint: no server to tell*/) override {
    OPCACHE_TRY_ASSIGN(bool found, m_bucket.get_bundle(key, fd, k_max_bundle_bytes));
    if (!found) {
      // Revoking deletes the bundle: only a miss can be revoked.
      OPCACHE_TRY_ASSIGN(auto tombstone, m_bucket.get_tombstone(key, std::filesystem::temp_directory_path()));
      return tombstone ? Fetched::revoked : Fetched::miss;
    }
    if (signatures != nullptr) {
      // Read after the bundle: signatures added meanwhile are a bonus; the
      // caller verifies them against the bytes it got.
      OPCACHE_TRY_ASSIGN(*signatures, m_bucket.get_signatures(key, std::filesystem::temp_directory_path()));
    }
    return Fetched::hit;
  }

  Result<std::optional<RevocationPage>> revocations(std::int64_t since_s) override {
    return list_revocations(since_s, [&](std::int64_t since_ms, std::size_t limit, bool* truncated) {
      return m_bucket.list_tombstones(since_ms, limit, truncated, std::filesystem::temp_directory_path());
    });
  }

  Result<std::vector<bool>> do_revoke(const std::vector<std::string>& keys, const std::string& reason,
                                   const base::Ed25519PrivateKey* /*signer: no server to judge it*/) override {
    return revoke_each(
        keys, reason,
        [&](const store::Tombstone& tombstone) {
          return m_bucket.put_tombstone(tombstone, std::filesystem::temp_directory_path());
        },
        [&](const std::string& key) { return m_bucket.remove_entry(key); });
  }

  Result<bool> do_unrevoke(const std::string& key) override {
    return m_bucket.remove_tombstone(key);
  }

  // Read, merge, write: two concurrent additions may lose one of them (S3
  // has no compare-and-swap here); the next `push --add-signatures` adds it again.
  Status do_add_signatures(const std::string& key, const store::Signatures& signatures) override {
    OPCACHE_TRY_ASSIGN(auto existing, m_bucket.head_bundle(key));
    if (!existing) {
      return Error::not_found("remote " + name() + " has no entry " + key);
    }
    const auto temp_dir = std::filesystem::temp_directory_path();
    OPCACHE_TRY_ASSIGN(auto merged, m_bucket.get_signatures(key, temp_dir));
    const bool changed = store::merge_signatures(merged, signatures) > 0;
    return changed ? m_bucket.put_signatures(key, merged, temp_dir) : Status{};
  }

  Status do_upload(const std::string& key, const std::filesystem::path& bundle,
                const store::Signatures& signatures) override {
    OPCACHE_TRY_ASSIGN(auto existing, m_bucket.head_bundle(key));
    if (existing) {
      return {};
    }
    OPCACHE_TRY_ASSIGN(auto tombstone, m_bucket.get_tombstone(key, std::filesystem::temp_directory_path()));
    if (tombstone) {
      return Error::usage("remote " + name() + " refuses " + key + ": revoked (" + tombstone->reason +
                          "); `opcache unrevoke --remote " + name() + " " + key + "` accepts it again");
    }
    // The manifest names the listing marker; the digest goes into metadata.
    OPCACHE_TRY_ASSIGN(auto fd, base::open_for_reading(bundle));
    base::FdSource source(fd.get(), bundle);
    std::string digest;
    OPCACHE_TRY_ASSIGN(auto manifest, store::verify_bundle(source, {}, &digest));
    if (manifest.key != key) {
      return Error::corrupt(bundle.string() + " holds key " + manifest.key + ", not " + key);
    }
    return m_bucket.put_entry(key, bundle, index_fields_of(manifest), digest, signatures);
  }

  Result<std::optional<std::string>> fetch_exec_manifest(const std::string& command_key) override {
    OPCACHE_TRY(store::check_key(command_key));
    return m_bucket.get_exec_manifest(command_key, std::filesystem::temp_directory_path());
  }

  Status do_store_exec_manifest(const store::ExecManifest& manifest) override {
    OPCACHE_TRY(store::check_key(manifest.command_key));
    OPCACHE_TRY(m_bucket.merge_exec_manifest(manifest, std::filesystem::temp_directory_path()));
    return {};
  }

  Result<std::vector<bool>> query(const std::vector<std::string>& keys) override { return m_bucket.present(keys); }

  Result<std::vector<std::string>> list_keys(const ListFilter& filter) override {
    const S3IndexFields wanted{filter.device_mode, filter.phase, filter.toolchain, filter.soc, filter.op_type};
    std::vector<std::string> keys;
    OPCACHE_TRY(m_bucket.for_each_marker(wanted, "", [&keys](const S3Marker& marker) {
      keys.push_back(marker.key);
      return true;
    }));
    return keys;
  }

  void cancel_transfers() noexcept override { m_bucket.client().cancel(); }

 private:
  RemoteOptions m_options;
  S3Bucket m_bucket;
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
