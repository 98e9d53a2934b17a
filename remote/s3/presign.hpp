// Presigned S3 URLs: a GET of one object that anyone holding the URL may
// send, without credentials, until it expires (AWS Signature Version 4,
// query-string authentication; "Authenticating Requests: Using Query
// Parameters" in the S3 API reference). The team server hands them to
// clients with `serve --redirect-downloads` (docs/protocol.md, GET
// /v1/entries/{key}), so that bundle bytes go from the bucket to the client
// without passing through the server.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "opcache/result.hpp"
#include "remote/s3/credentials.hpp"
#include "remote/s3/url.hpp"

namespace opcache::remote {

/// The longest validity S3 accepts for a presigned URL: 7 days.
inline constexpr std::chrono::seconds k_max_presign_expiry{7 * 24 * 3600};

/// The presigned URL of a GET of the object at `object_url` (as
/// S3Client::object_url makes it: "scheme://host[:port]/path", the path
/// already URI-encoded per SigV4, no query string), valid for `expires`
/// (1 s to k_max_presign_expiry) from `now`, signed for `location.region`
/// and service "s3" with `credentials`. The query carries X-Amz-Algorithm,
/// X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders=host,
/// X-Amz-Security-Token when the credentials have a session token, and
/// X-Amz-Signature; only the Host header is signed, so the URL works from
/// any client that reaches that host (the payload is UNSIGNED-PAYLOAD).
///
/// The URL is a bearer secret until it expires: log it only through
/// redact_url (remote/curl_handle.hpp), which hides its signature,
/// credential and token. A `usage` error for an `object_url` that is not
/// http(s) with a host and a path, or an expiry out of range. Pure; thread-safe.
Result<std::string> presign_s3_get(const S3Location& location, const S3Credentials& credentials,
                                   std::string_view object_url, std::chrono::seconds expires,
                                   std::chrono::system_clock::time_point now);

/// HMAC-SHA256 of `data` under `key` (OpenSSL), the 32 raw bytes: SigV4's
/// signing-key chain and signature. Pure; thread-safe.
std::string hmac_sha256(std::string_view key, std::string_view data);

}  // namespace opcache::remote
