#include "remote/remote_store.hpp"

namespace opcache::remote {

namespace {

constexpr RemoteScheme k_schemes[] = {
    {"http://", RemoteKind::server},
    {"https://", RemoteKind::server},
    {"s3://", RemoteKind::s3},
    {"file://", RemoteKind::file},
};

}  // namespace

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
