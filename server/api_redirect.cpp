// GET /v1/entries/{key} answered by a redirect to the bucket (`serve
// --redirect-downloads`, docs/protocol.md): the server finds the entry with
// a HEAD of its bundle object and a read of its signatures, and answers 307
// to a presigned URL of the object, so the bundle's bytes go from the
// bucket to the client and the server's work per download does not grow
// with the bundle. The client verifies what it downloads against the ETag
// and the signatures of this answer, as it verifies a 200.
#include <chrono>
#include <memory>

#include "server/api.hpp"

namespace opcache::server {

std::optional<ApiResponse> Api::redirect_entry(const std::string& key, std::string_view if_none_match) {
  auto located = m_storage.locate(key, std::chrono::seconds(m_config.redirect_expiry_s));
  if (!located) {
    return storage_failure(located.error());
  }
  if (!*located) {
    return absent_entry(key);
  }
  LocatedBundle& bundle = **located;
  if (bundle.url.empty()) {
    return std::nullopt;  // not to be handed out by URL: served as without redirects
  }
  ApiResponse response = entry_response(bundle.digest, bundle.signatures, if_none_match);
  if (response.status == 304) {
    return response;
  }
  response.status = 307;
  response.content_type = "application/json";
  response.body = nlohmann::json{{"key", key}, {"bytes", bundle.size}, {"digest", bundle.digest}}.dump() + "\n";
  response.headers.push_back({"Location", std::move(bundle.url)});
  // The URL expires: no cache may keep this answer.
  response.headers.push_back({"Cache-Control", "no-store"});
  // For the usage statistics: the kernel was given, its bytes by the bucket.
  response.fetched = std::make_shared<const std::vector<FetchedKernel>>(
      std::vector<FetchedKernel>{FetchedKernel{key, true, bundle.size, std::move(bundle.facts)}});
  m_metrics.record_lookups(1, 0);
  return response;
}

}  // namespace opcache::server
