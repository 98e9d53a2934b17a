// Prefetching a scenario (remote/prefetch.hpp): the first local miss of a
// scenario pulls that scenario's entries from the remote (a real `opcache
// serve` on loopback), once per interval, only when the remote has at most
// `prefetch` of them, and never another scenario's. A file:// share cannot
// list by scenario and is never prefetched from.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/lock_file.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::test;
using opcache::Scenario;
using opcache::Store;
namespace fs = std::filesystem;

namespace {

// `opcache serve --anonymous-read` over a storage directory holding
// `in_scenario` cheap kernels of the test scenario and two of another
// toolchain.
struct TeamCache {
  TempDir& temp;
  std::vector<TestKernel> kernels;
  std::unique_ptr<ServerProcess> server;

  TeamCache(TempDir& dir, int in_scenario) : temp(dir) {
    for (int i = 0; i < in_scenario; ++i) {
      add(i);
    }
    Store storage = open_remote_store(temp / "storage", {});
    Scenario other = test_scenario();
    other.toolchain = "7.0.0";
    for (int i = 100; i < 102; ++i) {
      const TestKernel kernel = make_cheap_kernel(temp / "src", i);
      REQUIRE(storage.put(kernel.descriptor_json, other, kernel.files).ok());
    }
    server = std::make_unique<ServerProcess>(temp / "storage", std::vector<std::string>{"--anonymous-read"});
  }

  /// Stores one more test-scenario kernel in the team cache.
  void add(int index) {
    Store storage = open_remote_store(temp / "storage", {});
    kernels.push_back(make_cheap_kernel(temp / "src", index));
    put_kernel(storage, kernels.back());
  }

  std::string url() const { return server->base_url(); }
};

// get_or_build of `kernel` in the test scenario that must not build.
void expect_hit(Store& store, const TestKernel& kernel, const fs::path& out) {
  auto got = store.get_or_build(kernel.descriptor_json, test_scenario(), out, [](const fs::path&) {
    FAIL("built although the remote has it");
    return opcache::Status{};
  });
  REQUIRE_MESSAGE(got.ok(), got.error().message());
}

std::int64_t local_entries(Store& store) { return store.stats()->totals.entries; }

}  // namespace

TEST_CASE("remote::prefetch: the first miss of a scenario pulls that scenario's entries, not another's") {
  TempDir temp;
  TeamCache team(temp, 5);
  const auto& kernels = team.kernels;

  Store consumer = open_remote_store(temp / "consumer", {team.url()});
  expect_hit(consumer, kernels[0], temp / "out0");
  CHECK(local_entries(consumer) == 5);  // the 5 of the scenario, not the 2 of the other toolchain
  CHECK(counter(consumer, "remote_prefetched") == 5);
  for (std::size_t i = 1; i < kernels.size(); ++i) {
    expect_hit(consumer, kernels[i], temp / ("out" + std::to_string(i)));
  }
  CHECK(counter(consumer, "remote_hits") == 1);  // the rest were local hits
  CHECK(counter(consumer, "hits") == 5);
}

TEST_CASE("remote::prefetch: prefetch=0 and a scenario larger than the limit fetch the one key only") {
  TempDir temp;
  TeamCache team(temp, 4);
  const auto& kernels = team.kernels;

  for (const std::string attribute : {"|prefetch=0", "|prefetch=3"}) {
    CAPTURE(attribute);
    Store consumer = open_remote_store(temp / ("consumer" + attribute.substr(10)), {team.url() + attribute});
    expect_hit(consumer, kernels[0], temp / "out");
    CHECK(local_entries(consumer) == 1);
    CHECK(counter(consumer, "remote_prefetched") == 0);
  }
}

TEST_CASE("remote::prefetch: while another process prefetches, a miss fetches its one key without waiting") {
  TempDir temp;
  TeamCache team(temp, 3);
  // A first cache's prefetch names the scenario's lock file (the same name in
  // every cache: it depends on the remote and the scenario only).
  {
    Store first = open_remote_store(temp / "first", {team.url()});
    expect_hit(first, team.kernels[0], temp / "out-first");
  }
  std::string lock_name;
  for (const auto& entry : fs::directory_iterator(temp / "first" / "remotes")) {
    if (entry.path().extension() == ".lock") {
      lock_name = entry.path().filename().string();
    }
  }
  REQUIRE_FALSE(lock_name.empty());

  // Another process holds that lock in a second cache: it is prefetching.
  // With a wait, the miss would block for 4 × timeout, then warn.
  fs::create_directories(temp / "second" / "remotes");
  auto held = opcache::base::LockFile::try_acquire(temp / "second" / "remotes" / lock_name);
  REQUIRE(held.ok());
  REQUIRE(held->has_value());
  WarningLog warnings;
  Store second = open_remote_store(temp / "second", {team.url() + "|timeout=250"}, &warnings);
  expect_hit(second, team.kernels[1], temp / "out-second");
  CHECK(local_entries(second) == 1);  // its one key, not the scenario
  CHECK(counter(second, "remote_prefetched") == 0);
  CHECK(counter(second, "remote_hits") == 1);
  CHECK_MESSAGE(warnings.all().empty(), warnings.joined());
}

TEST_CASE("remote::prefetch: a scenario is prefetched once per interval, later misses fetch one key") {
  TempDir temp;
  TeamCache team(temp, 2);
  {
    Store first = open_remote_store(temp / "consumer", {team.url()});
    expect_hit(first, team.kernels[0], temp / "out0");
    CHECK(local_entries(first) == 2);
  }
  // The team adds two kernels; a new process of the same cache misses one of
  // them: the scenario was prefetched moments ago, so only that key comes.
  team.add(10);
  team.add(11);
  Store second = open_remote_store(temp / "consumer", {team.url()});
  expect_hit(second, team.kernels[2], temp / "out2");
  CHECK(local_entries(second) == 3);
  CHECK(counter(second, "remote_prefetched") == 2);  // still the first prefetch's count
}

TEST_CASE("remote::prefetch: a file:// share cannot list by scenario: one key is fetched, without a warning") {
  TempDir temp;
  const std::string url = "file://" + (temp / "share").string();
  const TestKernel kernel = make_cheap_kernel(temp / "src", 1);
  {
    Store producer = open_remote_store(temp / "producer", {url + "|upload"});
    put_kernel(producer, kernel);
    REQUIRE(producer.push({}).ok());
  }
  WarningLog warnings;
  Store consumer = open_remote_store(temp / "consumer", {url}, &warnings);
  expect_hit(consumer, kernel, temp / "out");
  CHECK(counter(consumer, "remote_hits") == 1);
  CHECK_MESSAGE(warnings.all().empty(), warnings.joined());
}
