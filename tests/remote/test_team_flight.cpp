// Team single flight when the server cannot coordinate (remote/team_flight):
// a server older than build leases, one that fails, and one that hangs. In
// every case get_or_build builds at once; only real failures open the
// breaker. The servers are tests/support/fault_server scripts; the working
// path with a real `opcache serve` is tests/e2e/test_team_single_flight.cpp.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/sha256.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace opcache::test;
using opcache::BuildSource;
using opcache::Store;

namespace {

const std::string k_not_found = R"({"error":"not_found","message":"no such endpoint"})";

// get_or_build_one_file, and `out` holds the file that build wrote.
BuildSource get_or_build_checked(Store& store, const TestKernel& kernel, const fs::path& out) {
  const BuildSource source = get_or_build_one_file(store, kernel, out);
  CHECK(read_text(out / "kernel.o") == "built here");
  return source;
}

}  // namespace

TEST_CASE("remote::team flight: a lease request whose 201 is lost is retried and gets the same lease back, not a "
          "409 naming the client itself") {
  TempDir temp;
  const std::string token = "lease-retry-token-6e0d";
  write_text(temp / "tokens", opcache::base::sha256_hex(token) + " team read,write\n");
  write_text(temp / "token", token);
  ServerProcess real(temp / "storage", {"--lease-ttl", "30", "--tokens", (temp / "tokens").string()});
  bool dropped = false;
  FaultServer proxy([&](const FaultRequest& request) {
    FaultReply answer = forward_to(request, real.base_url());
    if (request.method == "POST" && request.target.rfind("/v1/leases/", 0) == 0 && !dropped) {
      dropped = true;  // the server granted the lease; the client never hears of it
      return FaultReply::drop();
    }
    return answer;
  });
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {proxy.url() + "|upload|prefetch=0"}, &warnings, temp / "token");
  CHECK(get_or_build_checked(store, make_cheap_kernel(temp / "a", 1), temp / "out") == BuildSource::built);
  CHECK_MESSAGE(warnings.all().empty(), warnings.joined());
  // Two POSTs, one acquisition: the same request id both times.
  std::vector<std::string> ids;
  for (const auto& request : proxy.requests()) {
    if (request.method == "POST") {
      ids.push_back(nlohmann::json::parse(request.body).value("request", ""));
    }
  }
  REQUIRE(ids.size() == 2);
  CHECK(ids[0].size() == 32);
  CHECK(ids[0] == ids[1]);
  // The retry was granted: built once under the lease, no wait, no takeover.
  auto status = nlohmann::json::parse(
      http_request("GET", real.base_url() + "/v1/status", {"Authorization: Bearer " + token}).body);
  CHECK(status["leases"]["granted"] == 1);
  CHECK(status["leases"]["refused"] == 0);
  CHECK(status["leases"]["active"] == 0);  // the upload ended it
  CHECK(counter(store, "team_builds") == 1);
  CHECK(counter(store, "team_waits") == 0);
  CHECK(counter(store, "team_takeovers") == 0);
}

TEST_CASE("remote::team flight: a server without build leases is told once, keeps serving lookups, and every "
          "miss builds here") {
  FaultServer server([](const FaultRequest& request) {
    if (request.method == "PUT") {
      return FaultReply::status(201, R"({"stored":true})");
    }
    return FaultReply::status(404, k_not_found);  // GET of entries, and POST /v1/leases: no such endpoint
  });
  TempDir temp;
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {server.url() + "|upload|prefetch=0"}, &warnings);
  CHECK(get_or_build_checked(store, make_cheap_kernel(temp / "a", 1), temp / "out-a") == BuildSource::built);
  CHECK(get_or_build_checked(store, make_cheap_kernel(temp / "b", 2), temp / "out-b") == BuildSource::built);
  CHECK(server.count("POST") == 1);  // asked once, then known
  CHECK(server.count("GET") == 4);   // two lookups per key (before and under the local lock): no breaker
  CHECK(breaker_files(temp / "cache") == 0);
  CHECK_MESSAGE(warnings.contains("does not hand out build leases"), warnings.joined());
  CHECK(warnings.all().size() == 1);
  CHECK(counter(store, "team_builds") == 0);
}

TEST_CASE("remote::team flight: a lease request answered 500 builds here at once and opens the breaker") {
  FaultServer server([](const FaultRequest& request) {
    if (request.method == "POST") {
      return FaultReply::status(500, R"({"error":"internal","message":"disk on fire"})");
    }
    return FaultReply::status(404, R"({"error":"not_found","message":"no entry"})");
  });
  TempDir temp;
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {server.url() + "|upload|prefetch=0|retries=0"}, &warnings);
  CHECK(get_or_build_checked(store, make_cheap_kernel(temp / "a", 1), temp / "out") == BuildSource::built);
  CHECK_MESSAGE(warnings.contains("failed asking for the build lease"), warnings.joined());
  CHECK_MESSAGE(warnings.contains("HTTP 500"), warnings.joined());
  CHECK(breaker_files(temp / "cache") == 1);
}

TEST_CASE("remote::team flight: a server that hangs on the lease request costs one remote timeout, then builds "
          "here") {
  FaultServer server([](const FaultRequest& request) {
    if (request.method == "POST") {
      return FaultReply::hang();
    }
    return FaultReply::status(404, R"({"error":"not_found","message":"no entry"})");
  });
  TempDir temp;
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {server.url() + "|upload|prefetch=0|timeout=500"}, &warnings);
  const auto start = std::chrono::steady_clock::now();
  CHECK(get_or_build_checked(store, make_cheap_kernel(temp / "a", 1), temp / "out-a") == BuildSource::built);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(450));  // it did wait for the timeout
  CHECK_MESSAGE(warnings.contains("Timeout was reached"), warnings.joined());
  // The breaker is open: the next miss does not ask again.
  CHECK(get_or_build_checked(store, make_cheap_kernel(temp / "b", 2), temp / "out-b") == BuildSource::built);
  CHECK(server.count("POST") == 1);
}

TEST_CASE("remote::team flight: team_single_flight false, OPCACHE_TEAM_SINGLE_FLIGHT=0 and mode force never ask "
          "for a lease, and the default does") {
  FaultServer server([](const FaultRequest& request) {
    if (request.method == "POST") {
      return FaultReply::status(500, R"({"error":"internal","message":"no leases today"})");
    }
    return FaultReply::status(request.method == "PUT" ? 201 : 404, R"({"error":"not_found","message":"no entry"})");
  });
  TempDir temp;
  auto open = [&](const std::string& name, const std::optional<std::string>& team, const std::string& mode) {
    opcache::StoreConfig config;
    config.cache_dir = temp / name;
    config.remotes = {server.url() + "|upload|prefetch=0|retries=0"};
    config.team_single_flight = team;
    if (!mode.empty()) {
      config.mode = mode;
    }
    config.on_warning = [](const std::string&) {};
    auto store = Store::open(config);
    REQUIRE_MESSAGE(store.ok(), store.error().message());
    return std::move(store).value();
  };
  ::unsetenv("OPCACHE_TEAM_SINGLE_FLIGHT");
  {
    Store off = open("off", std::string("false"), "");
    get_or_build_checked(off, make_cheap_kernel(temp / "a", 1), temp / "out-a");
  }
  ::setenv("OPCACHE_TEAM_SINGLE_FLIGHT", "0", 1);
  {
    Store env_off = open("env-off", std::nullopt, "");
    get_or_build_checked(env_off, make_cheap_kernel(temp / "b", 2), temp / "out-b");
  }
  ::unsetenv("OPCACHE_TEAM_SINGLE_FLIGHT");
  {
    Store force = open("force", std::nullopt, "force");
    get_or_build_checked(force, make_cheap_kernel(temp / "c", 3), temp / "out-c");
  }
  CHECK(server.count("POST") == 0);
  {
    Store on = open("on", std::nullopt, "");
    get_or_build_checked(on, make_cheap_kernel(temp / "d", 4), temp / "out-d");
  }
  CHECK(server.count("POST") == 1);
}
