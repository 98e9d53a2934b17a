// Remote lookups against a misbehaving server (tests/support/fault_server):
// refused connections, hangs past the timeout, 500s, bodies cut short, valid
// bundles of another key, garbage. Each ends in a miss (or a clear error),
// never in a bad bundle in the local store; the circuit breaker makes a dead
// remote cost one timeout for a whole batch, also across `opcache` processes.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/file_io.hpp"
#include "base/sha256.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/gate.hpp"
#include "tests/support/process.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::test;
using opcache::Store;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// A key nobody has: the lookups of a batch.
std::string fake_key(int i) {
  return opcache::base::sha256_hex("no such kernel " + std::to_string(i));
}

// Ends every cool-down recorded under `cache`, for every process: rewrites
// each breaker file's open_until_ms into the past (the file format of
// remote/circuit_breaker.cpp), instead of waiting for the cool-down.
void expire_breakers(const fs::path& cache) {
  for (const auto& entry : fs::directory_iterator(cache / "remotes")) {
    if (entry.path().extension() != ".breaker") {
      continue;
    }
    auto text = opcache::base::read_file(entry.path());
    REQUIRE(text.ok());
    auto state = nlohmann::json::parse(*text);
    state["open_until_ms"] = 0;
    REQUIRE(opcache::base::write_file_atomic(entry.path(), state.dump()).ok());
  }
}

// Nothing of a failed download may remain: no entry, no object, no temp file.
void check_nothing_stored(Store& store, const fs::path& cache, const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    auto present = store.contains(key);
    REQUIRE(present.ok());
    CHECK_FALSE(*present);
  }
  auto entries = store.list();
  REQUIRE(entries.ok());
  CHECK(entries->empty());
  CHECK(count_files(cache / "objects") == 0);
  CHECK(count_files(cache / "tmp") == 0);
}

// A miss, not an error.
void check_miss(Store& store, const std::string& key, const fs::path& out) {
  auto got = store.get(key, out);
  REQUIRE_MESSAGE(got.ok(), (got.ok() ? "" : got.error().message()));
  CHECK_FALSE(got->has_value());
}

}  // namespace

TEST_CASE("remote::faults: a refused connection is a miss with a warning, opens the breaker, stores nothing") {
  TempDir temp;
  const std::string url = "http://127.0.0.1:" + std::to_string(refused_port());
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {url + "|connect-timeout=1000"}, &warnings);
  const auto start = Clock::now();
  check_miss(store, fake_key(1), temp / "out");
  CHECK(seconds_since(start) < 5.0);  // two retries with short backoff, no long wait
  CHECK_MESSAGE(warnings.contains("remote " + url + " failed, skipping it for 60 s"), warnings.joined());
  CHECK(counter(store, "remote_errors") == 1);
  CHECK(breaker_files(temp / "cache") == 1);
  check_nothing_stored(store, temp / "cache", {fake_key(1)});
  CHECK_FALSE(fs::exists(temp / "out" / "anything"));
}

TEST_CASE("remote::faults: a remote that hangs costs one timeout for a batch of 50 lookups") {
  FaultServer server([](const FaultRequest&) { return FaultReply::hang(); });
  TempDir temp;
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {server.url() + "|timeout=1000|retries=2"}, &warnings);
  const auto start = Clock::now();
  for (int i = 0; i < 50; ++i) {
    check_miss(store, fake_key(i), temp / "out");
  }
  const double elapsed = seconds_since(start);
  CHECK(elapsed >= 0.9);             // the first lookup did wait for its timeout
  CHECK(server.connections() == 1);  // a timeout is not retried, and the breaker skipped the other 49
  // Only a hang or 50 timeouts in a row (50 s) reach this; the batch costs one (1 s).
  CHECK_MESSAGE(elapsed < 25.0, "50 lookups took " << elapsed << " s");
  CHECK(warnings.all().size() == 1);
  CHECK_MESSAGE(warnings.contains("Timeout was reached"), warnings.joined());
  CHECK(counter(store, "remote_errors") == 1);
  check_nothing_stored(store, temp / "cache", {fake_key(0)});
}

TEST_CASE("remote::faults: 500s are retried, then a miss: the open breaker spares the next lookups") {
  FaultServer server(
      [](const FaultRequest&) { return FaultReply::status(500, R"({"error":"internal","message":"disk on fire"})"); });
  TempDir temp;
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {server.url() + "|retries=2"}, &warnings);
  check_miss(store, fake_key(1), temp / "out");
  CHECK(server.count("GET") == 3);  // one attempt and two retries
  CHECK_MESSAGE(warnings.contains("HTTP 500"), warnings.joined());
  check_miss(store, fake_key(2), temp / "out");
  check_miss(store, fake_key(3), temp / "out");
  CHECK(server.count("GET") == 3);
  CHECK(counter(store, "remote_errors") == 1);
  check_nothing_stored(store, temp / "cache", {fake_key(1)});
}

TEST_CASE("remote::faults: a body cut short is a miss and leaves nothing in the store") {
  TempDir temp;
  const TestKernel kernel = make_test_kernel(temp / "src", "relu", 64);
  REQUIRE(kernel.bundle.size() > 200);

  SUBCASE("announced by Content-Length") {
    FaultServer server(
        [&](const FaultRequest&) { return FaultReply::cut_short(kernel.bundle, kernel.bundle.size() / 2); });
    WarningLog warnings;
    Store store = open_remote_store(temp / "cache", {server.url() + "|retries=1"}, &warnings);
    check_miss(store, kernel.key, temp / "out");
    CHECK(server.count("GET") == 2);
    CHECK(counter(store, "remote_errors") == 1);
    check_nothing_stored(store, temp / "cache", {kernel.key});
    CHECK(count_files(temp / "out") == 0);
  }
  SUBCASE("delimited by the connection's end") {
    FaultServer server([&](const FaultRequest&) {
      FaultReply reply;
      reply.raw = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + kernel.bundle.substr(0, kernel.bundle.size() / 2);
      return reply;
    });
    WarningLog warnings;
    Store store = open_remote_store(temp / "cache", {server.url()}, &warnings);
    check_miss(store, kernel.key, temp / "out");
    CHECK_MESSAGE(warnings.contains("failed verification; not stored"), warnings.joined());
    CHECK(counter(store, "remote_corrupt") == 1);
    check_nothing_stored(store, temp / "cache", {kernel.key});
    CHECK(count_files(temp / "out") == 0);
  }
}

TEST_CASE("remote::faults: a valid bundle of another key is a miss, counted, and neither key is stored") {
  TempDir temp;
  const TestKernel other = make_test_kernel(temp / "src", "neg", 32);
  const TestKernel wanted = make_test_kernel(temp / "src", "neg", 48);
  FaultServer server([&](const FaultRequest&) { return FaultReply::ok(other.bundle); });
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {server.url()}, &warnings);
  check_miss(store, wanted.key, temp / "out");
  CHECK_MESSAGE(warnings.contains("answered " + wanted.key + " with a bundle that failed verification"),
                warnings.joined());
  CHECK(warnings.contains(other.key));
  CHECK(counter(store, "remote_corrupt") == 1);
  CHECK(counter(store, "remote_hits") == 0);
  check_nothing_stored(store, temp / "cache", {wanted.key, other.key});
  CHECK(count_files(temp / "out") == 0);
  // A wrong answer is not a transport failure: the remote stays in use.
  check_miss(store, wanted.key, temp / "out");
  CHECK(server.count("GET") == 2);
  CHECK(counter(store, "remote_corrupt") == 2);
}

TEST_CASE("remote::faults: garbage and a bundle with a flipped byte are misses, never stored") {
  TempDir temp;
  const TestKernel kernel = make_test_kernel(temp / "src", "square", 40);
  std::string flipped = kernel.bundle;
  flipped[flipped.size() - 10] = static_cast<char>(flipped[flipped.size() - 10] ^ 0x55);
  const std::vector<std::string> answers = {std::string(5000, 'z'), flipped, ""};
  for (const auto& answer : answers) {
    CAPTURE(answer.size());
    TempDir cache;
    FaultServer server([&](const FaultRequest&) { return FaultReply::ok(answer); });
    WarningLog warnings;
    Store store = open_remote_store(cache.path(), {server.url()}, &warnings);
    check_miss(store, kernel.key, temp / "out");
    CHECK(counter(store, "remote_corrupt") == 1);
    check_nothing_stored(store, cache.path(), {kernel.key});
  }
  CHECK(count_files(temp / "out") == 0);
}

TEST_CASE("remote::faults: a lookup falls through a dead remote to the next one, which serves the hit") {
  TempDir temp;
  const TestKernel kernel = make_test_kernel(temp / "src", "add", 24);
  FaultServer good([&](const FaultRequest& request) {
    return request.target == "/v1/entries/" + kernel.key ? FaultReply::ok(kernel.bundle) : FaultReply::status(404);
  });
  const std::string dead = "http://127.0.0.1:" + std::to_string(refused_port());
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {dead + "|retries=0", good.url()}, &warnings);
  auto got = store.get(kernel.key, temp / "out");
  REQUIRE_MESSAGE(got.ok(), got.error().message());
  REQUIRE(got->has_value());
  CHECK(directory_contents(temp / "out") == kernel.contents());
  CHECK(counter(store, "remote_hits") == 1);
  CHECK(counter(store, "remote_errors") == 1);
  CHECK(warnings.contains(dead));
}

TEST_CASE("remote::faults: after the cool-down the remote is tried again, and a success closes the breaker") {
  TempDir temp;
  const TestKernel kernel = make_test_kernel(temp / "src", "relu", 16);
  std::atomic<int> calls{0};
  FaultServer server(
      [&](const FaultRequest&) { return ++calls == 1 ? FaultReply::hang() : FaultReply::ok(kernel.bundle); });
  Store store = open_remote_store(temp / "cache", {server.url() + "|timeout=700|cooldown=2"});
  check_miss(store, kernel.key, temp / "out");  // timed out
  CHECK(breaker_files(temp / "cache") == 1);
  check_miss(store, kernel.key, temp / "out");  // skipped: the breaker is open
  CHECK(server.connections() == 1);
  expire_breakers(temp / "cache");  // the cool-down has passed, without waiting for it
  auto got = store.get(kernel.key, temp / "out");
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK(directory_contents(temp / "out") == kernel.contents());
  CHECK(server.connections() == 2);
  CHECK(breaker_files(temp / "cache") == 0);
}

TEST_CASE("remote::faults: separate opcache processes share the breaker through the cache dir") {
  FaultServer server([](const FaultRequest&) { return FaultReply::hang(); });
  TempDir temp;
  const int processes = 12;
  const fs::path cache = temp / "cache";
  int warned = 0;  // processes that waited for the remote and said so
  for (int i = 0; i < processes; ++i) {
    auto result = run_cli({"-C", cache.string(), "--remote", server.url() + "|timeout=1000", "get", fake_key(i),
                           "--out", (temp / "out").string()},
                          hermetic_cli());
    CHECK_MESSAGE(result.exit_code == 1, result.err);  // a miss, not an error
    warned += result.err.find("Timeout was reached") != std::string::npos ? 1 : 0;
  }
  // The first process waited for its timeout; the breaker file it left made
  // the other 11 skip the remote without a connection, let alone a wait.
  CHECK(server.connections() == 1);
  CHECK(warned == 1);
  CHECK(breaker_files(temp / "cache") == 1);
  CHECK(count_files(temp / "cache" / "objects") == 0);
  CHECK(count_files(temp / "cache" / "tmp") == 0);
}

TEST_CASE("remote::faults: uploads to a failing remote stay queued and never block the put") {
  TempDir temp;
  const TestKernel kernel = make_test_kernel(temp / "src", "neg", 20);
  Gate put_returned;
  std::atomic<bool> answered_before_the_put_returned{false};
  FaultServer server([&](const FaultRequest& request) {
    if (request.method != "PUT") {
      return FaultReply::status(404);
    }
    // Held until the put has returned (a minute at most: a put that waits
    // for its upload must not hang the test).
    answered_before_the_put_returned = answered_before_the_put_returned || !put_returned.wait(std::chrono::seconds(60));
    return FaultReply::status(503, R"({"error":"unavailable"})");
  });
  {
    Store store = open_remote_store(temp / "cache", {server.url() + "|upload|retries=1"});
    put_kernel(store, kernel);
    // The put has returned; only now may the server answer the upload.
    put_returned.open();
    CHECK(eventually([&] { return server.count("PUT") == 2; }, std::chrono::seconds(60)));
  }
  // No upload was answered before the put returned: had the put waited for
  // its upload, the server would have held that upload for a minute.
  CHECK_FALSE(answered_before_the_put_returned);
  // The marker is still in the outbox for a later process, and the breaker is open.
  std::size_t markers = 0;
  for (const auto& entry : fs::recursive_directory_iterator(temp / "cache" / "outbox")) {
    markers += entry.path().filename() == kernel.key ? 1 : 0;
  }
  CHECK(markers == 1);
  CHECK(breaker_files(temp / "cache") == 1);
  CHECK(server.count("PUT") == 2);
}

TEST_CASE("remote::faults: an opcache put exits after its last upload pass while its upload hangs, and the key stays queued") {
  FaultServer server([](const FaultRequest&) { return FaultReply::hang(); });
  TempDir temp;
  const TestKernel kernel = make_cheap_kernel(temp / "src", 7);
  write_text(temp / "desc.json", kernel.descriptor_json);
  // The upload's own timeout is an hour: only the bound on closing (2 s for
  // the last pass, then the upload cancelled: 5 s at most, UploaderBounds)
  // can end the process. How the cancel ends: tests/remote/test_remote_set.cpp.
  std::vector<std::string> args = {"-C",
                                   (temp / "cache").string(),
                                   "--remote",
                                   server.url() + "|upload|timeout=3600000",
                                   "put",
                                   "--desc",
                                   (temp / "desc.json").string(),
                                   "--scenario",
                                   k_test_scenario};
  for (const auto& file : kernel.files) {
    args.push_back(file.string());
  }
  const auto start = Clock::now();
  auto result = run_cli(args, hermetic_cli());
  const double elapsed = seconds_since(start);
  REQUIRE_MESSAGE(result.exit_code == 0, result.err);
  // The upload was sent, and hung (the server may read it after the process is gone).
  CHECK(eventually([&] { return server.count("PUT") == 1; }, std::chrono::seconds(60)));
  CHECK_MESSAGE(elapsed >= 2.0, "put took " << elapsed << " s: its last upload pass was not waited for");
  // A hang catcher, far below the upload's hour: the process did not wait for the upload.
  CHECK_MESSAGE(elapsed < 60.0, "put took " << elapsed << " s with a hanging upload");
  std::size_t markers = 0;
  for (const auto& entry : fs::recursive_directory_iterator(temp / "cache" / "outbox")) {
    markers += entry.path().filename() == kernel.key ? 1 : 0;
  }
  CHECK(markers == 1);  // still queued for the next process
}

TEST_CASE("remote::faults: a redirect is not followed, so the token never leaves for another host") {
  TempDir temp;
  FaultServer elsewhere([](const FaultRequest&) { return FaultReply::status(404); });
  FaultServer redirecting([&](const FaultRequest& request) {
    return FaultReply::status(302, "", "Location: " + elsewhere.url() + request.target + "\r\n");
  });
  write_text(temp / "token", "secret-token-value\n");
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {redirecting.url()}, &warnings, temp / "token");
  check_miss(store, fake_key(1), temp / "out");
  CHECK(redirecting.count("GET") == 1);
  REQUIRE(redirecting.requests().size() == 1);
  CHECK(redirecting.requests()[0].header("authorization") == "Bearer secret-token-value");
  CHECK(elsewhere.connections() == 0);
  CHECK_MESSAGE(warnings.contains("HTTP 302"), warnings.joined());
  CHECK_FALSE(warnings.contains("secret-token-value"));
}
