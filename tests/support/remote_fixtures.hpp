// Shared pieces of the client-remote tests (tests/remote/test_remotes_*.cpp,
// test_push_pull.cpp): kernels with their bundles, stores opened with
// remotes, a warning collector, polling, and a look inside a cache directory.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "opcache/opcache.hpp"
#include "tests/support/files.hpp"  // directory_contents
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"

namespace opcache::test {

/// A kernel (real compiled triple, or cheap text members) and the bundle
/// write_bundle makes of it in the test scenario.
struct TestKernel {
  std::string key;
  std::string descriptor_json;
  std::vector<std::filesystem::path> files;
  std::string bundle;  ///< the bundle bytes (what a server would hold)

  /// Member name → bytes, as get() must write them.
  std::map<std::string, std::string> contents() const;
};

/// Compiles (op, length) with the system compiler and bundles it.
TestKernel make_test_kernel(const std::filesystem::path& dir, const std::string& op, int length);

/// A kernel whose members are small generated files (no compiler): for
/// batches of many entries. Different `index`es give different keys. Its
/// manifest records `build_ms` (the bytes differ, the key does not).
TestKernel make_cheap_kernel(const std::filesystem::path& dir, int index, std::int64_t build_ms = 0);

/// A kernel whose object file is `bytes` pseudo-random (incompressible)
/// bytes, for bundles of a given size. Different `index`es give different keys.
TestKernel make_large_kernel(const std::filesystem::path& dir, int index, std::size_t bytes);

/// Writes `kernel.bundle` to `dir/<key>.bundle` and returns the path.
std::filesystem::path write_bundle_file(const std::filesystem::path& dir, const TestKernel& kernel);

/// The test scenario (k_test_scenario).
Scenario test_scenario();

/// Collects warnings from Store::open(…).on_warning; thread-safe.
class WarningLog {
 public:
  std::function<void(const std::string&)> sink();
  std::vector<std::string> all() const;
  /// Whether some warning contains `text`.
  bool contains(const std::string& text) const;
  std::string joined() const;

 private:
  struct State {
    std::mutex mutex;
    std::vector<std::string> messages;
  };
  std::shared_ptr<State> m_state = std::make_shared<State>();
};

/// Opens the store at `dir` with exactly `remotes` (never the environment's).
Store open_remote_store(const std::filesystem::path& dir, const std::vector<std::string>& remotes,
                        WarningLog* warnings = nullptr, const std::filesystem::path& token_file = {});

/// Puts `kernel` into `store` in the test scenario; returns the key.
std::string put_kernel(Store& store, const TestKernel& kernel);

/// What `store.contains(key)` says; REQUIREs that the lookup succeeds.
bool holds(Store& store, const std::string& key);

/// `store.get_or_build` of `kernel` in the test scenario into `out`, with a
/// build that writes one file (kernel.o, "built here"); REQUIREs success and
/// returns where the result came from.
BuildSource get_or_build_one_file(Store& store, const TestKernel& kernel, const std::filesystem::path& out);


/// Puts `kernel` into `writer` and pushes it to `writer`'s remote, gets it
/// from the same remote through `reader` into `out`, then revokes it through
/// `writer` with `reason`; REQUIREs every step, and that the remote held the
/// entry it revoked.
void publish_then_revoke(Store& writer, Store& reader, const TestKernel& kernel, const std::filesystem::path& out,
                         const std::string& reason);

/// With `kernel` revoked on `writer`'s remote: a push of it is refused and
/// leaves `on_remote()` false; after unrevoke, a push puts it there.
void check_refused_until_unrevoked(Store& writer, const TestKernel& kernel, const std::function<bool()>& on_remote);

/// Regular files anywhere under `dir` (0 when it does not exist).
std::size_t count_files(const std::filesystem::path& dir);

/// The circuit-breaker state files of a cache directory (one per open breaker).
std::size_t breaker_files(const std::filesystem::path& cache);

/// A counter of `store` (0 when never set).
std::int64_t counter(Store& store, const std::string& name);

/// Environment for CLI runs: no OPCACHE_* settings or remotes from outside.
ProcessOptions hermetic_cli();

/// Polls `condition` every 20 ms until it holds or `timeout` passes.
template <class Condition>
bool eventually(Condition condition, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

/// Seconds since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace opcache::test
