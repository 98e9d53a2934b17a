// `opcache serve --redirect-downloads` over moto (docs/protocol.md, GET
// /v1/entries/{key}; docs/operations.md "Downloads from the bucket"): the
// bucket's endpoint is a recording proxy (tests/support/http_proxy.hpp), so
// presigned URLs point at it and the test sees what clients send to the
// "bucket". A GET that asks is 307 to the bucket with the headers of a 200;
// every other answer is as without redirects; the opcache client follows
// the redirect without its token and falls back to the server when the
// bucket fails; the statistics count the kernel sent.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.hpp"
#include "server/usage_stats.hpp"
#include "tests/support/files.hpp"
#include "tests/support/http_proxy.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

using opcache::test::HttpProxy;
using opcache::test::MotoServer;
using opcache::test::ProxiedRequest;
using opcache::test::ProxyRule;
using opcache::test::ServerProcess;
using opcache::test::TempDir;
using opcache::test::TestKernel;
namespace fs = std::filesystem;

namespace redirect_downloads_test {

// `opcache serve --redirect-downloads --storage s3://<bucket>/team` whose
// endpoint is a recording proxy in front of moto (or a local storage when
// `bucket` is empty), with a reader, a writer and an admin token.
struct RedirectingServer {
  TempDir dir;
  std::unique_ptr<HttpProxy> proxy;
  std::unique_ptr<ServerProcess> process;

  explicit RedirectingServer(const std::string& bucket, std::vector<std::string> extra = {}) {
    opcache::test::write_text(dir / "tokens",
                              opcache::test::token_line(opcache::test::k_read_token, "reader", "read") +
                                  opcache::test::token_line(opcache::test::k_write_token, "writer", "write") +
                                  opcache::test::token_line(opcache::test::k_admin_token, "admin", "admin"));
    opcache::test::write_text(dir / "reader.token", std::string(opcache::test::k_read_token) + "\n");
    std::string storage = (dir / "storage").string();
    if (!bucket.empty()) {
      proxy = std::make_unique<HttpProxy>(MotoServer::shared().endpoint());
      storage = "s3://" + bucket + "/team?endpoint=" + proxy->url();
    }
    std::vector<std::string> args = {"--tokens", (dir / "tokens").string(), "--redirect-downloads"};
    args.insert(args.end(), extra.begin(), extra.end());
    process = std::make_unique<ServerProcess>(storage, args);
  }

  std::string entry_url(const std::string& key) const { return process->base_url() + "/v1/entries/" + key; }

  opcache::test::HttpResponse request(const std::string& method, const std::string& url,
                                      std::vector<std::string> headers = {}, const std::string& body = {},
                                      const char* token = opcache::test::k_read_token) const {
    headers.push_back(std::string("Authorization: Bearer ") + token);
    return opcache::test::http_request(method, url, headers, body);
  }

  void put(const TestKernel& kernel) const {
    auto stored = request("PUT", entry_url(kernel.key), {}, kernel.bundle, opcache::test::k_write_token);
    REQUIRE_MESSAGE(stored.status == 201, stored.body);
  }

  /// The requests the bucket's proxy had for the bundle object of `key` by a presigned URL.
  std::vector<ProxiedRequest> presigned_gets(const std::string& key) const {
    std::vector<ProxiedRequest> found;
    for (auto& request : proxy->requests()) {
      if (request.target.find("/v1/bundles/" + key + "?") != std::string::npos &&
          request.target.find("X-Amz-Signature=") != std::string::npos) {
        found.push_back(std::move(request));
      }
    }
    return found;
  }

  nlohmann::json status() const {
    return nlohmann::json::parse(request("GET", process->base_url() + "/v1/status").body);
  }
};

std::string etag_of(const std::string& bundle) {
  return "\"" + opcache::base::sha256_hex(bundle) + "\"";
}

// The header by which a client says it follows a 307 to the bucket.
const std::string k_follows = "X-Opcache-Redirect: 1";

}  // namespace redirect_downloads_test

TEST_CASE(
    "server::serve --redirect-downloads answers a GET that asks with 307 to the bucket, and every other request as "
    "before") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  opcache::test::use_moto_test_credentials();
  redirect_downloads_test::RedirectingServer server("opcache-redirect-protocol");
  TempDir temp;
  const TestKernel kernel = opcache::test::make_large_kernel(temp / "k", 1, 256 * 1024);
  server.put(kernel);
  const std::string etag = redirect_downloads_test::etag_of(kernel.bundle);

  auto redirected = server.request("GET", server.entry_url(kernel.key), {redirect_downloads_test::k_follows});
  REQUIRE_MESSAGE(redirected.status == 307, redirected.body);
  const std::string location = redirected.header("location");
  CHECK(location.rfind(server.proxy->url() + "/opcache-redirect-protocol/team/v1/bundles/" + kernel.key + "?", 0) == 0);
  CHECK(location.find("X-Amz-Expires=300") != std::string::npos);
  CHECK(redirected.header("etag") == etag);
  CHECK(redirected.header("cache-control") == "no-store");
  CHECK(redirected.body.size() < 1024);  // the bundle is not in it
  // Anyone holding the URL gets the bundle from the bucket, without a token.
  auto downloaded = opcache::test::http_request("GET", location);
  CHECK(downloaded.status == 200);
  CHECK(downloaded.body == kernel.bundle);
  const auto gets = server.presigned_gets(kernel.key);
  REQUIRE(gets.size() == 1);
  CHECK_FALSE(gets[0].has_header("authorization"));

  // HITS: the 307 counted the kernel as sent, its bytes as served.
  CHECK(server.status()["hits"] == 1);

  // A client that does not ask (curl, revision 8 and older) gets the bytes from the server.
  auto plain = server.request("GET", server.entry_url(kernel.key));
  CHECK(plain.status == 200);
  CHECK(plain.body == kernel.bundle);
  CHECK(plain.header("etag") == etag);
  CHECK(server.request("GET", server.entry_url(kernel.key), {"X-Opcache-Redirect: 0"}).status == 200);
  CHECK(server.request("GET", server.entry_url(kernel.key) + "?redirect=1").status == 200);
  // HEAD, If-None-Match, absent and revoked keys: as without redirects.
  auto head = server.request("HEAD", server.entry_url(kernel.key), {redirect_downloads_test::k_follows});
  CHECK(head.status == 200);
  CHECK(head.header("etag") == etag);
  CHECK(
      server
          .request("GET", server.entry_url(kernel.key), {redirect_downloads_test::k_follows, "If-None-Match: " + etag})
          .status == 304);
  const std::string absent = opcache::base::sha256_hex("absent");
  CHECK(server.request("GET", server.entry_url(absent), {redirect_downloads_test::k_follows}).status == 404);
  // A ?wait= that ends with the entry ends with the redirect.
  const TestKernel later = opcache::test::make_cheap_kernel(temp / "k", 2);
  long uploaded = 0;  // doctest's assertions belong to the test's own thread
  std::thread uploader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    uploaded =
        server.request("PUT", server.entry_url(later.key), {}, later.bundle, opcache::test::k_write_token).status;
  });
  auto waited = server.request("GET", server.entry_url(later.key) + "?wait=30", {redirect_downloads_test::k_follows});
  uploader.join();
  CHECK(uploaded == 201);
  CHECK(waited.status == 307);
  CHECK(waited.header("etag") == redirect_downloads_test::etag_of(later.bundle));
  auto revoked = server.request(
      "POST", server.process->base_url() + "/v1/revocations", {"Content-Type: application/json"},
      nlohmann::json{{"keys", {kernel.key}}, {"reason", "bad kernel"}}.dump(), opcache::test::k_admin_token);
  REQUIRE_MESSAGE(revoked.status == 200, revoked.body);
  CHECK(server.request("GET", server.entry_url(kernel.key), {redirect_downloads_test::k_follows}).status == 410);
  CHECK(server.presigned_gets(kernel.key).size() == 1);  // only the test's own download went to the bucket
}

TEST_CASE("server::serve --redirect-downloads: the opcache client gets the bundle from the bucket without its token") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  opcache::test::use_moto_test_credentials();
  redirect_downloads_test::RedirectingServer server("opcache-redirect-client");
  TempDir temp;
  const TestKernel kernel = opcache::test::make_test_kernel(temp / "src", "square", 64);
  server.put(kernel);
  server.proxy->clear_requests();

  opcache::test::WarningLog warnings;
  opcache::Store store = opcache::test::open_remote_store(temp / "cache", {server.process->base_url()}, &warnings,
                                                          server.dir / "reader.token");
  auto got = store.get(kernel.key, temp / "out");
  REQUIRE_MESSAGE(got.ok(), got.error().message());
  REQUIRE(got->has_value());
  CHECK(opcache::test::directory_contents(temp / "out") == kernel.contents());
  CHECK_MESSAGE(warnings.all().empty(), warnings.joined());

  const auto gets = server.presigned_gets(kernel.key);
  REQUIRE(gets.size() == 1);
  CHECK(gets[0].status == 200);
  // Nothing that reached the bucket's host carried the bearer token: the
  // client's download had no Authorization at all, the server's own
  // requests are signed with its S3 credentials.
  for (const ProxiedRequest& request : server.proxy->requests()) {
    CAPTURE(request.method + " " + request.target);
    CHECK(request.header("authorization").find("Bearer") == std::string::npos);
    for (const auto& [name, value] : request.headers) {
      CHECK(value.find(opcache::test::k_read_token) == std::string::npos);
    }
  }
  CHECK_FALSE(gets[0].has_header("authorization"));
  CHECK_FALSE(gets[0].has_header("x-opcache-op-type"));
}

TEST_CASE("server::serve --redirect-downloads: a redirect the bucket refuses or drops falls back to the server's GET") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  opcache::test::use_moto_test_credentials();
  redirect_downloads_test::RedirectingServer server("opcache-redirect-fallback");
  TempDir temp;
  const TestKernel first = opcache::test::make_cheap_kernel(temp / "k", 1);
  const TestKernel second = opcache::test::make_cheap_kernel(temp / "k", 2);
  server.put(first);
  server.put(second);
  opcache::Store store = opcache::test::open_remote_store(temp / "cache", {server.process->base_url()}, nullptr,
                                                          server.dir / "reader.token");

  // Presigned GETs are refused as an expired URL is (403), then dropped; the
  // server's own requests (signed in their Authorization header) go through.
  const std::vector<std::pair<const TestKernel*, int>> cases = {{&first, 403}, {&second, 0}};
  for (const auto& [kernel, status] : cases) {
    CAPTURE(status);
    server.proxy->set_rules({ProxyRule{"GET", "X-Amz-Signature=", "", status}});
    const fs::path out = temp / ("out-" + std::to_string(status));
    auto got = store.get(kernel->key, out);
    REQUIRE_MESSAGE(got.ok(), got.error().message());
    REQUIRE(got->has_value());
    CHECK(opcache::test::directory_contents(out) == kernel->contents());
    // One download; libcurl sends it again on a new connection when a
    // kept-alive one closes without an answer, so a drop may show twice.
    const auto gets = server.presigned_gets(kernel->key);
    REQUIRE_FALSE(gets.empty());
    CHECK(gets.size() <= 2);
    for (const ProxiedRequest& get : gets) {
      CHECK(get.status == status);
      CHECK(get.backend == ProxiedRequest::k_no_backend);
    }
  }
  CHECK(opcache::test::counter(store, "remote_hits") == 2);
  CHECK(opcache::test::counter(store, "remote_errors") == 0);
  // The server answered each kernel twice (the 307, then the bytes): one hit each.
  CHECK(server.status()["hits"] == 2);
}

TEST_CASE("server::serve --redirect-downloads over local storage serves the bytes, as without it") {
  redirect_downloads_test::RedirectingServer server("");
  TempDir temp;
  const TestKernel kernel = opcache::test::make_cheap_kernel(temp / "k", 4);
  server.put(kernel);
  auto got = server.request("GET", server.entry_url(kernel.key), {redirect_downloads_test::k_follows});
  CHECK(got.status == 200);
  CHECK(got.body == kernel.bundle);
  CHECK(got.header("location").empty());
  CHECK(server.process->log_text().find("--redirect-downloads has no effect: the storage is local") !=
        std::string::npos);
}

TEST_CASE("server::UsageStats counts a GET answered 307 as the kernel sent, with the bundle's bytes and build time") {
  opcache::server::UsageStats stats([] { return std::int64_t{1'800'000'000'000}; });
  const auto facts = std::make_shared<const opcache::server::EntryFacts>(
      opcache::server::EntryFacts{"MatMul", R"({"phase":"train"})", 4200});
  const std::vector<opcache::server::FetchedKernel> frame = {
      opcache::server::FetchedKernel{std::string(64, 'a'), true, 1 << 20, facts}};
  opcache::server::UsageEvent event;
  event.route = opcache::server::RouteId::entry_read;
  event.method = "GET";
  event.status = 307;
  event.bytes_out = 180;  // the answer itself
  event.token_name = "reader";
  event.client = "10.0.0.7";
  event.key = frame[0].key;
  event.fetched = frame;
  stats.record(event);
  auto totals = stats.totals();
  CHECK(totals.hits == 1);
  CHECK(totals.misses == 0);
  CHECK(totals.bytes_served == 1 << 20);
  CHECK(totals.compile_ms_saved == 4200);
  // The fallback GET of the same client is the same episode: no second hit.
  event.status = 200;
  event.bytes_out = 1 << 20;
  event.fetched = {};
  stats.record(event);
  totals = stats.totals();
  CHECK(totals.hits == 1);
  CHECK(totals.compile_ms_saved == 4200);
}
