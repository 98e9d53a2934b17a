// SigV4 and libcurl 7.88 (Debian 12) — what libcurl does and what we add:
//  * CURLOPT_AWS_SIGV4 "aws:amz:<region>:s3" computes the Authorization header
//    over the method, the URL path exactly as given, the query string exactly
//    as given, host, x-amz-date and every header we pass in CURLOPT_HTTPHEADER.
//  * 7.88 neither encodes the path nor sorts the query: we send keys already
//    URI-encoded per SigV4 (s3_uri_encode) with CURLOPT_PATH_AS_IS (so "./"
//    in keys survives), and build query strings already sorted and encoded.
//  * 7.88 does not add x-amz-content-sha256 by itself and, for an upload from
//    a read callback, would sign the hash of an empty payload. When the request
//    carries an x-amz-content-sha256 header, libcurl signs that value as the
//    payload hash. So every request sends it: the SHA-256 of the empty string
//    for requests without a body, the real SHA-256 for small in-memory bodies,
//    and UNSIGNED-PAYLOAD for streamed file uploads (allowed by S3 for
//    single-part PUTs; the transport (TLS) protects the body).
//  * A header line "Name:" (which tells libcurl to drop a header) would be
//    signed but not sent, breaking the signature; we never pass one.
#include "remote/s3/sigv4.hpp"

#include <algorithm>

#include "remote/s3/url.hpp"
#include "base/try.hpp"

namespace opcache::remote {

std::string sigv4_canonical_query(std::vector<std::pair<std::string, std::string>> parameters) {
  std::sort(parameters.begin(), parameters.end());
  std::string out;
  for (const auto& [name, value] : parameters) {
    out += (out.empty() ? "" : "&") + s3_uri_encode(name, false) + "=" + s3_uri_encode(value, false);
  }
  return out;
}

Result<HeaderList> sigv4_headers(std::string_view payload_hash, const S3Credentials& credentials,
                                 const std::vector<std::string>& extra) {
  HeaderList headers;
  OPCACHE_TRY(append_header(headers, "x-amz-content-sha256: " + std::string(payload_hash)));
  if (!credentials.session_token.empty()) {
    OPCACHE_TRY(append_header(headers, "x-amz-security-token: " + credentials.session_token));
  }
  for (const auto& line : extra) {
    OPCACHE_TRY(append_header(headers, line));
  }
  return headers;
}

Status apply_sigv4(CURL* handle, const S3Credentials& credentials, const std::string& region) {
  curl_easy_setopt(handle, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(handle, CURLOPT_USERNAME, credentials.access_key_id.c_str());
  curl_easy_setopt(handle, CURLOPT_PASSWORD, credentials.secret_access_key.c_str());
  const std::string signing = "aws:amz:" + region + ":s3";  // libcurl copies string options
  if (curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, signing.c_str()) != CURLE_OK) {
    return Error::internal("this libcurl cannot sign requests with AWS SigV4 (CURLOPT_AWS_SIGV4 needs 7.75+)");
  }
  return {};
}

}  // namespace opcache::remote
