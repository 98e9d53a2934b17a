// The http:// remote following a server's 307 to the bucket
// (remote/bucket_download.cpp) against scripted peers: a fake opcache server
// that redirects a GET asking for it and serves one that does not, and a fake
// bucket that serves the bundle, refuses, drops the connection or sends other
// bytes. The token never reaches the bucket, and every failure of the bucket
// falls back to one GET from the server, silently.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/sha256.hpp"
#include "remote/bucket_download.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/files.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::test::FaultReply;
using opcache::test::FaultRequest;
using opcache::test::FaultServer;
using opcache::test::TempDir;
using opcache::test::TestKernel;
using opcache::test::WarningLog;
namespace fs = std::filesystem;

namespace bucket_download_test {

constexpr const char* k_token = "bucket-download-test-token";

std::string etag_of(const std::string& bundle) {
  return "\"" + opcache::base::sha256_hex(bundle) + "\"";
}

// A fake opcache server for `kernel`: a GET of its entry with
// X-Opcache-Redirect: 1 is 307 to `location` with its ETag; a GET without it
// is 200 with the bundle; the revocation list is empty; anything else is 404.
FaultServer redirecting_server(const TestKernel& kernel, const std::string& location) {
  return FaultServer([kernel, location](const FaultRequest& request) {
    const std::string entry = "/v1/entries/" + kernel.key;
    if (request.method == "GET" && request.target == entry && request.header("x-opcache-redirect") == "1") {
      return FaultReply::status(307, "{}", "Location: " + location + "\r\nETag: " + etag_of(kernel.bundle) + "\r\n");
    }
    if (request.method == "GET" && request.target == entry) {
      return FaultReply::status(
          200, kernel.bundle,
          "ETag: " + etag_of(kernel.bundle) + "\r\nContent-Type: application/vnd.opcache.bundle\r\n");
    }
    if (request.target.rfind("/v1/revocations", 0) == 0) {
      return FaultReply::ok(R"({"now":0,"revocations":[],"truncated":false})");
    }
    return FaultReply::status(404, R"({"error":"not_found","message":"no such thing"})");
  });
}

// The GETs `server` had of the entry of `key`, in order: "redirect" for one
// that asked to be sent to the bucket, "plain" for one that did not.
std::vector<std::string> entry_gets(const FaultServer& server, const std::string& key) {
  std::vector<std::string> gets;
  for (const auto& request : server.requests()) {
    if (request.method == "GET" && request.target == "/v1/entries/" + key) {
      gets.emplace_back(request.header("x-opcache-redirect").empty() ? "plain" : "redirect");
    }
  }
  return gets;
}

// Gets `kernel` through a store whose one remote is `server`; CHECKs that
// the files are the kernel's, and that nothing was said about the bucket.
void get_through(const fs::path& dir, const FaultServer& server, const TestKernel& kernel) {
  opcache::test::write_text(dir / "token", std::string(k_token) + "\n");
  WarningLog warnings;
  opcache::Store store = opcache::test::open_remote_store(dir / "cache", {server.url()}, &warnings, dir / "token");
  auto got = store.get(kernel.key, dir / "out");
  REQUIRE_MESSAGE(got.ok(), got.error().message());
  REQUIRE(got->has_value());
  CHECK(opcache::test::directory_contents(dir / "out") == kernel.contents());
  CHECK(opcache::test::counter(store, "remote_hits") == 1);
  CHECK_MESSAGE(warnings.all().empty(), warnings.joined());  // a failed redirect is the server's business
}

}  // namespace bucket_download_test

TEST_CASE("remote::http follows a 307 to the bucket with no token nor opcache header, and asks the server once") {
  TempDir temp;
  const TestKernel kernel = opcache::test::make_cheap_kernel(temp / "k", 1);
  FaultServer bucket([&](const FaultRequest&) { return FaultReply::ok(kernel.bundle); });
  const std::string location = bucket.url() + "/team/v1/bundles/" + kernel.key + "?X-Amz-Signature=abc";
  FaultServer server = bucket_download_test::redirecting_server(kernel, location);

  bucket_download_test::get_through(temp.path(), server, kernel);

  CHECK(bucket_download_test::entry_gets(server, kernel.key) == std::vector<std::string>{"redirect"});
  const auto asked = server.requests();
  REQUIRE_FALSE(asked.empty());
  CHECK(asked.back().header("authorization") == std::string("Bearer ") + bucket_download_test::k_token);
  const auto downloads = bucket.requests();
  REQUIRE(downloads.size() == 1);
  CHECK(downloads[0].method == "GET");
  CHECK(downloads[0].target == "/team/v1/bundles/" + kernel.key + "?X-Amz-Signature=abc");
  CHECK(downloads[0].header("authorization").empty());
  for (const auto& [name, value] : downloads[0].headers) {
    CHECK_MESSAGE(name.rfind("x-opcache", 0) != 0, name);
    CHECK(value.find(bucket_download_test::k_token) == std::string::npos);
  }
}

TEST_CASE(
    "remote::http falls back to the server's own GET when the bucket refuses, drops, is down or sends other bytes") {
  struct Failure {
    const char* name;
    std::function<FaultReply(const FaultRequest&)> bucket;
  };
  const std::vector<Failure> failures = {
      {"403 (an expired URL)",
       [](const FaultRequest&) {
         return FaultReply::status(403,
                                   "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>");
       }},
      {"404", [](const FaultRequest&) { return FaultReply::status(404, "<Error><Code>NoSuchKey</Code></Error>"); }},
      {"a dropped connection", [](const FaultRequest&) { return FaultReply::drop(); }},
      {"other bytes", [](const FaultRequest&) { return FaultReply::ok("not the bundle the server announced"); }},
  };
  for (const auto& failure : failures) {
    CAPTURE(failure.name);
    TempDir temp;
    const TestKernel kernel = opcache::test::make_cheap_kernel(temp / "k", 2);
    FaultServer bucket(failure.bucket);
    FaultServer server = bucket_download_test::redirecting_server(kernel, bucket.url() + "/b/" + kernel.key);
    bucket_download_test::get_through(temp.path(), server, kernel);
    CHECK(bucket.requests().size() == 1);
    CHECK(bucket_download_test::entry_gets(server, kernel.key) == std::vector<std::string>{"redirect", "plain"});
  }

  // A bucket nobody listens on: the connection is refused.
  TempDir temp;
  const TestKernel kernel = opcache::test::make_cheap_kernel(temp / "k", 3);
  FaultServer server = bucket_download_test::redirecting_server(
      kernel, "http://127.0.0.1:" + std::to_string(opcache::test::refused_port()) + "/b/" + kernel.key);
  bucket_download_test::get_through(temp.path(), server, kernel);
  CHECK(bucket_download_test::entry_gets(server, kernel.key) == std::vector<std::string>{"redirect", "plain"});
}

TEST_CASE("remote::etag_digest reads the digest of a strong ETag only") {
  const std::string digest = opcache::base::sha256_hex("x");
  CHECK(opcache::remote::etag_digest("\"" + digest + "\"") == digest);
  CHECK(opcache::remote::etag_digest("W/\"" + digest + "\"").empty());
  CHECK(opcache::remote::etag_digest(digest).empty());
  CHECK(opcache::remote::etag_digest("\"" + digest.substr(1) + "Z\"").empty());
  CHECK(opcache::remote::etag_digest("").empty());
}
