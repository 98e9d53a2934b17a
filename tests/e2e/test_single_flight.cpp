// End-to-end tests of single flight across processes: Store::get_or_build,
// the C ABI's opcache_get_or_build and `opcache exec`. Many processes ask for
// the same missing keys at once; a counter file that every build appends one
// line to proves that each key was built exactly once and every process got
// its bytes. Killed and failing builders and timeouts:
// test_single_flight_takeover.cpp.
//
// Multi-process library cases fork() before the parent creates any opcache
// object; children open their own Store and _exit() with a status that says
// whether everything they saw was right. Details go to files the parent reads.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/opcache.h"
#include "opcache/opcache.hpp"
#include "tests/support/children.hpp"
#include "tests/support/files.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/single_flight.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::BuildSource;
using opcache::ErrorCode;
using opcache::Store;
using opcache::StoreConfig;
using namespace opcache::test;

namespace {

constexpr int k_processes = 8;
constexpr int k_flight_keys = 50;

// What the 8 × 50 tests share: the cache, the counter every build appends
// "<key index> <pid>" to, the file whose creation starts the processes, the
// object builds copy; dir/results is created for the processes' reports.
struct Crowd {
  fs::path cache;
  fs::path counter;
  fs::path go;
  fs::path object;
};

Crowd make_crowd(const TempDir& dir) {
  fs::create_directories(dir / "results");
  return {dir / "cache", dir / "builds.log", dir / "go", compile_shared_object(dir)};
}

// Key indexes 0..keys-1 in an order of their own for `seed`, returned once
// `go` exists (empty when it does not appear within 30 s). Runs in forked
// children: it does not touch doctest.
std::vector<int> shuffled_keys_after_go(const fs::path& go, int keys, int seed) {
  std::vector<int> order(static_cast<std::size_t>(keys));
  for (int i = 0; i < keys; ++i) {
    order[static_cast<std::size_t>(i)] = i;
  }
  std::mt19937 random(static_cast<unsigned>(seed));
  std::shuffle(order.begin(), order.end(), random);
  return wait_for_file(go, std::chrono::seconds(30)) ? order : std::vector<int>{};
}

// Exactly one build per key: the counter has one line for each of 0..keys-1.
void check_one_build_per_key(const fs::path& counter, int keys) {
  auto builds = builds_per_name(counter);
  CHECK(builds.size() == static_cast<std::size_t>(keys));
  for (int i = 0; i < keys; ++i) {
    INFO("key ", i);
    CHECK(builds[std::to_string(i)] == 1);
  }
}

// Processes 1..processes-1 got for key `index` the same bytes as `reference`
// (what process 0 got) in out/<process>/<index>.
void check_same_outputs(const fs::path& out, int processes, int index, const Files& reference) {
  for (int p = 1; p < processes; ++p) {
    INFO("process ", p);
    CHECK(directory_contents(out / std::to_string(p) / std::to_string(index)) == reference);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// 8 processes × 50 keys

TEST_CASE("e2e::single flight builds each of 50 keys once across 8 processes (get_or_build)") {
  hermetic_environment();
  TempDir dir;
  const auto [cache, counter, go, object] = make_crowd(dir);
  std::vector<std::string> descriptors;
  for (int i = 0; i < k_flight_keys; ++i) {
    descriptors.push_back(descriptor_for("sf_add", i));
  }

  ChildGuard guard;
  std::vector<pid_t> children;
  for (int p = 0; p < k_processes; ++p) {
    children.push_back(fork_child(guard, [&, p]() -> int {
      auto store = Store::open(config_for(cache));
      if (!store) {
        write_text(dir / "results" / (std::to_string(p) + ".err"), store.error().message());
        return 10;
      }
      const auto scenario = test_scenario();
      const auto order = shuffled_keys_after_go(go, k_flight_keys, 1000 + p);
      if (order.empty()) {
        return 11;
      }
      std::string report;
      for (int i : order) {
        auto build = [&, i](const fs::path& work) -> opcache::Status {
          append_line(counter, std::to_string(i) + " " + std::to_string(::getpid()));
          sleep_ms(20);  // long enough for the other processes to pile up as waiters
          fs::copy_file(object, work / ("sf_" + std::to_string(i) + ".o"));
          write_text(work / ("sf_" + std::to_string(i) + ".json"),
                     json{{"key_index", i}, {"builder_pid", ::getpid()}}.dump());
          return {};
        };
        auto out = dir / "out" / std::to_string(p) / std::to_string(i);
        auto result = store->get_or_build(descriptors[i], scenario, out, build);
        if (!result) {
          write_text(dir / "results" / (std::to_string(p) + ".err"),
                     "key " + std::to_string(i) + ": " + result.error().message());
          return 12;
        }
        report += std::to_string(i) + " " + source_name(result->source) + " " + result->key + " " +
                  std::to_string(result->files.size()) + "\n";
      }
      write_text(dir / "results" / (std::to_string(p) + ".txt"), report);
      return 0;
    }));
  }
  const auto start = Clock::now();
  write_text(go, "go");
  for (int p = 0; p < k_processes; ++p) {
    int code = guard.wait(children[p]);
    INFO("process ", p, ": ", read_text(dir / "results" / (std::to_string(p) + ".err")));
    CHECK(code == 0);
  }
  MESSAGE("8 processes x 50 keys through get_or_build took ", ms_since(start), " ms");

  check_one_build_per_key(counter, k_flight_keys);
  std::map<std::string, std::string> builder_of;
  for (const auto& line : lines_of(read_text(counter))) {
    builder_of[line.substr(0, line.find(' '))] = line.substr(line.find(' ') + 1);
  }

  // 50 built and 350 hits across all processes; one key per descriptor.
  std::map<std::string, int> sources;
  std::map<int, std::set<std::string>> keys_of;
  for (int p = 0; p < k_processes; ++p) {
    auto lines = lines_of(read_text(dir / "results" / (std::to_string(p) + ".txt")));
    CHECK(lines.size() == static_cast<std::size_t>(k_flight_keys));
    for (const auto& line : lines) {
      std::istringstream fields(line);
      int index = -1;
      std::string source, key;
      std::size_t files = 0;
      fields >> index >> source >> key >> files;
      ++sources[source];
      keys_of[index].insert(key);
      CHECK(files == 2);
    }
  }
  CHECK(sources["built"] == k_flight_keys);
  CHECK(sources["hit"] == (k_processes - 1) * k_flight_keys);
  CHECK(sources.size() == 2);

  // Every process got the same bytes for a key: the one build's output.
  for (int i = 0; i < k_flight_keys; ++i) {
    INFO("key ", i);
    CHECK(keys_of[i].size() == 1);
    auto reference = directory_contents(dir / "out" / "0" / std::to_string(i));
    REQUIRE(reference.size() == 2);
    CHECK(reference["sf_" + std::to_string(i) + ".o"] == read_text(object));
    auto meta = json::parse(reference["sf_" + std::to_string(i) + ".json"], nullptr, false);
    REQUIRE(meta.is_object());
    CHECK(meta.value("key_index", -1) == i);
    CHECK(std::to_string(meta.value("builder_pid", 0L)) == builder_of[std::to_string(i)]);
    check_same_outputs(dir / "out", k_processes, i, reference);
  }

  auto store = Store::open(config_for(cache));
  REQUIRE(store.ok());
  auto report = store->verify(false);
  REQUIRE(report.ok());
  CHECK(report->entries_checked == k_flight_keys);
  CHECK(report->problems.empty());
}

TEST_CASE("e2e::single flight runs each of 50 commands once across 8 processes (opcache exec)") {
  hermetic_environment();
  TempDir dir;
  const auto [cache, counter, go, object] = make_crowd(dir);
  for (int i = 0; i < k_flight_keys; ++i) {
    write_text(dir / "desc" / (std::to_string(i) + ".json"), descriptor_for("sf_exec", i));
  }
  // $0 key index, $1 counter, $2 object to copy, $3 --out directory.
  const std::string script =
      "printf '%s %s\\n' \"$0\" \"$$\" >> \"$1\"; sleep 0.03; cp \"$2\" \"$3/kernel.o\" && "
      "printf '{\"key\":%s,\"builder_pid\":%s}' \"$0\" \"$$\" > \"$3/kernel.json\"";

  ChildGuard guard;
  std::vector<pid_t> drivers;
  for (int p = 0; p < k_processes; ++p) {
    drivers.push_back(fork_child(guard, [&, p]() -> int {
      const auto order = shuffled_keys_after_go(go, k_flight_keys, 2000 + p);
      if (order.empty()) {
        return 11;
      }
      std::string report;
      for (int i : order) {
        auto out = dir / "out" / std::to_string(p) / std::to_string(i);
        auto result = run_process(exec_argv(cache, dir / "desc" / (std::to_string(i) + ".json"), out,
                                         {"kernel.o", "kernel.json"}, script,
                                         {std::to_string(i), counter.string(), object.string(), out.string()}));
        report += std::to_string(i) + " " + std::to_string(result.exit_code) + " " + json_source(result.out) + "\n";
        if (result.exit_code != 0) {
          append_line(dir / "results" / (std::to_string(p) + ".err"), std::to_string(i) + ": " + result.err);
        }
      }
      write_text(dir / "results" / (std::to_string(p) + ".txt"), report);
      return 0;
    }));
  }
  const auto start = Clock::now();
  write_text(go, "go");
  for (int p = 0; p < k_processes; ++p) {
    CHECK(guard.wait(drivers[p]) == 0);
  }
  MESSAGE("8 processes x 50 keys through opcache exec took ", ms_since(start), " ms");

  check_one_build_per_key(counter, k_flight_keys);
  std::map<std::string, int> sources;
  for (int p = 0; p < k_processes; ++p) {
    INFO("process ", p, " errors: ", read_text(dir / "results" / (std::to_string(p) + ".err")));
    auto lines = lines_of(read_text(dir / "results" / (std::to_string(p) + ".txt")));
    CHECK(lines.size() == static_cast<std::size_t>(k_flight_keys));
    for (const auto& line : lines) {
      std::istringstream fields(line);
      int index = -1, exit_code = -1;
      std::string source;
      fields >> index >> exit_code >> source;
      INFO("key ", index);
      CHECK(exit_code == 0);
      ++sources[source];
    }
  }
  CHECK(sources["built"] == k_flight_keys);
  CHECK(sources["hit"] == (k_processes - 1) * k_flight_keys);

  for (int i = 0; i < k_flight_keys; ++i) {
    INFO("key ", i);
    auto reference = directory_contents(dir / "out" / "0" / std::to_string(i));
    REQUIRE(reference.size() == 2);
    CHECK(reference["kernel.o"] == read_text(object));
    auto meta = json::parse(reference["kernel.json"], nullptr, false);
    REQUIRE(meta.is_object());
    CHECK(meta.value("key", -1) == i);
    check_same_outputs(dir / "out", k_processes, i, reference);
  }
}

// ---------------------------------------------------------------------------
// The C ABI

namespace {

struct CallbackState {
  int calls = 0;
  int rc = 0;
  std::vector<fs::path> files;
};

// A plain C-style build callback: copies the kernel files into work_dir.
int copy_kernel_callback(const char* work_dir, void* user_data) {
  auto* state = static_cast<CallbackState*>(user_data);
  ++state->calls;
  if (state->rc != 0) {
    return state->rc;
  }
  for (const auto& file : state->files) {
    std::error_code ec;
    fs::copy_file(file, fs::path(work_dir) / file.filename(), ec);
    if (ec) {
      return 99;
    }
  }
  return 0;
}

}  // namespace

TEST_CASE("e2e::single flight C ABI opcache_get_or_build calls the callback once, then hits, a failure stores nothing") {
  hermetic_environment();
  TempDir dir;
  auto kernel = opcache::test::make_kernel(dir / "kernel", "relu", 96);
  auto other = opcache::test::make_kernel(dir / "other", "neg", 96);

  opcache_store* raw = nullptr;
  REQUIRE(opcache_open((dir / "cache").c_str(), &raw) == OPCACHE_OK);
  std::unique_ptr<opcache_store, decltype(&opcache_close)> store(raw, &opcache_close);

  CallbackState state;
  state.files = kernel.files();
  opcache_source source = OPCACHE_SOURCE_BYPASSED;
  const auto out1 = dir / "out1";
  REQUIRE(opcache_get_or_build(store.get(), kernel.descriptor_json.c_str(), k_test_scenario, out1.c_str(),
                               &copy_kernel_callback, &state, &source) == OPCACHE_OK);
  CHECK(source == OPCACHE_SOURCE_BUILT);
  CHECK(state.calls == 1);
  for (const auto& file : kernel.files()) {
    CHECK(read_text(out1 / file.filename()) == read_text(file));
  }
  CHECK(directory_contents(out1).size() == 3);

  const auto out2 = dir / "out2";
  source = OPCACHE_SOURCE_BYPASSED;
  REQUIRE(opcache_get_or_build(store.get(), kernel.descriptor_json.c_str(), k_test_scenario, out2.c_str(),
                               &copy_kernel_callback, &state, &source) == OPCACHE_OK);
  CHECK(source == OPCACHE_SOURCE_HIT);
  CHECK(state.calls == 1);
  CHECK(directory_contents(out2) == directory_contents(out1));

  // source_out may be NULL.
  REQUIRE(opcache_get_or_build(store.get(), kernel.descriptor_json.c_str(), k_test_scenario, (dir / "out3").c_str(),
                               &copy_kernel_callback, &state, nullptr) == OPCACHE_OK);
  CHECK(state.calls == 1);

  // A callback returning 3 fails the build; nothing is stored.
  CallbackState failing;
  failing.rc = 3;
  failing.files = other.files();
  CHECK(opcache_get_or_build(store.get(), other.descriptor_json.c_str(), k_test_scenario, (dir / "out4").c_str(),
                             &copy_kernel_callback, &failing, &source) == OPCACHE_BUILD_FAILED);
  CHECK(failing.calls == 1);
  CHECK(std::string(opcache_last_error()).find("returned 3") != std::string::npos);
  char key[OPCACHE_KEY_BUFFER] = {};
  REQUIRE(opcache_key(store.get(), other.descriptor_json.c_str(), k_test_scenario, key) == OPCACHE_OK);
  CHECK(opcache_has(store.get(), key) == OPCACHE_NOT_FOUND);

  // The next call builds again and succeeds.
  failing.rc = 0;
  REQUIRE(opcache_get_or_build(store.get(), other.descriptor_json.c_str(), k_test_scenario, (dir / "out5").c_str(),
                               &copy_kernel_callback, &failing, &source) == OPCACHE_OK);
  CHECK(source == OPCACHE_SOURCE_BUILT);
  CHECK(failing.calls == 2);
  CHECK(opcache_has(store.get(), key) == OPCACHE_OK);
}
