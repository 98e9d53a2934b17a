#include "remote/remote_store.hpp"

namespace opcache::remote {

Result<std::unique_ptr<RemoteStore>> open_remote(const RemoteOptions& options, const base::EnvLookup& env) {
  const auto& url = options.url;
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) {
    return make_http_remote(options);
  }
  if (url.rfind("s3://", 0) == 0) {
    return make_s3_remote(options, env);
  }
  if (url.rfind("file://", 0) == 0) {
    return make_file_remote(options);
  }
  return Error::usage("remote \"" + display_url(url) + "\": unknown scheme (use http://, https://, s3:// or file://)");
}

}  // namespace opcache::remote
