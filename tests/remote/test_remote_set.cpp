// RemoteSet's background uploader as the set closes (remote/remote_set.cpp):
// the last pass over the queue, woken at once, and the bound on an upload
// that hangs. Nothing here depends on the machine's speed: the sets are
// opened with bounds (UploaderBounds) far longer than the work takes, so
// that only a broken wake-up or cancellation reaches them, and close() says
// how it ended. (A whole `opcache put` process with a hanging upload and the
// product's own bounds: tests/remote/test_remotes_faults.cpp.)
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/environment.hpp"
#include "base/file_io.hpp"
#include "remote/remote_set.hpp"
#include "tests/support/exec_manifests.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

// A namespace of its own: the tests are compiled in unity batches.
namespace opcache::test::remote_set_closing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using remote::Closing;
using remote::UploaderBounds;

// Bounds no working uploader comes near: a pass that has to wait for them,
// or for the idle poll, is a broken wake-up.
constexpr UploaderBounds k_patient{60s, 60s, std::chrono::hours(1)};

// The set of the one remote `spec` over `local`.
std::unique_ptr<remote::RemoteSet> open_set(store::LocalStore& local, const std::string& spec,
                                            const UploaderBounds& bounds) {
  auto options = remote::parse_remote_spec(spec, "test");
  REQUIRE_MESSAGE(options.ok(), (options.ok() ? "" : options.error().message()));
  auto set = remote::RemoteSet::open({*options}, local, base::process_environment(), bounds);
  REQUIRE_MESSAGE(set.ok(), (set.ok() ? "" : set.error().message()));
  return std::move(set).value();
}

// Markers for `key` in the upload queues under `cache`.
std::size_t queued(const fs::path& cache, const std::string& key) {
  std::size_t markers = 0;
  for (const auto& entry : fs::recursive_directory_iterator(cache / "outbox")) {
    markers += entry.path().filename() == key ? 1 : 0;
  }
  return markers;
}

bool on_share(const fs::path& share, const std::string& key) {
  return fs::exists(share / "v1" / "bundles" / key.substr(0, 2) / key);
}

TEST_CASE("remote::RemoteSet closing uploads what was just queued before it returns") {
  TempDir temp;
  const fs::path share = temp / "share";
  ExecStore local(temp / "cache");
  const std::string key = store_exec_entry(*local, temp / "src", 1, "just queued").entry_key;
  auto set = open_set(*local, "file://" + share.string() + "|upload", k_patient);
  set->enqueue_upload(key);
  const auto closing = Clock::now();
  CHECK(set->close() == Closing::finished);  // the last pass ended: nothing was cancelled
  // Ended by the pass, not by its 60 s bound (a missed wake-up of the closer).
  CHECK(Clock::now() - closing < k_patient.last_pass);
  // Already there, with no waiting: close() returned after the upload.
  CHECK(on_share(share, key));
  CHECK(queued(temp / "cache", key) == 0);
  CHECK(set->close() == Closing::finished);  // once only
}

TEST_CASE("remote::RemoteSet closing wakes the sleeping uploader for a last pass instead of waiting for its poll") {
  TempDir temp;
  const fs::path share = temp / "share";
  ExecStore local(temp / "cache");
  const std::string first = store_exec_entry(*local, temp / "src", 1, "first").entry_key;
  const std::string later = store_exec_entry(*local, temp / "src", 2, "later").entry_key;
  auto set = open_set(*local, "file://" + share.string() + "|upload", k_patient);
  set->enqueue_upload(first);
  // Once `first` is on the share, the pass that uploaded it has listed the
  // queue: what is queued from now on waits for the next pass, which only
  // the hour-long poll or closing starts.
  REQUIRE(eventually([&] { return on_share(share, first); }, 60s));
  // `later` queued as another process queues it: its marker, and no wake-up.
  auto entry = local->find(later);
  REQUIRE(entry.ok());
  REQUIRE(entry->has_value());
  const fs::path outbox = temp / "cache" / "outbox" / remote::remote_id(set->remotes()[0].store->name());
  REQUIRE(base::write_file_atomic(outbox / later, local->layout().object_path((*entry)->digest).string()).ok());
  CHECK(queued(temp / "cache", later) == 1);
  CHECK_FALSE(on_share(share, later));
  CHECK(set->close() == Closing::finished);
  CHECK(on_share(share, later));
  CHECK(queued(temp / "cache", later) == 0);
}

TEST_CASE("remote::RemoteSet closing with an upload that hangs cancels it at the bound and keeps the key queued") {
  FaultServer server([](const FaultRequest&) { return FaultReply::hang(); });
  TempDir temp;
  ExecStore local(temp / "cache");
  const std::string key = store_exec_entry(*local, temp / "src", 1, "hangs").entry_key;
  // The upload's own timeout (1 h) never ends it; the last pass is short, so
  // that the slow path is certain; the cancelled upload has a minute to end.
  const UploaderBounds bounds{200ms, 60s, std::chrono::hours(1)};
  auto set = open_set(*local, server.url() + "|upload|timeout=3600000", bounds);
  set->enqueue_upload(key);
  REQUIRE(eventually([&] { return server.count("PUT") == 1; }, 60s));  // the upload is in flight
  const auto closing = Clock::now();
  // Cancelled at the bound, and the upload honoured it: the thread was joined.
  CHECK(set->close() == Closing::cancelled);
  CHECK(Clock::now() - closing >= bounds.last_pass);  // the last pass was waited for
  CHECK(queued(temp / "cache", key) == 1);            // for the next process
  CHECK(breaker_files(temp / "cache") == 0);          // a cancel is not the remote's fault
  CHECK(server.count("PUT") == 1);                    // nothing started after the bound
}

TEST_CASE("remote::RemoteSet the product's bounds: closing never takes more than 5 s") {
  const UploaderBounds product;
  CHECK(product.last_pass == 2s);
  CHECK(product.last_pass + product.cancel <= 5s);
  CHECK(product.idle_poll > product.last_pass);
}

TEST_CASE("remote::RemoteSet without an uploading remote has nothing to close") {
  TempDir temp;
  ExecStore local(temp / "cache");
  auto set = open_set(*local, "file://" + (temp / "share").string(), k_patient);
  CHECK(set->close() == Closing::no_uploader);
}

}  // namespace opcache::test::remote_set_closing
