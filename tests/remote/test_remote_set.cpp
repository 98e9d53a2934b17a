// RemoteSet's background uploader as the set closes (remote/remote_set.cpp):
// the last pass over the queue, woken at once, and the bound on an upload
// that hangs. (A whole `opcache put` process with a hanging upload:
// tests/remote/test_remotes_faults.cpp.)
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "opcache/opcache.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::test;
using opcache::Store;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Markers for `key` in the upload queues under `cache`.
std::size_t queued(const fs::path& cache, const std::string& key) {
  std::size_t markers = 0;
  for (const auto& entry : fs::recursive_directory_iterator(cache / "outbox")) {
    markers += entry.path().filename() == key ? 1 : 0;
  }
  return markers;
}

}  // namespace

TEST_CASE("remote::RemoteSet closing uploads what was just queued before it returns, without waiting for a poll") {
  TempDir temp;
  const fs::path share = temp / "share";
  const TestKernel kernel = make_test_kernel(temp / "src", "square", 12);
  std::optional<Store> store(open_remote_store(temp / "cache", {"file://" + share.string() + "|upload"}));
  put_kernel(*store, kernel);
  const auto closing = Clock::now();
  store.reset();  // the uploader's last pass, then its thread is joined
  const double elapsed = seconds_between(closing, Clock::now());
  CHECK_MESSAGE(elapsed < 1.0, "closing took " << elapsed << " s");
  // Already there, with no waiting: the destructor returned after the upload.
  CHECK(fs::exists(share / "v1" / "bundles" / kernel.key.substr(0, 2) / kernel.key));
  CHECK(queued(temp / "cache", kernel.key) == 0);
}

TEST_CASE("remote::RemoteSet closing with an upload that hangs returns within its bound and keeps the key queued") {
  FaultServer server([](const FaultRequest&) { return FaultReply::hang(); });
  TempDir temp;
  const TestKernel kernel = make_cheap_kernel(temp / "src", 3);
  std::optional<Store> store(open_remote_store(temp / "cache", {server.url() + "|upload|timeout=20000"}));
  put_kernel(*store, kernel);
  REQUIRE(eventually([&] { return server.count("PUT") == 1; }));  // the upload is in flight
  const auto closing = Clock::now();
  store.reset();  // 2 s for the last pass, then the upload is cancelled (3 s more at most)
  const double elapsed = seconds_between(closing, Clock::now());
  CHECK_MESSAGE(elapsed >= 1.5, "closing took " << elapsed << " s: the last pass was not waited for");
  CHECK_MESSAGE(elapsed < 5.5, "closing took " << elapsed << " s with a hanging upload");
  CHECK(queued(temp / "cache", kernel.key) == 1);  // for the next process
}
