// Signing S3 requests with AWS Signature Version 4 through libcurl's built-in
// signer (CURLOPT_AWS_SIGV4), and what we must add for libcurl 7.88 to sign
// correctly (see sigv4.cpp).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opcache/result.hpp"
#include "remote/curl_handle.hpp"
#include "remote/s3/credentials.hpp"

namespace opcache::remote {

/// The payload hash of a request without a body (SHA-256 of "").
inline constexpr std::string_view k_empty_payload_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// The payload hash of a streamed upload (allowed for single-part PUTs).
inline constexpr std::string_view k_unsigned_payload = "UNSIGNED-PAYLOAD";

/// A query string sorted by name with every name and value URI-encoded, the
/// form SigV4 signs (libcurl 7.88 signs the query exactly as given).
std::string sigv4_canonical_query(std::vector<std::pair<std::string, std::string>> parameters);

/// The headers of a signed request: x-amz-content-sha256 = `payload_hash`,
/// x-amz-security-token when the credentials have a session token, then
/// `extra` lines ("Name: value"). Errors from append_header (CR/LF in a line).
Result<HeaderList> sigv4_headers(std::string_view payload_hash, const S3Credentials& credentials,
                                 const std::vector<std::string>& extra);

/// Makes libcurl sign transfers on `handle` for `region` with `credentials`
/// (which must outlive the transfer), and send paths exactly as given (keys
/// arrive already encoded). `internal` error when libcurl cannot sign.
Status apply_sigv4(CURL* handle, const S3Credentials& credentials, const std::string& region);

}  // namespace opcache::remote
