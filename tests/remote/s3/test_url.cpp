// s3:// URLs (remote/s3/url.hpp): what parses, what is refused and how the
// message names the bad part, and the SigV4 URI encoding.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "remote/s3/url.hpp"

using opcache::ErrorCode;
using opcache::remote::parse_s3_url;
using opcache::remote::s3_uri_encode;

TEST_CASE("remote::parse_s3_url accepts bucket, prefix, endpoint, region and path style") {
  struct Good {
    std::string url, endpoint, bucket, prefix, region;
    bool path_style;
  };
  const std::vector<Good> table = {
      {"s3://my-bucket", "https://s3.us-east-1.amazonaws.com", "my-bucket", "", "us-east-1", false},
      {"s3://my-bucket/", "https://s3.us-east-1.amazonaws.com", "my-bucket", "", "us-east-1", false},
      {"s3://my-bucket/some/prefix/", "https://s3.us-east-1.amazonaws.com", "my-bucket", "some/prefix", "us-east-1",
       false},
      {"s3://my-bucket/p?region=eu-west-1", "https://s3.eu-west-1.amazonaws.com", "my-bucket", "p", "eu-west-1",
       false},
      {"s3://bucket/some/prefix?endpoint=http://127.0.0.1:9000&region=eu-west-1&path_style=true",
       "http://127.0.0.1:9000", "bucket", "some/prefix", "eu-west-1", true},
      {"s3://my.dotted.bucket/p", "https://s3.us-east-1.amazonaws.com", "my.dotted.bucket", "p", "us-east-1", true},
      {"s3://b12/a%20b?endpoint=https%3A%2F%2Fminio.example.com%2F&path_style=false", "https://minio.example.com",
       "b12", "a b", "us-east-1", false},
      {"s3://bucket/x?endpoint=http://[::1]:9000/", "http://[::1]:9000", "bucket", "x", "us-east-1", true},
      {"s3://bucket?path_style=0&endpoint=https://s3.example.org", "https://s3.example.org", "bucket", "",
       "us-east-1", false},
  };
  for (const auto& row : table) {
    CAPTURE(row.url);
    auto location = parse_s3_url(row.url);
    REQUIRE_MESSAGE(location.ok(), location.error().message());
    CHECK(location->endpoint == row.endpoint);
    CHECK(location->bucket == row.bucket);
    CHECK(location->prefix == row.prefix);
    CHECK(location->region == row.region);
    CHECK(location->path_style == row.path_style);
  }
}

TEST_CASE("remote::parse_s3_url rejects bad URLs with a message naming the bad part") {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"http://bucket/x", "must start with s3://"},
      {"S3://bucket/x", "must start with s3://"},
      {"s3:///prefix", "the bucket name is missing"},
      {"s3://My_Bucket/x", "bucket 'My_Bucket' is not a valid bucket name: contains 'M'"},
      {"s3://ab/x", "bucket 'ab' is not a valid bucket name: must be 3 to 63 characters long"},
      {"s3://-bucket/x", "must start and end with a letter or digit"},
      {"s3://a..b/x", "must not contain '..'"},
      {"s3://192.168.1.1/x", "must not look like an IP address"},
      {"s3://user:pw@bucket/x", "contains '@' or ':'"},
      {"s3://bucket/a//b", "the prefix 'a//b' has an empty, '.' or '..' segment"},
      {"s3://bucket/a/../b", "has an empty, '.' or '..' segment"},
      {"s3://bucket//a", "has an empty, '.' or '..' segment"},
      {"s3://bucket/a%zz", "the prefix 'a%zz' has a malformed %-escape"},
      {"s3://bucket/a%0Ab", "control characters"},
      {"s3://bucket/x#frag", "a fragment ('#') is not allowed"},
      {"s3://bucket?endpoint=ftp://host", "endpoint 'ftp://host' must start with http:// or https://"},
      {"s3://bucket?endpoint=http://u:p@host", "must not contain credentials"},
      {"s3://bucket?endpoint=http://host:99999", "has an invalid port ':99999'"},
      {"s3://bucket?endpoint=http://host:", "has an invalid port"},
      {"s3://bucket?endpoint=http://host:0", "has an invalid port ':0'"},
      {"s3://bucket?endpoint=http://host/path", "without a path, query or fragment"},
      {"s3://bucket?endpoint=http://", "has no valid host"},
      {"s3://bucket?region=EU_WEST", "region 'EU_WEST' is not a region name"},
      {"s3://bucket?path_style=maybe", "path_style 'maybe' must be true or false (or 1/0, on/off, yes/no)"},
      {"s3://bucket?colour=blue", "unknown parameter 'colour' (known: endpoint, region, path_style)"},
      {"s3://bucket?region=eu-west-1&region=us-east-2", "parameter 'region' is given twice"},
      {"s3://bucket?region=", "parameter 'region' has no value"},
      {"s3://bucket?region=%G1", "parameter 'region' has a malformed %-escape"},
      {"s3://bucket?endpoint=http://127.0.0.1:9000&path_style=false", "needs a DNS name as endpoint"},
  };
  for (const auto& [url, expected] : table) {
    CAPTURE(url);
    auto location = parse_s3_url(url);
    REQUIRE_FALSE(location.ok());
    CHECK(location.error().code() == ErrorCode::usage);
    CHECK_MESSAGE(location.error().message().find(expected) != std::string::npos, location.error().message());
    CHECK(location.error().message().find("S3 URL '" + url + "'") == 0);
  }
}

TEST_CASE("remote::s3_uri_encode keeps unreserved characters and optionally '/'") {
  CHECK(s3_uri_encode("a/b c+d&e~f_g.h-i", true) == "a/b%20c%2Bd%26e~f_g.h-i");
  CHECK(s3_uri_encode("a/b", false) == "a%2Fb");
  CHECK(s3_uri_encode("\xC3\xA9=*", true) == "%C3%A9%3D%2A");
}

