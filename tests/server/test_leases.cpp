// Build leases and waiting reads on a real `opcache serve` (docs/protocol.md
// "Build leases"): POST/PUT/DELETE /v1/leases, expiry and takeover, the
// implicit release by an upload, GET/HEAD ?wait= answered by an upload, by
// the end of the lease it waited behind, by the end of the wait and by a
// graceful stop; the counts in /v1/status and /metrics; and leases being
// per replica while waits see uploads through another replica.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/api_schema.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

using namespace opcache::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A server with a write token and a read token on `storage` (default: its own directory).
struct LeaseServer {
  TempDir dir;
  std::unique_ptr<ServerProcess> process;

  explicit LeaseServer(std::vector<std::string> extra = {}, const std::filesystem::path& storage = {}) {
    write_text(dir / "tokens", token_line(k_write_token, "builder", "read,write") +
                                   token_line(k_read_token, "reader", "read"));
    extra.insert(extra.begin(), {"--tokens", (dir / "tokens").string()});
    process = std::make_unique<ServerProcess>(storage.empty() ? dir / "storage" : storage, extra);
  }

  std::string url(const std::string& path) const { return process->base_url() + path; }

  HttpResponse request(const std::string& method, const std::string& path, const std::string& body = {},
                       const char* token = k_write_token, long timeout_ms = 15000) const {
    std::vector<std::string> headers = {std::string("Authorization: Bearer ") + token};
    if (!body.empty()) {
      headers.push_back("Content-Type: application/json");
    }
    HttpOptions options;
    options.timeout_ms = timeout_ms;
    return http_request(method, url(path), headers, body, options);
  }

  HttpResponse ask(const std::string& key, const std::string& holder) const {
    return request("POST", "/v1/leases/" + key, json{{"holder", holder}}.dump());
  }

  HttpResponse upload(const TestKernel& kernel) const {
    return http_request("PUT", url("/v1/entries/" + kernel.key),
                        {std::string("Authorization: Bearer ") + k_write_token}, kernel.bundle);
  }

  json status() const { return checked_json(request("GET", "/v1/status"), "status-response.schema.json")["leases"]; }
};

json body_of(const HttpResponse& response) {
  auto parsed = json::parse(response.body, nullptr, false);
  return parsed.is_discarded() ? json::object() : parsed;
}

// GET ?wait=SECONDS started on another thread; get() its response.
std::future<HttpResponse> wait_async(const LeaseServer& server, const std::string& key, int seconds,
                                     const std::string& method = "GET") {
  return std::async(std::launch::async, [&server, key, seconds, method] {
    return server.request(method, "/v1/entries/" + key + "?wait=" + std::to_string(seconds), {}, k_read_token,
                          (seconds + 10) * 1000L);
  });
}

// Polls /v1/status until `count` requests wait (a wait_async has arrived).
bool until_waiting(const LeaseServer& server, int count) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
    if (server.status()["waiting"] == count) {
      return true;
    }
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

TEST_CASE("server::leases grant one builder per key, refuse the others with the holder, renew, release, and end "
          "with the upload of the entry, after which the key is present") {
  TempDir temp;
  LeaseServer server;
  const auto kernel = make_cheap_kernel(temp / "k", 1);

  auto granted = server.ask(kernel.key, "host-a:100");
  REQUIRE_MESSAGE(granted.status == 201, granted.body);
  const auto lease = checked_json(granted, "lease-response.schema.json");
  CHECK(lease["holder"] == "host-a:100");
  CHECK(lease["ttl_seconds"] == 60);
  const std::string id = lease["lease"];
  CHECK(id.size() == 32);

  auto held = server.ask(kernel.key, "host-b:200");
  CHECK(held.status == 409);
  checked_json(held, "lease-held.schema.json");
  CHECK(body_of(held)["error"] == "lease_held");
  CHECK(body_of(held)["holder"] == "host-a:100");
  CHECK(body_of(held)["held_seconds"].get<double>() >= 0);
  CHECK(body_of(held)["expires_in_seconds"].get<double>() > 50);

  auto renewed = server.request("PUT", "/v1/leases/" + kernel.key + "/" + id);
  CHECK(renewed.status == 200);
  CHECK(checked_json(renewed, "lease-response.schema.json")["lease"] == id);
  auto wrong = server.request("PUT", "/v1/leases/" + kernel.key + "/" + std::string(32, '0'));
  CHECK(wrong.status == 404);
  CHECK(checked_json(wrong, "error.schema.json")["error"] == "lease_not_found");
  CHECK(server.ask(kernel.key, "x").status == 409);
  CHECK(server.request("POST", "/v1/leases/" + kernel.key, {}, k_read_token).status == 403);  // needs write

  // The upload ends the lease: its id no longer renews, and the key is present.
  REQUIRE(server.upload(kernel).status == 201);
  CHECK(server.request("PUT", "/v1/leases/" + kernel.key + "/" + id).status == 404);
  auto present = server.ask(kernel.key, "host-c:300");
  CHECK(present.status == 200);
  CHECK(checked_json(present, "lease-present.schema.json")["present"] == true);

  // Release by DELETE, then the next asker gets it.
  const auto other = make_cheap_kernel(temp / "o", 2);
  const std::string other_id = body_of(server.ask(other.key, "a"))["lease"];
  auto released = server.request("DELETE", "/v1/leases/" + other.key + "/" + other_id);
  CHECK(released.status == 200);
  checked_json(released, "lease-release-response.schema.json");
  CHECK(server.request("DELETE", "/v1/leases/" + other.key + "/" + other_id).status == 404);
  CHECK(server.ask(other.key, "b").status == 201);
  CHECK(server.request("POST", "/v1/leases/" + other.key, "{\"holder\": 7}").status == 400);

  auto counts = server.status();
  CHECK(counts["granted"] == 3);
  CHECK(counts["refused"] == 2);
  CHECK(counts["released"] == 2);
  CHECK(counts["active"] == 1);
  const auto metrics = opcache::test::without_replica_label(server.request("GET", "/metrics").body);
  CHECK(metrics.find("opcache_leases_total{outcome=\"granted\"} 3") != std::string::npos);
  CHECK(metrics.find("opcache_leases_total{outcome=\"refused\"} 2") != std::string::npos);
  CHECK(metrics.find("opcache_leases_active 1") != std::string::npos);
}

TEST_CASE("server::a lease that is not renewed expires after --lease-ttl and the next asker takes it over") {
  TempDir temp;
  LeaseServer server({"--lease-ttl", "1"});
  const auto kernel = make_cheap_kernel(temp / "k", 3);
  auto first = server.ask(kernel.key, "dies");
  REQUIRE(first.status == 201);
  CHECK(body_of(first)["ttl_seconds"] == 1);
  HttpResponse takeover;
  for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
    takeover = server.ask(kernel.key, "survivor");
    if (takeover.status != 409) {
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  REQUIRE_MESSAGE(takeover.status == 201, takeover.body);
  CHECK(body_of(takeover)["holder"] == "survivor");
  CHECK(server.request("PUT", "/v1/leases/" + kernel.key + "/" + body_of(first)["lease"].get<std::string>()).status ==
        404);
  CHECK(server.status()["expired"] == 1);
}

TEST_CASE("server::GET and HEAD ?wait= are answered by the upload of the entry, with its bytes") {
  TempDir temp;
  LeaseServer server;
  const auto kernel = make_cheap_kernel(temp / "k", 4);
  REQUIRE(server.ask(kernel.key, "builder").status == 201);
  const auto started = std::chrono::steady_clock::now();
  auto get = wait_async(server, kernel.key, 30);
  auto head = wait_async(server, kernel.key, 30, "HEAD");
  REQUIRE(until_waiting(server, 2));
  REQUIRE(server.upload(kernel).status == 201);
  auto got = get.get();
  auto headed = head.get();
  CHECK(got.status == 200);
  CHECK(got.body == kernel.bundle);
  CHECK(headed.status == 200);
  CHECK(headed.header("content-length") == std::to_string(kernel.bundle.size()));
  CHECK(std::chrono::steady_clock::now() - started < 30s);  // answered by the upload, not by the end of the wait
  CHECK(server.status()["waiting"] == 0);
}

TEST_CASE("server::?wait= ends with 404 when the wait is over, at once when the lease it waited behind is "
          "released, and with 503 when the server stops") {
  TempDir temp;
  LeaseServer server;
  const auto kernel = make_cheap_kernel(temp / "k", 5);
  auto timed_out = server.request("GET", "/v1/entries/" + kernel.key + "?wait=1", {}, k_read_token);
  CHECK(timed_out.status == 404);
  CHECK(server.request("GET", "/v1/entries/" + kernel.key + "?wait=soon", {}, k_read_token).status == 400);

  const std::string id = body_of(server.ask(kernel.key, "gives-up"))["lease"];
  const auto started = std::chrono::steady_clock::now();
  auto waiting = wait_async(server, kernel.key, 50);
  REQUIRE(until_waiting(server, 1));
  REQUIRE(server.request("DELETE", "/v1/leases/" + kernel.key + "/" + id).status == 200);
  auto ended = waiting.get();
  CHECK(ended.status == 404);
  CHECK(body_of(ended)["message"].get<std::string>().find("ask for the lease") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - started < 50s);

  auto stopped = wait_async(server, kernel.key, 50);
  REQUIRE(until_waiting(server, 1));
  server.process->signal(SIGTERM);
  CHECK(stopped.get().status == 503);
  CHECK(server.process->wait_exit(20s) == 0);
}

TEST_CASE("server::leases are per replica, and a wait on one replica sees an upload through another over the "
          "same storage") {
  TempDir temp;
  LeaseServer first;
  LeaseServer second({}, first.dir / "storage");
  const auto kernel = make_cheap_kernel(temp / "k", 6);
  CHECK(first.ask(kernel.key, "a").status == 201);
  CHECK(second.ask(kernel.key, "b").status == 201);  // docs/operations.md: route by key to share leases
  auto waiting = wait_async(second, kernel.key, 30);
  REQUIRE(until_waiting(second, 1));
  REQUIRE(first.upload(kernel).status == 201);
  auto got = waiting.get();
  CHECK(got.status == 200);
  CHECK(got.body == kernel.bundle);
}
