#include "remote/remote_store.hpp"

#include "base/try.hpp"

namespace opcache::remote {

namespace {

constexpr RemoteScheme k_schemes[] = {
    {"http://", RemoteKind::server},
    {"https://", RemoteKind::server},
    {"s3://", RemoteKind::s3},
    {"file://", RemoteKind::file},
};

}  // namespace

Status RemoteStore::writable() const {
  if (m_read_only) {
    return Error::usage("remote " + name() + " is read-only");
  }
  return {};
}

Status RemoteStore::upload(const std::string& key, const std::filesystem::path& bundle,
                           const store::Signatures& signatures) {
  OPCACHE_TRY(writable());
  return do_upload(key, bundle, signatures);
}

Status RemoteStore::add_signatures(const std::string& key, const store::Signatures& signatures) {
  OPCACHE_TRY(writable());
  return do_add_signatures(key, signatures);
}

BuildLeases* RemoteStore::leases() { return m_read_only ? nullptr : do_leases(); }

Result<std::vector<bool>> RemoteStore::revoke(const std::vector<std::string>& keys, const std::string& reason,
                                              const base::Ed25519PrivateKey* signer) {
  OPCACHE_TRY(writable());
  return do_revoke(keys, reason, signer);
}

Result<bool> RemoteStore::unrevoke(const std::string& key) {
  OPCACHE_TRY(writable());
  return do_unrevoke(key);
}

Status RemoteStore::store_exec_manifest(const store::ExecManifest& manifest) {
  OPCACHE_TRY(writable());
  return do_store_exec_manifest(manifest);
}

const RemoteScheme* find_remote_scheme(std::string_view url) noexcept {
  for (const auto& scheme : k_schemes) {
    if (url.size() > scheme.prefix.size() && url.substr(0, scheme.prefix.size()) == scheme.prefix) {
      return &scheme;
    }
  }
  return nullptr;
}

std::string remote_scheme_names() {
  std::string names;
  const std::size_t count = std::size(k_schemes);
  for (std::size_t i = 0; i < count; ++i) {
    names += (i == 0 ? "" : i + 1 == count ? " or " : ", ") + std::string(k_schemes[i].prefix);
  }
  return names;
}

Result<std::unique_ptr<RemoteStore>> open_remote(const RemoteOptions& options, const base::EnvLookup& env) {
  const RemoteScheme* scheme = find_remote_scheme(options.url);
  if (scheme == nullptr) {
    return Error::usage("remote \"" + display_url(options.url) + "\": unknown scheme (use " + remote_scheme_names() +
                        ")");
  }
  switch (scheme->kind) {  // no default: -Wswitch names a new kind here
    case RemoteKind::server:
      return make_http_remote(options);
    case RemoteKind::s3:
      return make_s3_remote(options, env);
    case RemoteKind::file:
      return make_file_remote(options);
  }
  return Error::usage("remote \"" + display_url(options.url) + "\": unknown kind");  // not reached
}

}  // namespace opcache::remote
