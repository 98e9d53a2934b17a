// s3:// URLs: which endpoint, bucket, prefix and region a client talks to,
// and the SigV4 URI encoding of object names.
#pragma once

#include <string>
#include <string_view>

#include "opcache/result.hpp"

namespace opcache::remote {

/// The longest object key S3 accepts, in bytes (a prefix may use half of it).
inline constexpr std::size_t k_max_s3_key_bytes = 1024;

/// Where objects live: an endpoint, a bucket and a key prefix inside it.
struct S3Location {
  std::string endpoint;  ///< "scheme://host[:port]", no trailing slash
  std::string bucket;    ///< a valid S3 bucket name
  std::string prefix;    ///< key prefix without leading or trailing '/'; may be empty
  std::string region = "us-east-1";
  bool path_style = true;  ///< "<endpoint>/<bucket>/<key>"; false: "<scheme>://<bucket>.<host>/<key>"
};

/// Parses "s3://bucket[/some/prefix][?endpoint=URL&region=NAME&path_style=true|false]".
/// Percent-escapes in the prefix and in parameter values are decoded. Defaults:
/// region "us-east-1"; endpoint "https://s3.<region>.amazonaws.com"; path_style
/// true when an endpoint is given (MinIO, Ceph, moto), false (virtual-hosted
/// style) for the AWS default endpoint unless the bucket name contains a dot.
/// Returns a `usage` error naming the bad part (scheme, bucket, prefix segment,
/// parameter) and why. Pure function; thread-safe.
Result<S3Location> parse_s3_url(std::string_view url);

/// URI-encodes `text` per SigV4: A-Z a-z 0-9 - _ . ~ stay, '/' stays when
/// `keep_slash`, every other byte becomes %XX (uppercase hex).
std::string s3_uri_encode(std::string_view text, bool keep_slash);

/// The default region, "us-east-1".
inline constexpr const char* k_s3_default_region = "us-east-1";

}  // namespace opcache::remote
