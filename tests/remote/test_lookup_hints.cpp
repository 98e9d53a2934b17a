// The lookup hint headers on the wire (remote/lookup_headers through
// http_remote): get_or_build, Store::get with a descriptor, `opcache exec`,
// `opcache get --desc` and team single flight's lease requests and waits
// tell an opcache server the op type and scenario of what they look up; a
// lookup by key alone and an over-long op type do not. The server is a
// tests/support/fault_server recording each request's headers. (Python's
// get_or_build is the C ABI's.)
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/opcache.h"
#include "tests/support/fault_server.hpp"
#include "tests/support/process.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace opcache::test;
using opcache::BuildSource;
using opcache::Store;

namespace {

// base64url (no padding) of the canonical JSON of k_test_scenario:
// {"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC2"}
const std::string k_scenario_value =
    "eyJkZXZpY2VfbW9kZSI6InNpbmdsZSIsInBoYXNlIjoidHJhaW4iLCJzb2MiOiJBc2NlbmQ5MTBCMSIsInRvb2xjaGFpbiI6IjguMC5SQzIifQ";

// An opcache server that holds `kernel` once `serving` is set: GET of its
// entry answers the bundle, every other lookup 404.
FaultScript entry_server(const TestKernel& kernel, const std::atomic<bool>& serving) {
  return [&kernel, &serving](const FaultRequest& request) {
    if (request.method == "GET" && request.target == "/v1/entries/" + kernel.key && serving) {
      return FaultReply::ok(kernel.bundle);
    }
    return FaultReply::status(404, R"({"error":"not_found","message":"no entry"})");
  };
}

// The requests of `server` for `method` and a target starting with `prefix`.
std::vector<FaultRequest> requests_of(const FaultServer& server, const std::string& method, const std::string& prefix) {
  std::vector<FaultRequest> found;
  for (const auto& request : server.requests()) {
    if (request.method == method && request.target.rfind(prefix, 0) == 0) {
      found.push_back(request);
    }
  }
  return found;
}

// Each of `requests` (at least one) names `op_type` and the test scenario.
void check_hinted(const std::vector<FaultRequest>& requests, const std::string& op_type) {
  REQUIRE_FALSE(requests.empty());
  for (const auto& request : requests) {
    INFO(request.method << " " << request.target);
    CHECK(request.header("x-opcache-op-type") == op_type);
    CHECK(request.header("x-opcache-scenario") == k_scenario_value);
  }
}

// A cheap kernel and an entry_server for it, in a temp directory.
struct EntryServer {
  TempDir temp;
  TestKernel kernel;
  std::atomic<bool> serving;
  FaultServer server;

  EntryServer(int index, bool serve)
      : kernel(make_cheap_kernel(temp / "src", index)), serving(serve), server(entry_server(kernel, serving)) {}

  /// The lookups of the kernel's entry so far.
  std::vector<FaultRequest> lookups() const { return requests_of(server, "GET", "/v1/entries/" + kernel.key); }

  /// After a miss (two lookups: before and under the local lock) and then a
  /// remote hit: the hit's lookup named the kernel's op type and scenario.
  void check_hit_hinted() const {
    const auto all = lookups();
    REQUIRE(all.size() == 3);
    check_hinted({all.back()}, "add");
  }
};

}  // namespace

TEST_CASE("remote::lookup hints: get_or_build's lookups name the op type and scenario, on a miss and on a hit") {
  EntryServer fixture(1, false);
  auto& [temp, kernel, serving, server] = fixture;
  const std::string remote = server.url() + "|prefetch=0";
  {
    Store store = open_remote_store(temp / "miss", {remote});
    CHECK(get_or_build_one_file(store, kernel, temp / "out-miss") == BuildSource::built);
  }
  const auto misses = requests_of(server, "GET", "/v1/entries/" + kernel.key);
  CHECK(misses.size() == 2);  // before and under the local single-flight lock
  check_hinted(misses, "add");

  serving = true;
  Store store = open_remote_store(temp / "hit", {remote});
  CHECK(get_or_build_one_file(store, kernel, temp / "out-hit") == BuildSource::hit);
  fixture.check_hit_hinted();
}

TEST_CASE("remote::lookup hints: Store::get with a descriptor tells the server, a get by key alone does not") {
  EntryServer fixture(2, true);
  auto& [temp, kernel, serving, server] = fixture;
  Store by_key = open_remote_store(temp / "by-key", {server.url() + "|prefetch=0"});
  auto got = by_key.get(kernel.key, temp / "out-key");
  REQUIRE_MESSAGE(got.ok(), got.error().message());
  CHECK(got->has_value());
  REQUIRE(server.requests().size() == 1);
  CHECK(server.requests()[0].header("x-opcache-op-type").empty());
  CHECK(server.requests()[0].header("x-opcache-scenario").empty());

  Store by_descriptor = open_remote_store(temp / "by-desc", {server.url() + "|prefetch=0"});
  auto described = by_descriptor.get(kernel.descriptor_json, test_scenario(), temp / "out-desc");
  REQUIRE_MESSAGE(described.ok(), described.error().message());
  REQUIRE(described->has_value());
  CHECK((*described)->entry.key == kernel.key);
  CHECK(directory_contents(temp / "out-desc") == kernel.contents());
  REQUIRE(server.requests().size() == 2);
  check_hinted({server.requests()[1]}, "add");
}

TEST_CASE("remote::lookup hints: an op type over 128 bytes is not sent, the scenario still is") {
  TempDir temp;
  const std::string long_op(129, 'Q');
  TestKernel kernel;
  kernel.descriptor_json = nlohmann::json{{"op_type", long_op}, {"attrs", {{"n", 1}}}}.dump();
  std::atomic<bool> serving{false};
  FaultServer server(entry_server(kernel, serving));
  Store store = open_remote_store(temp / "cache", {server.url() + "|prefetch=0"});
  CHECK(get_or_build_one_file(store, kernel, temp / "out") == BuildSource::built);
  const auto lookups = requests_of(server, "GET", "/v1/entries/");
  REQUIRE(lookups.size() == 2);
  for (const auto& request : lookups) {
    CHECK(request.headers.count("x-opcache-op-type") == 0);
    CHECK(request.header("x-opcache-scenario") == k_scenario_value);
  }
}

TEST_CASE("remote::lookup hints: team single flight's lease request and wait name the op type and scenario") {
  TempDir temp;
  const TestKernel kernel = make_cheap_kernel(temp / "src", 3);
  std::atomic<bool> built_elsewhere{false};
  FaultServer server([&](const FaultRequest& request) {
    if (request.method == "POST" && request.target == "/v1/leases/" + kernel.key) {
      return FaultReply::status(409, R"({"holder":"other-host:1","expires_in_seconds":30})");
    }
    if (request.method == "HEAD" && request.target.rfind("/v1/entries/" + kernel.key + "?wait=", 0) == 0) {
      built_elsewhere = true;  // the holder uploaded while we waited
      return FaultReply::status(200);
    }
    if (request.method == "GET" && request.target == "/v1/entries/" + kernel.key && built_elsewhere) {
      return FaultReply::ok(kernel.bundle);
    }
    return FaultReply::status(404, R"({"error":"not_found","message":"no entry"})");
  });
  Store store = open_remote_store(temp / "cache", {server.url() + "|upload|prefetch=0"});
  CHECK(get_or_build_one_file(store, kernel, temp / "out") == BuildSource::hit);
  check_hinted(requests_of(server, "POST", "/v1/leases/" + kernel.key), "add");
  check_hinted(requests_of(server, "HEAD", "/v1/entries/" + kernel.key + "?wait="), "add");
  check_hinted(requests_of(server, "GET", "/v1/entries/" + kernel.key), "add");
}

TEST_CASE("remote::lookup hints: opcache exec and opcache get --desc tell the server what they look up") {
  EntryServer fixture(4, false);
  auto& [temp, kernel, serving, server] = fixture;
  write_text(temp / "desc.json", kernel.descriptor_json);
  const std::string remote = server.url() + "|prefetch=0";
  const fs::path out = temp / "out";
  auto exec = run_cli({"-C", (temp / "cache").string(), "--remote", remote, "exec", "--desc",
                       (temp / "desc.json").string(), "--scenario", k_test_scenario, "--out", out.string(), "--key-on", "descriptor", "--", "sh",
                       "-c", "mkdir -p '" + out.string() + "' && echo built > '" + out.string() + "/k.o'"},
                      hermetic_cli());
  REQUIRE_MESSAGE(exec.exit_code == 0, exec.err);
  const auto exec_lookups = requests_of(server, "GET", "/v1/entries/" + kernel.key);
  CHECK(exec_lookups.size() == 2);
  check_hinted(exec_lookups, "add");

  serving = true;
  auto got = run_cli({"-C", (temp / "fresh").string(), "--remote", remote, "get", "--desc",
                      (temp / "desc.json").string(), "--scenario", k_test_scenario, "--out", (temp / "got").string()},
                     hermetic_cli());
  REQUIRE_MESSAGE(got.exit_code == 0, got.err);
  CHECK(directory_contents(temp / "got") == kernel.contents());
  fixture.check_hit_hinted();
}

TEST_CASE("remote::lookup hints: the C ABI's opcache_get_or_build names the op type and scenario") {
  EntryServer fixture(5, false);
  auto& [temp, kernel, serving, server] = fixture;
  const std::string options =
      nlohmann::json{{"cache_dir", (temp / "cache").string()}, {"remotes", {server.url() + "|prefetch=0"}}}.dump();
  opcache_store* store = nullptr;
  REQUIRE(opcache_open_ex(options.c_str(), &store) == OPCACHE_OK);
  auto build = [](const char* work_dir, void*) {
    write_text(fs::path(work_dir) / "kernel.o", "built by C");
    return 0;
  };
  opcache_source source = OPCACHE_SOURCE_HIT;
  const auto status = opcache_get_or_build(store, kernel.descriptor_json.c_str(), k_test_scenario,
                                           (temp / "out").c_str(), build, nullptr, &source);
  opcache_close(store);
  REQUIRE(status == OPCACHE_OK);
  CHECK(source == OPCACHE_SOURCE_BUILT);
  const auto lookups = requests_of(server, "GET", "/v1/entries/" + kernel.key);
  CHECK(lookups.size() == 2);
  check_hinted(lookups, "add");
}
