// Downloads from the bucket (API v1 revision 9, docs/protocol.md "GET
// /v1/entries/{key}"): a team server run with `--redirect-downloads` answers
// a client that asks for it with 307 to a presigned URL of the bundle's
// object, with the ETag and signatures of a 200. The http(s) remote
// (http_remote.cpp) follows it here: a GET of that URL with no credentials
// of its own — the bearer token never leaves for the bucket's host — whose
// bytes must have the ETag's digest, or the remote asks the server itself.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "opcache/result.hpp"

namespace opcache::remote {

class RequestEngine;    // remote/request_engine.hpp
struct EngineOptions;   // remote/request_engine.hpp
class ResponseHeaders;  // remote/curl_handle.hpp

/// The request header of GET /v1/entries/{key} by which a client says it
/// follows a 307 to the bucket ("X-Opcache-Redirect: 1"); a server never
/// redirects a client that did not send it, so curl scripts and older clients
/// keep getting 200 with the bytes.
inline constexpr std::string_view k_redirect_header = "X-Opcache-Redirect";

/// The options of the engine that downloads from the bucket: the server's
/// (`server`: timeouts, CA file) without retries, since a failed download
/// falls back to the server at once, which is the retry. Pure.
EngineOptions bucket_engine_options(EngineOptions server);

/// The digest an ETag names: the 64 lowercase hex digits between its
/// quotes; "" when `etag` is not such an ETag (a weak one, another form). Pure.
std::string etag_digest(std::string_view etag);

/// Follows the 307 whose response headers are `redirect`: GETs its Location
/// into `fd` (an empty regular file, written from its start) through
/// `engine`, sending no Authorization and no X-Opcache-* header, at most
/// `max_bytes`, and checks that the SHA-256 of the bytes received is the
/// digest of its ETag. Ok: `fd` holds exactly the bundle the server would
/// have sent (still to be verified like any download: LocalStore::adopt).
/// Otherwise an error saying why, whose message shows the URL without its
/// signature (redact_url): `remote` (or `timeout`) for a 307 without a
/// Location or an ETag, a transport failure or a status other than 200,
/// `corrupt` for other bytes, `io` for a failed write to `fd`. After any
/// error but `io`, `fd` is empty again (truncated, at offset 0), ready for
/// the server's own GET. Thread-safe like the engine.
Status follow_bucket_redirect(RequestEngine& engine, const ResponseHeaders& redirect, int fd, std::int64_t max_bytes);

}  // namespace opcache::remote
