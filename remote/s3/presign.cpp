// SigV4 query-string signing, by the steps of the S3 API reference
// ("Authenticating Requests: Using Query Parameters"):
//   canonical request = GET \n <path> \n <sorted, encoded query without the
//     signature> \n host:<host> \n \n host \n UNSIGNED-PAYLOAD
//   string to sign    = AWS4-HMAC-SHA256 \n <date-time> \n <scope> \n
//     hex(SHA-256(canonical request))
//   signing key       = HMAC chain "AWS4"+secret → date → region → s3 → aws4_request
//   signature         = hex(HMAC(signing key, string to sign))
// The session token is part of the signed query, as AWS's SDKs send it.
#include "remote/s3/presign.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <utility>
#include <vector>

#include "base/sha256.hpp"
#include "base/utc_time.hpp"
#include "remote/s3/sigv4.hpp"

namespace opcache::remote {

namespace {

// The parts of an object URL that signing needs.
struct PresignTarget {
  std::string origin;  // "scheme://host[:port]"
  std::string host;    // "host[:port]", as the Host header will carry it
  std::string path;    // "/…", already encoded
};

Result<PresignTarget> split_object_url(std::string_view url) {
  const auto fail = [&](const char* why) {
    return Error::usage("cannot presign \"" + std::string(url.substr(0, url.find('?'))) + "\": " + why);
  };
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos ||
      (url.substr(0, scheme_end) != "http" && url.substr(0, scheme_end) != "https")) {
    return fail("not an http(s) URL");
  }
  const std::size_t host_start = scheme_end + 3;
  const std::size_t path_start = url.find('/', host_start);
  if (path_start == std::string_view::npos || path_start == host_start || path_start + 1 == url.size()) {
    return fail("no host or no object path");
  }
  if (url.find_first_of("?#@", host_start) != std::string_view::npos) {
    return fail("a query, fragment or user name has no place in an object URL");
  }
  PresignTarget target;
  target.origin = std::string(url.substr(0, path_start));
  target.host = std::string(url.substr(host_start, path_start - host_start));
  target.path = std::string(url.substr(path_start));
  return target;
}

}  // namespace

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &length);
  return std::string(reinterpret_cast<const char*>(out), length);
}

Result<std::string> presign_s3_get(const S3Location& location, const S3Credentials& credentials,
                                   std::string_view object_url, std::chrono::seconds expires,
                                   std::chrono::system_clock::time_point now) {
  if (expires.count() < 1 || expires > k_max_presign_expiry) {
    return Error::usage("a presigned URL must expire within 1 to " + std::to_string(k_max_presign_expiry.count()) +
                        " seconds, not " + std::to_string(expires.count()));
  }
  auto target = split_object_url(object_url);
  if (!target) {
    return target.error();
  }
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::string date_time = base::utc_text(now_ms, "%Y%m%dT%H%M%SZ");
  const std::string date = date_time.substr(0, 8);
  const std::string scope = date + "/" + location.region + "/s3/aws4_request";

  std::vector<std::pair<std::string, std::string>> query = {
      {"X-Amz-Algorithm", "AWS4-HMAC-SHA256"},
      {"X-Amz-Credential", credentials.access_key_id + "/" + scope},
      {"X-Amz-Date", date_time},
      {"X-Amz-Expires", std::to_string(expires.count())},
      {"X-Amz-SignedHeaders", "host"},
  };
  if (!credentials.session_token.empty()) {
    query.emplace_back("X-Amz-Security-Token", credentials.session_token);
  }
  const std::string canonical_query = sigv4_canonical_query(query);
  const std::string canonical_request = "GET\n" + target->path + "\n" + canonical_query + "\nhost:" + target->host +
                                        "\n\nhost\n" + std::string(k_unsigned_payload);
  const std::string string_to_sign =
      "AWS4-HMAC-SHA256\n" + date_time + "\n" + scope + "\n" + base::sha256_hex(canonical_request);

  std::string key = hmac_sha256("AWS4" + credentials.secret_access_key, date);
  key = hmac_sha256(key, location.region);
  key = hmac_sha256(key, "s3");
  key = hmac_sha256(key, "aws4_request");
  const std::string signature = hmac_sha256(key, string_to_sign);
  return target->origin + target->path + "?" + canonical_query +
         "&X-Amz-Signature=" + base::to_hex(reinterpret_cast<const std::uint8_t*>(signature.data()), signature.size());
}

}  // namespace opcache::remote
