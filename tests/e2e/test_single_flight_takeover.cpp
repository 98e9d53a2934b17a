// End-to-end tests of single flight when the builder does not simply
// succeed, through Store::get_or_build and `opcache exec`: a killed builder
// is taken over by its waiter, a failed build reaches every waiter and is not
// cached, and waits end at the timeout. A counter file that every build
// appends one line to shows who built. The parent waits until the waiters are
// really waiting for the held per-key lock (wait_for_lock_waiters), never for
// a fixed time.
//
// Multi-process library cases fork() before the parent creates any opcache
// object; children open their own Store and _exit() with a status that says
// whether everything they saw was right. Details go to files the parent reads.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
using opcache::Result;
using opcache::Store;
using opcache::StoreConfig;
using namespace opcache::test;

namespace {

// One key the processes of a test ask for: the cache, the descriptor (also
// in a file for `opcache exec`), the counter every build appends
// "<name> <pid>" to, the object builds copy, and the lock single flight
// takes for the key.
struct Flight {
  Flight(const TempDir& dir, const std::string& op_type, int index)
      : cache(dir / "cache"), counter(dir / "builds.log"), object(compile_shared_object(dir)),
        desc(dir / "desc.json"), descriptor(descriptor_for(op_type, index)) {
    write_text(desc, descriptor);
    lock = flight_lock(cache, desc);
  }

  fs::path cache;
  fs::path counter;
  fs::path object;
  fs::path desc;
  std::string descriptor;
  fs::path lock;
};

// In a forked child: opens a Store with `config` and returns body(store), or
// 10 when the Store does not open.
int with_store(const StoreConfig& config, const std::function<int(Store&)>& body) {
  auto store = Store::open(config);
  return store ? body(*store) : 10;
}

// A child whose get_or_build of the flight's key starts building (counter
// line "a <pid>", file a-started) and then hangs for 30 s, as a stuck
// compiler; returns once the build has started.
pid_t fork_hanging_builder(ChildGuard& guard, const Flight& flight, const TempDir& dir) {
  pid_t pid = fork_child(guard, [&]() -> int {
    return with_store(config_for(flight.cache), [&](Store& store) {
      auto result = store.get_or_build(flight.descriptor, test_scenario(), dir / "out-a", [&](const fs::path&) {
        append_line(flight.counter, "a " + std::to_string(::getpid()));
        write_text(dir / "a-started", "started");
        sleep_ms(30000);
        return opcache::Status{};
      });
      return result ? 0 : 12;
    });
  });
  REQUIRE(wait_for_file(dir / "a-started", std::chrono::seconds(20)));
  return pid;
}

// What every test here starts with: settings from the environment removed,
// its own directory, one key to ask for (each test has its own cache, so the
// descriptor can be the same) and the guard of its children, which ends
// them before the directory goes.
class FlightTest {
 protected:
  bool hermetic = (hermetic_environment(), true);
  TempDir dir;
  Flight flight{dir, "sf_flight", 7};
  ChildGuard guard;
};

// `argv` (an `opcache exec` command line) in the background in its own
// process group, its output in dir/<name>.out and dir/<name>.err.
pid_t spawn_exec(ChildGuard& guard, const std::vector<std::string>& argv, const TempDir& dir,
                 const std::string& name) {
  SpawnOptions options;
  options.out = dir / (name + ".out");
  options.err = dir / (name + ".err");
  options.group = ProcessGroup::own;
  return spawn_background(guard, argv, options);
}

// `opcache exec` of the flight's key whose command marks that it started
// (a-started) and then hangs as `sleep 30` in its process group; returns once
// the command has started.
pid_t spawn_hanging_exec(ChildGuard& guard, const Flight& flight, const TempDir& dir) {
  pid_t pid = spawn_exec(guard,
                         exec_argv(flight.cache, flight.desc, dir / "out-a", {"kernel.o"},
                                   "touch \"$0\"; exec sleep 30", {(dir / "a-started").string()}),
                         dir, "a");
  REQUIRE(wait_for_file(dir / "a-started", std::chrono::seconds(20)));
  return pid;
}

// `opcache exec` of the flight's key into dir/out-<name> whose command
// appends "<name> <pid>" to the counter and copies the object as kernel.o.
std::vector<std::string> copying_exec(const Flight& flight, const TempDir& dir, const std::string& name,
                                      JsonOutput json_output = JsonOutput::yes) {
  const fs::path out = dir / ("out-" + name);
  return exec_argv(flight.cache, flight.desc, out, {"kernel.o"},
                   "printf '%s %s\\n' \"$0\" \"$$\" >> \"$1\"; cp \"$2\" \"$3/kernel.o\"",
                   {name, flight.counter.string(), flight.object.string(), out.string()}, json_output);
}

// Exit status of `opcache has` for the flight's key: 0 present, 1 absent.
int has_exit_code(const Flight& flight) {
  return run_cli({"--cache-dir", flight.cache.string(), "has", "--desc", flight.desc.string(), "--scenario",
                  k_test_scenario})
      .exit_code;
}

}  // namespace

// ---------------------------------------------------------------------------
// A killed builder is taken over

TEST_CASE_FIXTURE(FlightTest, "e2e::single flight waiter takes over from a SIGKILLed builder at once (get_or_build)") {
  // A: starts building, then hangs (a compiler stuck for 30 s).
  pid_t builder = fork_hanging_builder(guard, flight, dir);

  // B: asks for the same key and has to wait for A.
  pid_t waiter = fork_child(guard, [&]() -> int {
    return with_store(config_for(flight.cache), [&](Store& store) {
      write_text(dir / "b-waiting", "waiting");
      auto result = store.get_or_build(flight.descriptor, test_scenario(), dir / "out-b", [&](const fs::path& work) {
        append_line(flight.counter, "b " + std::to_string(::getpid()));
        fs::copy_file(flight.object, work / "takeover.o");
        write_text(work / "takeover.json", "{\"builder\":\"b\"}");
        return opcache::Status{};
      });
      if (!result) {
        write_text(dir / "b-result", std::string("error ") + result.error().message());
        return 12;
      }
      write_text(dir / "b-result", source_name(result->source));
      return 0;
    });
  });
  REQUIRE(wait_for_file(dir / "b-waiting", std::chrono::seconds(20)));
  wait_for_lock_waiters(flight.lock, {waiter});
  // B is blocked behind A's build, not building itself.
  CHECK(still_running(waiter));
  CHECK(builds_per_name(flight.counter).count("b") == 0);

  REQUIRE(::kill(builder, SIGKILL) == 0);
  const auto killed_at = Clock::now();
  CHECK(guard.wait(builder) == 128 + SIGKILL);
  CHECK(guard.wait(waiter) == 0);
  const auto takeover_ms = ms_since(killed_at);
  MESSAGE("waiter finished ", takeover_ms, " ms after the builder was killed");
  // At once, not when the killed build would have ended (30 s) or the wait
  // would have timed out (1 h); the bound is loose for loaded machines.
  CHECK(takeover_ms < 15000);
  CHECK(read_text(dir / "b-result") == "built");
  auto builds = builds_per_name(flight.counter);
  CHECK(builds["a"] == 1);
  CHECK(builds["b"] == 1);
  CHECK(read_text(dir / "out-b" / "takeover.o") == read_text(flight.object));

  // A third request is a hit on B's build.
  auto store = Store::open(config_for(flight.cache));
  REQUIRE(store.ok());
  int calls = 0;
  auto third = store->get_or_build(flight.descriptor, test_scenario(), dir / "out-c", [&](const fs::path&) {
    ++calls;
    return opcache::Status{};
  });
  REQUIRE_MESSAGE(third.ok(), (third.ok() ? "" : third.error().message()));
  CHECK(third->source == BuildSource::hit);
  CHECK(calls == 0);
  CHECK(directory_contents(dir / "out-c") == directory_contents(dir / "out-b"));
}

TEST_CASE_FIXTURE(FlightTest, "e2e::single flight waiter takes over from a SIGKILLed builder at once (opcache exec)") {
  // A: its command marks that it started, then hangs as `sleep` (same process group).
  pid_t builder = spawn_hanging_exec(guard, flight, dir);
  pid_t waiter = spawn_exec(guard, copying_exec(flight, dir, "b"), dir, "b");
  wait_for_lock_waiters(flight.lock, {waiter});
  CHECK(still_running(waiter));
  CHECK(!fs::exists(flight.counter));

  REQUIRE(::kill(-builder, SIGKILL) == 0);
  const auto killed_at = Clock::now();
  CHECK(guard.wait(builder) == 128 + SIGKILL);
  int waiter_exit = guard.wait(waiter);
  const auto takeover_ms = ms_since(killed_at);
  MESSAGE("exec waiter finished ", takeover_ms, " ms after the builder was killed");
  INFO("waiter stderr: ", read_text(dir / "b.err"));
  CHECK(waiter_exit == 0);
  CHECK(takeover_ms < 15000);  // at once, not after the hung build's 30 s (loose for loaded machines)
  CHECK(json_source(read_text(dir / "b.out")) == "built");
  CHECK(builds_per_name(flight.counter)["b"] == 1);
  CHECK(read_text(dir / "out-b" / "kernel.o") == read_text(flight.object));

  // A third exec is a hit and does not run its command.
  auto third = run_process(copying_exec(flight, dir, "c"));
  INFO("third stderr: ", third.err);
  CHECK(third.exit_code == 0);
  CHECK(json_source(third.out) == "hit");
  CHECK(builds_per_name(flight.counter).count("c") == 0);
  CHECK(read_text(dir / "out-c" / "kernel.o") == read_text(flight.object));
}

// ---------------------------------------------------------------------------
// A failed build reaches every waiter and is not cached

namespace {

// "<code> <message>" of a failed result, "ok <source>" (or "ok") of a good one.
std::string outcome(const Result<opcache::BuildResult>& result, bool with_source) {
  if (result) {
    return with_source ? std::string("ok ") + source_name(result->source) : std::string("ok");
  }
  return std::to_string(static_cast<int>(result.error().code())) + " " + result.error().message();
}

}  // namespace

TEST_CASE_FIXTURE(FlightTest, "e2e::single flight failed build is reported to all 3 waiters and not cached (get_or_build)") {
  constexpr int k_waiters = 3;
  fs::create_directories(dir / "results");
  pid_t builder = fork_child(guard, [&]() -> int {
    return with_store(config_for(flight.cache), [&](Store& store) {
      auto result = store.get_or_build(flight.descriptor, test_scenario(), dir / "out-a", [&](const fs::path&) {
        append_line(flight.counter, "a " + std::to_string(::getpid()));
        write_text(dir / "a-started", "started");
        wait_for_file(dir / "fail-now", std::chrono::seconds(20));
        return opcache::Status(opcache::Error::build_failed("the compiler exploded on sf_fail"));
      });
      write_text(dir / "results" / "a", outcome(result, false));
      return 0;
    });
  });
  REQUIRE(wait_for_file(dir / "a-started", std::chrono::seconds(20)));

  std::vector<pid_t> waiters;
  for (int w = 0; w < k_waiters; ++w) {
    waiters.push_back(fork_child(guard, [&, w]() -> int {
      return with_store(config_for(flight.cache), [&](Store& store) {
        const std::string name = "w" + std::to_string(w);
        write_text(dir / ("waiting-" + std::to_string(w)), "waiting");
        auto result = store.get_or_build(flight.descriptor, test_scenario(), dir / ("out-" + name),
                                         [&](const fs::path& work) {
                                           append_line(flight.counter, name + " " + std::to_string(::getpid()));
                                           fs::copy_file(flight.object, work / "fail.o");
                                           return opcache::Status{};
                                         });
        write_text(dir / "results" / name, outcome(result, true));
        return 0;
      });
    }));
  }
  for (int w = 0; w < k_waiters; ++w) {
    REQUIRE(wait_for_file(dir / ("waiting-" + std::to_string(w)), std::chrono::seconds(20)));
  }
  wait_for_lock_waiters(flight.lock, waiters);
  write_text(dir / "fail-now", "fail");
  CHECK(guard.wait(builder) == 0);
  for (pid_t waiter : waiters) {
    CHECK(guard.wait(waiter) == 0);
  }

  const std::string build_failed = std::to_string(static_cast<int>(ErrorCode::build_failed)) + " ";
  auto builder_result = read_text(dir / "results" / "a");
  INFO("builder: ", builder_result);
  CHECK(builder_result.rfind(build_failed, 0) == 0);
  CHECK(builder_result.find("the compiler exploded") != std::string::npos);
  for (int w = 0; w < k_waiters; ++w) {
    auto waiter_result = read_text(dir / "results" / ("w" + std::to_string(w)));
    INFO("waiter ", w, ": ", waiter_result);
    CHECK(waiter_result.rfind(build_failed, 0) == 0);
    CHECK(waiter_result.find("failed") != std::string::npos);
    CHECK(waiter_result.find("the compiler exploded") != std::string::npos);
  }
  // Only A built; no waiter built again after the failure.
  auto builds = builds_per_name(flight.counter);
  CHECK(builds.size() == 1);
  CHECK(builds["a"] == 1);

  // Nothing was stored; a later call builds again and succeeds.
  auto store = Store::open(config_for(flight.cache));
  REQUIRE(store.ok());
  auto key = store->key(flight.descriptor, test_scenario());
  REQUIRE(key.ok());
  auto present = store->contains(*key);
  REQUIRE(present.ok());
  CHECK_FALSE(*present);
  auto later = store->get_or_build(flight.descriptor, test_scenario(), dir / "out-later", [&](const fs::path& work) {
    append_line(flight.counter, "later " + std::to_string(::getpid()));
    fs::copy_file(flight.object, work / "fail.o");
    return opcache::Status{};
  });
  REQUIRE_MESSAGE(later.ok(), (later.ok() ? "" : later.error().message()));
  CHECK(later->source == BuildSource::built);
  CHECK(builds_per_name(flight.counter)["later"] == 1);
  present = store->contains(*key);
  REQUIRE(present.ok());
  CHECK(*present);
}

TEST_CASE_FIXTURE(FlightTest, "e2e::single flight failing command exits with its status, waiters fail, nothing is stored (opcache exec)") {
  constexpr int k_waiters = 3;
  pid_t builder = spawn_exec(
      guard,
      exec_argv(flight.cache, flight.desc, dir / "out-a", {"kernel.o"},
                "touch \"$0\"; while [ ! -e \"$1\" ]; do sleep 0.02; done; exit 7",
                {(dir / "a-started").string(), (dir / "fail-now").string()}, JsonOutput::no),
      dir, "a");
  REQUIRE(wait_for_file(dir / "a-started", std::chrono::seconds(20)));
  std::vector<pid_t> waiters;
  for (int w = 0; w < k_waiters; ++w) {
    const std::string name = "w" + std::to_string(w);
    waiters.push_back(spawn_exec(guard, copying_exec(flight, dir, name, JsonOutput::no), dir, name));
  }
  wait_for_lock_waiters(flight.lock, waiters);
  for (pid_t waiter : waiters) {
    CHECK(still_running(waiter));
  }
  write_text(dir / "fail-now", "fail");
  CHECK(guard.wait(builder) == 7);
  for (int w = 0; w < k_waiters; ++w) {
    int code = guard.wait(waiters[w]);
    auto err = read_text(dir / ("w" + std::to_string(w) + ".err"));
    INFO("waiter ", w, " stderr: ", err);
    CHECK(code != 0);
    CHECK(err.find("failed") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(flight.counter));  // no waiter ran its command after the failure
  CHECK(has_exit_code(flight) == 1);

  auto later = run_process(copying_exec(flight, dir, "later"));
  INFO("later stderr: ", later.err);
  CHECK(later.exit_code == 0);
  CHECK(json_source(later.out) == "built");
  CHECK(builds_per_name(flight.counter)["later"] == 1);
  CHECK(has_exit_code(flight) == 0);
}

// ---------------------------------------------------------------------------
// Wait timeouts

TEST_CASE_FIXTURE(FlightTest, "e2e::single flight wait ends with ErrorCode::timeout after wait_timeout_s (get_or_build)") {
  pid_t holder = fork_hanging_builder(guard, flight, dir);
  pid_t waiter = fork_child(guard, [&]() -> int {
    StoreConfig config = config_for(flight.cache);
    config.wait_timeout_s = 1;
    return with_store(config, [&](Store& store) {
      int calls = 0;
      const auto start = Clock::now();
      auto result = store.get_or_build(flight.descriptor, test_scenario(), dir / "out-b", [&](const fs::path&) {
        ++calls;
        return opcache::Status{};
      });
      const auto elapsed = ms_since(start);
      write_text(dir / "b-result", std::to_string(result ? 0 : static_cast<int>(result.error().code())) + " " +
                                       std::to_string(elapsed) + " " + std::to_string(calls) + " " +
                                       (result ? std::string() : result.error().message()));
      return 0;
    });
  });
  CHECK(guard.wait(waiter) == 0);
  guard.kill(holder);

  std::istringstream fields(read_text(dir / "b-result"));
  int code = -1, calls = -1;
  std::int64_t elapsed = -1;
  std::string message;
  fields >> code >> elapsed >> calls;
  std::getline(fields, message);
  INFO("waiter: ", read_text(dir / "b-result"));
  CHECK(code == static_cast<int>(ErrorCode::timeout));
  CHECK(elapsed >= 900);
  CHECK(elapsed < 15000);  // ended by the 1 s timeout, not by the holder's 30 s build (loose for load)
  CHECK(calls == 0);
  CHECK(message.find("wait-timeout") != std::string::npos);
}

TEST_CASE_FIXTURE(FlightTest, "e2e::single flight exec --wait-timeout 1 falls back to running the command uncached (opcache exec)") {
  pid_t holder = spawn_hanging_exec(guard, flight, dir);

  // A command that succeeds: exit 0, its output written, nothing stored.
  const auto start = Clock::now();
  auto fallback = run_process(exec_argv(flight.cache, flight.desc, dir / "out-b", {"kernel.o"},
                                        "cp \"$0\" \"$1/kernel.o\"", {flight.object.string(), (dir / "out-b").string()},
                                        JsonOutput::no, {"--wait-timeout", "1"}));
  const auto elapsed = ms_since(start);
  INFO("stderr: ", fallback.err);
  CHECK(fallback.exit_code == 0);
  CHECK(elapsed >= 900);
  CHECK(elapsed < 15000);  // the 1 s wait, not the holder's 30 s (loose: starting the CLI under load)
  CHECK(fallback.err.find("warning") != std::string::npos);
  CHECK(fallback.err.find("without the cache") != std::string::npos);
  CHECK(read_text(dir / "out-b" / "kernel.o") == read_text(flight.object));

  // A command that fails: exec exits with its status.
  auto failing = run_process(exec_argv(flight.cache, flight.desc, dir / "out-c", {"kernel.o"}, "exit 5", {},
                                       JsonOutput::no, {"--wait-timeout", "1"}));
  INFO("stderr: ", failing.err);
  CHECK(failing.exit_code == 5);
  CHECK(failing.err.find("without the cache") != std::string::npos);

  guard.kill(holder);
  CHECK(has_exit_code(flight) == 1);
}
