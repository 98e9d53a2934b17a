// End-to-end tests of single flight across processes: Store::get_or_build,
// the C ABI's opcache_get_or_build and `opcache exec`. Many processes ask for
// the same missing keys at once; a counter file that every build appends one
// line to proves that each key was built exactly once, that a killed builder
// is taken over, that a failed build reaches every waiter and is not cached,
// and that waits end at the timeout.
//
// Multi-process library cases fork() before the parent creates any opcache
// object; children open their own Store and _exit() with a status that says
// whether everything they saw was right. Details go to files the parent reads.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/opcache.h"
#include "opcache/opcache.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

extern char** environ;

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::BuildSource;
using opcache::ErrorCode;
using opcache::Store;
using opcache::StoreConfig;
using opcache::test::k_test_scenario;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::write_text;

namespace {

using Clock = std::chrono::steady_clock;

// Settings from the environment must not change what these tests see.
void hermetic_environment() {
  for (const char* name : {"OPCACHE_DIR", "OPCACHE_CONFIG", "OPCACHE_MODE", "OPCACHE_OP_DEBUG_LEVEL",
                           "OPCACHE_OP_DEBUG_LIST", "OPCACHE_WAIT_TIMEOUT", "OPCACHE_VOLATILE_FIELDS", "RANK_SIZE",
                           "LOCAL_WORLD_SIZE", "XDG_CACHE_HOME"}) {
    ::unsetenv(name);
  }
}

std::int64_t ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Appends one line with a single write() on an O_APPEND descriptor, so lines
// from concurrent processes never interleave.
bool append_line(const fs::path& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return false;
  }
  std::string text = line + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) {
      lines.push_back(line);
    }
  }
  return lines;
}

// Counter lines are "<name> <pid>": how many builds each name had.
std::map<std::string, int> builds_per_name(const fs::path& counter) {
  std::map<std::string, int> counts;
  for (const auto& line : lines_of(read_text(counter))) {
    ++counts[line.substr(0, line.find(' '))];
  }
  return counts;
}

bool wait_for_file(const fs::path& path, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::error_code ec;
  while (!fs::exists(path, ec)) {
    if (Clock::now() >= deadline) {
      return false;
    }
    sleep_ms(1);
  }
  return true;
}

int decode_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return -1;
    }
  }
  return decode_status(status);
}

// True while `pid` (a child) has not exited.
bool still_running(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == 0;
}

// Kills (with their process groups when they lead one) and reaps the children
// still registered when a test ends, so a failing REQUIRE leaves no strays.
class ChildGuard {
 public:
  ChildGuard() = default;
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  ~ChildGuard() {
    for (pid_t pid : m_pids) {
      if (::getpgid(pid) == pid) {
        ::kill(-pid, SIGKILL);
      }
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  }
  pid_t add(pid_t pid) {
    m_pids.push_back(pid);
    return pid;
  }
  // The child was reaped by the test.
  void release(pid_t pid) { m_pids.erase(std::remove(m_pids.begin(), m_pids.end(), pid), m_pids.end()); }
  int wait(pid_t pid) {
    int code = wait_exit(pid);
    release(pid);
    return code;
  }

 private:
  std::vector<pid_t> m_pids;
};

// Forks a child that runs `body` and _exit()s with its result (97 when it
// throws). Call only before the parent creates opcache objects.
pid_t fork_child(ChildGuard& guard, const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 97;
    try {
      code = body();
    } catch (...) {
      code = 97;
    }
    ::_exit(code);
  }
  return guard.add(pid);
}

// Starts argv in the background with stdout/stderr redirected to files; with
// `own_group` the child leads a new process group (kill(-pid) kills its
// children too).
pid_t spawn_background(ChildGuard& guard, const std::vector<std::string>& argv, const fs::path& out,
                       const fs::path& err, bool own_group) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (own_group) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  std::vector<char*> args;
  for (const auto& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  REQUIRE_MESSAGE(rc == 0, "cannot spawn ", argv[0], ": ", std::strerror(rc));
  return guard.add(pid);
}

opcache::Scenario test_scenario() {
  auto scenario = opcache::parse_scenario(k_test_scenario);
  if (!scenario) {
    throw std::runtime_error(scenario.error().message());
  }
  return *scenario;
}

// A distinct descriptor per index.
std::string descriptor_for(const std::string& op_type, int index) {
  json descriptor = {{"op_type", op_type},
                     {"inputs", {{{"shape", {index + 1, 16}}, {"dtype", "float16"}, {"format", "ND"}}}},
                     {"outputs", {{{"shape", {index + 1, 16}}, {"dtype", "float16"}, {"format", "ND"}}}},
                     {"attrs", json::object()}};
  return descriptor.dump();
}

// A small real object file shared by the builds (their .json makes each distinct).
fs::path compile_shared_object(const TempDir& dir) {
  return opcache::test::compile_object(dir / "src", "sf_kernel",
                                       "int sf_kernel(const float* x, float* y) { y[0] = x[0] * 3.0f + 1.0f; return 0; "
                                       "}\n");
}

// Byte contents of every regular file in a directory, by name.
std::map<std::string, std::string> directory_contents(const fs::path& dir) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    if (item.is_regular_file()) {
      files[item.path().filename().string()] = read_text(item.path());
    }
  }
  return files;
}

const char* source_name(BuildSource source) {
  return source == BuildSource::hit ? "hit" : source == BuildSource::built ? "built" : "bypassed";
}

StoreConfig config_for(const fs::path& cache) {
  StoreConfig config;
  config.cache_dir = cache;
  return config;
}

// `opcache --cache-dir CACHE [--json] [extra...] exec --desc DESC --scenario S
// --out OUT [--output NAME]... -- sh -c SCRIPT args...`
std::vector<std::string> exec_argv(const fs::path& cache, const fs::path& desc, const fs::path& out,
                                   const std::vector<std::string>& outputs, const std::string& script,
                                   const std::vector<std::string>& script_args, bool json_output = true,
                                   const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv{opcache::test::cli_path(), "--cache-dir", cache.string()};
  if (json_output) {
    argv.push_back("--json");
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("exec");
  for (const std::string& arg : {std::string("--desc"), desc.string(), std::string("--scenario"),
                                 std::string(k_test_scenario), std::string("--out"), out.string()}) {
    argv.push_back(arg);
  }
  // The documented order: the --output options directly before "--".
  for (const auto& name : outputs) {
    argv.push_back("--output");
    argv.push_back(name);
  }
  argv.push_back("--");
  argv.push_back("sh");
  argv.push_back("-c");
  argv.push_back(script);
  argv.insert(argv.end(), script_args.begin(), script_args.end());
  return argv;
}

opcache::test::ProcessResult run_argv(const std::vector<std::string>& argv) {
  return opcache::test::run_process(argv);
}

std::string json_source(const std::string& stdout_text) {
  auto document = json::parse(stdout_text, nullptr, false);
  return document.is_object() ? document.value("source", std::string("?")) : std::string("unparsable");
}

}  // namespace

// ---------------------------------------------------------------------------
// 8 processes × 50 keys

TEST_CASE("e2e::single flight builds each of 50 keys once across 8 processes (get_or_build)") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  const fs::path counter = dir / "builds.log";
  const fs::path go = dir / "go";
  const fs::path object = compile_shared_object(dir);
  constexpr int k_processes = 8;
  constexpr int k_keys = 50;
  std::vector<std::string> descriptors;
  for (int i = 0; i < k_keys; ++i) {
    descriptors.push_back(descriptor_for("sf_add", i));
  }
  fs::create_directories(dir / "results");

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
      std::vector<int> order(k_keys);
      for (int i = 0; i < k_keys; ++i) {
        order[i] = i;
      }
      std::mt19937 random(static_cast<unsigned>(1000 + p));
      std::shuffle(order.begin(), order.end(), random);
      if (!wait_for_file(go, std::chrono::seconds(30))) {
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

  // Exactly one build per key.
  auto builds = builds_per_name(counter);
  CHECK(builds.size() == static_cast<std::size_t>(k_keys));
  for (int i = 0; i < k_keys; ++i) {
    INFO("key ", i);
    CHECK(builds[std::to_string(i)] == 1);
  }
  std::map<std::string, std::string> builder_of;
  for (const auto& line : lines_of(read_text(counter))) {
    builder_of[line.substr(0, line.find(' '))] = line.substr(line.find(' ') + 1);
  }

  // 50 built and 350 hits across all processes; one key per descriptor.
  std::map<std::string, int> sources;
  std::map<int, std::set<std::string>> keys_of;
  for (int p = 0; p < k_processes; ++p) {
    auto lines = lines_of(read_text(dir / "results" / (std::to_string(p) + ".txt")));
    CHECK(lines.size() == static_cast<std::size_t>(k_keys));
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
  CHECK(sources["built"] == k_keys);
  CHECK(sources["hit"] == (k_processes - 1) * k_keys);
  CHECK(sources.size() == 2);

  // Every process got the same bytes for a key: the one build's output.
  for (int i = 0; i < k_keys; ++i) {
    INFO("key ", i);
    CHECK(keys_of[i].size() == 1);
    auto reference = directory_contents(dir / "out" / "0" / std::to_string(i));
    REQUIRE(reference.size() == 2);
    CHECK(reference["sf_" + std::to_string(i) + ".o"] == read_text(object));
    auto meta = json::parse(reference["sf_" + std::to_string(i) + ".json"], nullptr, false);
    REQUIRE(meta.is_object());
    CHECK(meta.value("key_index", -1) == i);
    CHECK(std::to_string(meta.value("builder_pid", 0L)) == builder_of[std::to_string(i)]);
    for (int p = 1; p < k_processes; ++p) {
      INFO("process ", p);
      CHECK(directory_contents(dir / "out" / std::to_string(p) / std::to_string(i)) == reference);
    }
  }

  auto store = Store::open(config_for(cache));
  REQUIRE(store.ok());
  auto report = store->verify(false);
  REQUIRE(report.ok());
  CHECK(report->entries_checked == k_keys);
  CHECK(report->problems.empty());
}

TEST_CASE("e2e::single flight runs each of 50 commands once across 8 processes (opcache exec)") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  const fs::path counter = dir / "commands.log";
  const fs::path go = dir / "go";
  const fs::path object = compile_shared_object(dir);
  constexpr int k_processes = 8;
  constexpr int k_keys = 50;
  for (int i = 0; i < k_keys; ++i) {
    write_text(dir / "desc" / (std::to_string(i) + ".json"), descriptor_for("sf_exec", i));
  }
  fs::create_directories(dir / "results");
  // $0 key index, $1 counter, $2 object to copy, $3 --out directory.
  const std::string script =
      "printf '%s %s\\n' \"$0\" \"$$\" >> \"$1\"; sleep 0.03; cp \"$2\" \"$3/kernel.o\" && "
      "printf '{\"key\":%s,\"builder_pid\":%s}' \"$0\" \"$$\" > \"$3/kernel.json\"";

  ChildGuard guard;
  std::vector<pid_t> drivers;
  for (int p = 0; p < k_processes; ++p) {
    drivers.push_back(fork_child(guard, [&, p]() -> int {
      std::vector<int> order(k_keys);
      for (int i = 0; i < k_keys; ++i) {
        order[i] = i;
      }
      std::mt19937 random(static_cast<unsigned>(2000 + p));
      std::shuffle(order.begin(), order.end(), random);
      if (!wait_for_file(go, std::chrono::seconds(30))) {
        return 11;
      }
      std::string report;
      for (int i : order) {
        auto out = dir / "out" / std::to_string(p) / std::to_string(i);
        auto result = run_argv(exec_argv(cache, dir / "desc" / (std::to_string(i) + ".json"), out,
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

  auto builds = builds_per_name(counter);
  CHECK(builds.size() == static_cast<std::size_t>(k_keys));
  for (int i = 0; i < k_keys; ++i) {
    INFO("key ", i);
    CHECK(builds[std::to_string(i)] == 1);
  }
  std::map<std::string, int> sources;
  for (int p = 0; p < k_processes; ++p) {
    INFO("process ", p, " errors: ", read_text(dir / "results" / (std::to_string(p) + ".err")));
    auto lines = lines_of(read_text(dir / "results" / (std::to_string(p) + ".txt")));
    CHECK(lines.size() == static_cast<std::size_t>(k_keys));
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
  CHECK(sources["built"] == k_keys);
  CHECK(sources["hit"] == (k_processes - 1) * k_keys);

  for (int i = 0; i < k_keys; ++i) {
    INFO("key ", i);
    auto reference = directory_contents(dir / "out" / "0" / std::to_string(i));
    REQUIRE(reference.size() == 2);
    CHECK(reference["kernel.o"] == read_text(object));
    auto meta = json::parse(reference["kernel.json"], nullptr, false);
    REQUIRE(meta.is_object());
    CHECK(meta.value("key", -1) == i);
    for (int p = 1; p < k_processes; ++p) {
      INFO("process ", p);
      CHECK(directory_contents(dir / "out" / std::to_string(p) / std::to_string(i)) == reference);
    }
  }
}

// ---------------------------------------------------------------------------
// A killed builder is taken over

TEST_CASE("e2e::single flight waiter takes over from a SIGKILLed builder at once (get_or_build)") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  const fs::path counter = dir / "builds.log";
  const fs::path object = compile_shared_object(dir);
  const std::string descriptor = descriptor_for("sf_takeover", 7);

  ChildGuard guard;
  // A: starts building, then hangs (a compiler stuck for 30 s).
  pid_t builder = fork_child(guard, [&]() -> int {
    auto store = Store::open(config_for(cache));
    if (!store) {
      return 10;
    }
    auto result = store->get_or_build(descriptor, test_scenario(), dir / "out-a", [&](const fs::path&) {
      append_line(counter, "a " + std::to_string(::getpid()));
      write_text(dir / "a-started", "started");
      sleep_ms(30000);
      return opcache::Status{};
    });
    return result ? 0 : 12;
  });
  REQUIRE(wait_for_file(dir / "a-started", std::chrono::seconds(20)));

  // B: asks for the same key and has to wait for A.
  pid_t waiter = fork_child(guard, [&]() -> int {
    auto store = Store::open(config_for(cache));
    if (!store) {
      return 10;
    }
    write_text(dir / "b-waiting", "waiting");
    auto result = store->get_or_build(descriptor, test_scenario(), dir / "out-b", [&](const fs::path& work) {
      append_line(counter, "b " + std::to_string(::getpid()));
      fs::copy_file(object, work / "takeover.o");
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
  REQUIRE(wait_for_file(dir / "b-waiting", std::chrono::seconds(20)));
  sleep_ms(300);
  // B is blocked behind A's build, not building itself.
  CHECK(still_running(waiter));
  CHECK(builds_per_name(counter).count("b") == 0);

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
  auto builds = builds_per_name(counter);
  CHECK(builds["a"] == 1);
  CHECK(builds["b"] == 1);
  CHECK(read_text(dir / "out-b" / "takeover.o") == read_text(object));

  // A third request is a hit on B's build.
  auto store = Store::open(config_for(cache));
  REQUIRE(store.ok());
  int calls = 0;
  auto third = store->get_or_build(descriptor, test_scenario(), dir / "out-c", [&](const fs::path&) {
    ++calls;
    return opcache::Status{};
  });
  REQUIRE_MESSAGE(third.ok(), (third.ok() ? "" : third.error().message()));
  CHECK(third->source == BuildSource::hit);
  CHECK(calls == 0);
  CHECK(directory_contents(dir / "out-c") == directory_contents(dir / "out-b"));
}

TEST_CASE("e2e::single flight waiter takes over from a SIGKILLed builder at once (opcache exec)") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  const fs::path counter = dir / "commands.log";
  const fs::path object = compile_shared_object(dir);
  const fs::path desc = dir / "takeover.desc.json";
  write_text(desc, descriptor_for("sf_exec_takeover", 3));
  // $0 name, $1 counter, $2 object, $3 out dir.
  const std::string build_script =
      "printf '%s %s\\n' \"$0\" \"$$\" >> \"$1\"; cp \"$2\" \"$3/kernel.o\"";

  ChildGuard guard;
  // A: its command marks that it started, then hangs as `sleep` (same process group).
  pid_t builder = spawn_background(
      guard,
      exec_argv(cache, desc, dir / "out-a", {"kernel.o"}, "touch \"$0\"; exec sleep 30", {(dir / "a-started").string()}),
      dir / "a.out", dir / "a.err", /*own_group=*/true);
  REQUIRE(wait_for_file(dir / "a-started", std::chrono::seconds(20)));

  pid_t waiter = spawn_background(
      guard,
      exec_argv(cache, desc, dir / "out-b", {"kernel.o"}, build_script,
                {"b", counter.string(), object.string(), (dir / "out-b").string()}),
      dir / "b.out", dir / "b.err", /*own_group=*/true);
  sleep_ms(500);
  CHECK(still_running(waiter));
  CHECK(!fs::exists(counter));

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
  CHECK(builds_per_name(counter)["b"] == 1);
  CHECK(read_text(dir / "out-b" / "kernel.o") == read_text(object));

  // A third exec is a hit and does not run its command.
  auto third = run_argv(exec_argv(cache, desc, dir / "out-c", {"kernel.o"}, build_script,
                                  {"c", counter.string(), object.string(), (dir / "out-c").string()}));
  INFO("third stderr: ", third.err);
  CHECK(third.exit_code == 0);
  CHECK(json_source(third.out) == "hit");
  CHECK(builds_per_name(counter).count("c") == 0);
  CHECK(read_text(dir / "out-c" / "kernel.o") == read_text(object));
}

// ---------------------------------------------------------------------------
// A failed build reaches every waiter and is not cached

TEST_CASE("e2e::single flight failed build is reported to all 3 waiters and not cached (get_or_build)") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  const fs::path counter = dir / "builds.log";
  const fs::path object = compile_shared_object(dir);
  const std::string descriptor = descriptor_for("sf_fail", 11);
  constexpr int k_waiters = 3;
  fs::create_directories(dir / "results");

  ChildGuard guard;
  pid_t builder = fork_child(guard, [&]() -> int {
    auto store = Store::open(config_for(cache));
    if (!store) {
      return 10;
    }
    auto result = store->get_or_build(descriptor, test_scenario(), dir / "out-a", [&](const fs::path&) {
      append_line(counter, "a " + std::to_string(::getpid()));
      write_text(dir / "a-started", "started");
      wait_for_file(dir / "fail-now", std::chrono::seconds(20));
      return opcache::Status(opcache::Error::build_failed("the compiler exploded on sf_fail"));
    });
    write_text(dir / "results" / "a",
               result ? std::string("ok") : std::to_string(static_cast<int>(result.error().code())) + " " +
                                                result.error().message());
    return 0;
  });
  REQUIRE(wait_for_file(dir / "a-started", std::chrono::seconds(20)));

  std::vector<pid_t> waiters;
  for (int w = 0; w < k_waiters; ++w) {
    waiters.push_back(fork_child(guard, [&, w]() -> int {
      auto store = Store::open(config_for(cache));
      if (!store) {
        return 10;
      }
      write_text(dir / ("waiting-" + std::to_string(w)), "waiting");
      auto result = store->get_or_build(descriptor, test_scenario(), dir / ("out-w" + std::to_string(w)),
                                        [&](const fs::path& work) {
                                          append_line(counter, "w" + std::to_string(w) + " " +
                                                                   std::to_string(::getpid()));
                                          fs::copy_file(object, work / "fail.o");
                                          return opcache::Status{};
                                        });
      write_text(dir / "results" / ("w" + std::to_string(w)),
                 result ? std::string("ok ") + source_name(result->source)
                        : std::to_string(static_cast<int>(result.error().code())) + " " + result.error().message());
      return 0;
    }));
  }
  for (int w = 0; w < k_waiters; ++w) {
    REQUIRE(wait_for_file(dir / ("waiting-" + std::to_string(w)), std::chrono::seconds(20)));
  }
  sleep_ms(300);  // all three are blocked on the lock now
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
  auto builds = builds_per_name(counter);
  CHECK(builds.size() == 1);
  CHECK(builds["a"] == 1);

  // Nothing was stored; a later call builds again and succeeds.
  auto store = Store::open(config_for(cache));
  REQUIRE(store.ok());
  auto key = store->key(descriptor, test_scenario());
  REQUIRE(key.ok());
  auto present = store->contains(*key);
  REQUIRE(present.ok());
  CHECK_FALSE(*present);
  auto later = store->get_or_build(descriptor, test_scenario(), dir / "out-later", [&](const fs::path& work) {
    append_line(counter, "later " + std::to_string(::getpid()));
    fs::copy_file(object, work / "fail.o");
    return opcache::Status{};
  });
  REQUIRE_MESSAGE(later.ok(), (later.ok() ? "" : later.error().message()));
  CHECK(later->source == BuildSource::built);
  CHECK(builds_per_name(counter)["later"] == 1);
  present = store->contains(*key);
  REQUIRE(present.ok());
  CHECK(*present);
}

TEST_CASE("e2e::single flight failing command exits with its status, waiters fail, nothing is stored (opcache exec)") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  const fs::path counter = dir / "commands.log";
  const fs::path object = compile_shared_object(dir);
  const fs::path desc = dir / "fail.desc.json";
  write_text(desc, descriptor_for("sf_exec_fail", 5));
  constexpr int k_waiters = 3;
  const std::string good_script = "printf '%s %s\\n' \"$0\" \"$$\" >> \"$1\"; cp \"$2\" \"$3/kernel.o\"";

  ChildGuard guard;
  pid_t builder = spawn_background(
      guard,
      exec_argv(cache, desc, dir / "out-a", {"kernel.o"},
                "touch \"$0\"; while [ ! -e \"$1\" ]; do sleep 0.02; done; exit 7",
                {(dir / "a-started").string(), (dir / "fail-now").string()}, /*json_output=*/false),
      dir / "a.out", dir / "a.err", /*own_group=*/true);
  REQUIRE(wait_for_file(dir / "a-started", std::chrono::seconds(20)));
  std::vector<pid_t> waiters;
  for (int w = 0; w < k_waiters; ++w) {
    auto out = dir / ("out-w" + std::to_string(w));
    waiters.push_back(spawn_background(
        guard,
        exec_argv(cache, desc, out, {"kernel.o"}, good_script,
                  {"w" + std::to_string(w), counter.string(), object.string(), out.string()}, /*json_output=*/false),
        dir / ("w" + std::to_string(w) + ".out"), dir / ("w" + std::to_string(w) + ".err"), /*own_group=*/true));
  }
  sleep_ms(500);
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
  CHECK_FALSE(fs::exists(counter));  // no waiter ran its command after the failure

  auto has = opcache::test::run_cli(
      {"--cache-dir", cache.string(), "has", "--desc", desc.string(), "--scenario", k_test_scenario});
  CHECK(has.exit_code == 1);

  auto later = run_argv(exec_argv(cache, desc, dir / "out-later", {"kernel.o"}, good_script,
                                  {"later", counter.string(), object.string(), (dir / "out-later").string()}));
  INFO("later stderr: ", later.err);
  CHECK(later.exit_code == 0);
  CHECK(json_source(later.out) == "built");
  CHECK(builds_per_name(counter)["later"] == 1);
  has = opcache::test::run_cli(
      {"--cache-dir", cache.string(), "has", "--desc", desc.string(), "--scenario", k_test_scenario});
  CHECK(has.exit_code == 0);
}

// ---------------------------------------------------------------------------
// Wait timeouts

TEST_CASE("e2e::single flight wait ends with ErrorCode::timeout after wait_timeout_s (get_or_build)") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  const std::string descriptor = descriptor_for("sf_timeout", 2);

  ChildGuard guard;
  pid_t holder = fork_child(guard, [&]() -> int {
    auto store = Store::open(config_for(cache));
    if (!store) {
      return 10;
    }
    (void)store->get_or_build(descriptor, test_scenario(), dir / "out-a", [&](const fs::path&) {
      write_text(dir / "a-started", "started");
      sleep_ms(30000);
      return opcache::Status{};
    });
    return 0;
  });
  REQUIRE(wait_for_file(dir / "a-started", std::chrono::seconds(20)));
  pid_t waiter = fork_child(guard, [&]() -> int {
    StoreConfig config = config_for(cache);
    config.wait_timeout_s = 1;
    auto store = Store::open(config);
    if (!store) {
      return 10;
    }
    int calls = 0;
    const auto start = Clock::now();
    auto result = store->get_or_build(descriptor, test_scenario(), dir / "out-b", [&](const fs::path&) {
      ++calls;
      return opcache::Status{};
    });
    const auto elapsed = ms_since(start);
    write_text(dir / "b-result",
               std::to_string(result ? 0 : static_cast<int>(result.error().code())) + " " + std::to_string(elapsed) +
                   " " + std::to_string(calls) + " " + (result ? std::string() : result.error().message()));
    return 0;
  });
  CHECK(guard.wait(waiter) == 0);
  ::kill(holder, SIGKILL);
  guard.wait(holder);

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

TEST_CASE("e2e::single flight exec --wait-timeout 1 falls back to running the command uncached (opcache exec)") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  const fs::path object = compile_shared_object(dir);
  const fs::path desc = dir / "timeout.desc.json";
  write_text(desc, descriptor_for("sf_exec_timeout", 4));

  ChildGuard guard;
  pid_t holder = spawn_background(
      guard,
      exec_argv(cache, desc, dir / "out-a", {"kernel.o"}, "touch \"$0\"; exec sleep 30", {(dir / "a-started").string()}),
      dir / "a.out", dir / "a.err", /*own_group=*/true);
  REQUIRE(wait_for_file(dir / "a-started", std::chrono::seconds(20)));

  // A command that succeeds: exit 0, its output written, nothing stored.
  const auto start = Clock::now();
  auto fallback = run_argv(exec_argv(cache, desc, dir / "out-b", {"kernel.o"}, "cp \"$0\" \"$1/kernel.o\"",
                                     {object.string(), (dir / "out-b").string()}, /*json_output=*/false,
                                     {"--wait-timeout", "1"}));
  const auto elapsed = ms_since(start);
  INFO("stderr: ", fallback.err);
  CHECK(fallback.exit_code == 0);
  CHECK(elapsed >= 900);
  CHECK(elapsed < 15000);  // the 1 s wait, not the holder's 30 s (loose: starting the CLI under load)
  CHECK(fallback.err.find("warning") != std::string::npos);
  CHECK(fallback.err.find("without the cache") != std::string::npos);
  CHECK(read_text(dir / "out-b" / "kernel.o") == read_text(object));

  // A command that fails: exec exits with its status.
  auto failing = run_argv(exec_argv(cache, desc, dir / "out-c", {"kernel.o"}, "exit 5", {}, /*json_output=*/false,
                                    {"--wait-timeout", "1"}));
  INFO("stderr: ", failing.err);
  CHECK(failing.exit_code == 5);
  CHECK(failing.err.find("without the cache") != std::string::npos);

  ::kill(-holder, SIGKILL);
  guard.wait(holder);
  auto has = opcache::test::run_cli(
      {"--cache-dir", cache.string(), "has", "--desc", desc.string(), "--scenario", k_test_scenario});
  CHECK(has.exit_code == 1);
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

TEST_CASE("e2e::single flight C ABI opcache_get_or_build calls the callback once, then hits; a failure stores nothing") {
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
