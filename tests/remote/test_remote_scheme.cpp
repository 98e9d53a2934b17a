// remote/remote_store: the scheme table, the one place that says which URL
// prefixes name which kind of remote (and the public remote_has_server).
#include <doctest/doctest.h>

#include <string>

#include "opcache/opcache.hpp"
#include "remote/remote_store.hpp"

using opcache::remote::find_remote_scheme;
using opcache::remote::RemoteKind;

TEST_CASE("remote::find_remote_scheme maps each prefix to its kind and refuses a bare or unknown scheme") {
  REQUIRE(find_remote_scheme("http://cache:8080") != nullptr);
  CHECK(find_remote_scheme("http://cache:8080")->kind == RemoteKind::server);
  CHECK(find_remote_scheme("https://cache")->kind == RemoteKind::server);
  CHECK(find_remote_scheme("s3://bucket/prefix")->kind == RemoteKind::s3);
  CHECK(find_remote_scheme("file:///srv/cache")->kind == RemoteKind::file);
  CHECK(find_remote_scheme("http://") == nullptr);  // a scheme and nothing after it
  CHECK(find_remote_scheme("ftp://host") == nullptr);
  CHECK(find_remote_scheme("HTTP://host") == nullptr);
  CHECK(opcache::remote::remote_scheme_names() == "http://, https://, s3:// or file://");
}

TEST_CASE("remote::remote_has_server is true for http(s) specs with attributes, false for storage and junk") {
  CHECK(opcache::remote_has_server("http://cache:8080"));
  CHECK(opcache::remote_has_server("https://cache|upload|timeout=100"));
  CHECK_FALSE(opcache::remote_has_server("s3://bucket/p|upload"));
  CHECK_FALSE(opcache::remote_has_server("file:///tmp/x"));
  CHECK_FALSE(opcache::remote_has_server("cache:8080"));
  CHECK_FALSE(opcache::remote_has_server("|http://x"));
}
