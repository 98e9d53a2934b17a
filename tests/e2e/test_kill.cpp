// The kill test: writers are killed with SIGKILL at random moments, hundreds
// of times, and afterwards the store must be sound. Writers are the real CLI
// (`put`, `put --replace` of a different build of the same kernel, `rm`, `gc`,
// `verify --repair`, `get --out`) and forked children that loop puts and gets
// through the library. After the storm, `opcache verify` finds nothing
// served wrong (only orphans and stale temps, which --repair removes), every
// pool kernel is either a miss or byte-exact one of the versions ever written,
// no get --out directory holds a partial member, and the store keeps working.
//
// The seed is printed; OPCACHE_KILL_SEED=<n> replays a run.
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

#include "opcache/opcache.hpp"
#include "base/sha256.hpp"
#include "tests/support/children.hpp"
#include "tests/support/files.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/single_flight.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace opcache::test;

namespace {


// A pool kernel: its descriptor file, key, and the versions ever written for it.
struct PoolKernel {
  fs::path desc;
  std::string key;
  std::string descriptor_json;
  std::vector<fs::path> plain;     // make_kernel's triple
  std::vector<fs::path> replaced;  // same member names, a different .o (and .json)
  Files plain_files;
  Files replaced_files;
};

// The triple of `kernel` rebuilt from a different source: same names, other bytes.
std::vector<fs::path> make_replacement(const fs::path& dir, const KernelTriple& kernel, int variant) {
  auto object = opcache::test::compile_object(
      dir, kernel.stem,
      "float " + kernel.stem + "__kernel0(const float* x, float* y) {\n  y[0] = x[0] * " +
          std::to_string(variant + 2) + ".5f;\n  return y[0] + " + std::to_string(variant) + ".0f;\n}\n");
  auto meta = json::parse(read_text(kernel.metadata));
  meta["sha256"] = opcache::base::sha256_hex(read_text(object));
  meta["rebuilt"] = true;
  auto metadata = dir / kernel.metadata.filename();
  write_text(metadata, meta.dump());
  auto info = dir / kernel.info.filename();
  fs::copy_file(kernel.info, info);
  return {object, metadata, info};
}

// What is in an output directory: regular members, and anything else.
struct OutDirState {
  Files members;                     // non-hidden regular files
  std::vector<std::string> temps;    // hidden ".opcache-*.tmp" files
  std::vector<std::string> strange;  // anything else
};

OutDirState inspect(const fs::path& dir) {
  OutDirState state;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    std::string name = item.path().filename().string();
    if (name.rfind(".opcache-", 0) == 0 && name.size() > 4 && name.substr(name.size() - 4) == ".tmp") {
      state.temps.push_back(name);
    } else if (item.is_regular_file() && !item.is_symlink() && name[0] != '.') {
      state.members[name] = read_text(item.path());
    } else {
      state.strange.push_back(name);
    }
  }
  return state;
}

// True when every member in `members` is byte-exact the member of the same
// name of one single version (a killed get may have renamed only some).
bool subset_of_one_version(const Files& members, const PoolKernel& kernel) {
  for (const Files* version : {&kernel.plain_files, &kernel.replaced_files}) {
    bool all = true;
    for (const auto& [name, bytes] : members) {
      auto it = version->find(name);
      all = all && it != version->end() && it->second == bytes;
    }
    if (all) {
      return true;
    }
  }
  return false;
}

bool equals_one_version(const Files& members, const PoolKernel& kernel) {
  return members == kernel.plain_files || members == kernel.replaced_files;
}

// Kills `pid` with SIGKILL and reaps it. True when the kill ended it (false
// when it had already exited; `exit_code` is set then).
bool kill_and_reap(pid_t pid, int& exit_code) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    exit_code = 128 + WTERMSIG(status);
    return WTERMSIG(status) == SIGKILL;
  }
  exit_code = WEXITSTATUS(status);
  return false;
}

// A forked writer that loops puts (plain, replace, replace with the other
// build) and gets through the library until it is killed.
[[noreturn]] void library_writer(const fs::path& cache, const std::vector<PoolKernel>& pool, std::uint64_t seed,
                                 const fs::path& gets_dir) {
  int code = 0;
  try {
    opcache::StoreConfig config;
    config.cache_dir = cache;
    config.on_warning = [](const std::string&) {};
    auto store = opcache::Store::open(config);
    if (!store) {
      ::_exit(10);
    }
    auto scenario = opcache::parse_scenario(k_test_scenario);
    std::mt19937_64 random(seed);
    const auto give_up = Clock::now() + std::chrono::seconds(20);  // never outlive the test
    for (int n = 0; Clock::now() < give_up; ++n) {
      const auto& kernel = pool[random() % pool.size()];
      const int action = static_cast<int>(random() % 4);
      if (action == 3) {
        auto out = gets_dir / (std::to_string(&kernel - pool.data()) + "-" + std::to_string(::getpid()) + "-" +
                               std::to_string(n));
        (void)store->get(kernel.key, out);
        continue;
      }
      opcache::PutOptions options;
      options.replace = action == 0 ? opcache::ReplacePolicy::keep_existing : opcache::ReplacePolicy::replace;
      auto put = store->put(kernel.descriptor_json, *scenario, action == 2 ? kernel.replaced : kernel.plain, options);
      if (!put) {
        ::_exit(11);  // a put must not fail, killed or not
      }
    }
  } catch (...) {
    code = 12;
  }
  ::_exit(code);
}

std::vector<std::string> cli_args(const fs::path& cache, std::vector<std::string> args) {
  std::vector<std::string> argv{opcache::test::cli_path(), "--cache-dir", cache.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> put_args(const fs::path& cache, const PoolKernel& kernel, bool replace,
                                  const std::vector<fs::path>& files) {
  std::vector<std::string> args{"put", "--desc", kernel.desc.string(), "--scenario", k_test_scenario};
  if (replace) {
    args.push_back("--replace");
  }
  for (const auto& file : files) {
    args.push_back(file.string());
  }
  return cli_args(cache, args);
}

// How long a command takes when nobody kills it, in microseconds.
int duration_us(const std::vector<std::string>& argv) {
  const auto start = Clock::now();
  wait_exit(spawn_process(argv));
  return static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
}

// Problem kinds in a `verify --json` document.
std::multiset<std::string> problem_kinds(const json& report) {
  std::multiset<std::string> kinds;
  if (report.contains("problems") && report["problems"].is_array()) {
    for (const auto& problem : report["problems"]) {
      kinds.insert(problem.value("kind", std::string("?")));
    }
  }
  return kinds;
}

std::vector<PoolKernel> make_pool(const TempDir& dir, const fs::path& cache) {
  std::vector<PoolKernel> pool;
  int index = 0;
  for (const char* op : {"square", "relu", "neg", "add"}) {
    for (int length : {3, 5, 7, 11, 13}) {
      auto kernel = opcache::test::make_kernel(dir / "pool" / std::to_string(index), op, length);
      PoolKernel entry;
      entry.descriptor_json = kernel.descriptor_json;
      entry.desc = dir / "desc" / (std::to_string(index) + ".json");
      write_text(entry.desc, kernel.descriptor_json);
      entry.plain = kernel.files();
      entry.replaced = make_replacement(dir / "replaced" / std::to_string(index), kernel, index);
      entry.plain_files = read_files(entry.plain);
      entry.replaced_files = read_files(entry.replaced);
      auto key = opcache::test::run_cli(
          {"--cache-dir", cache.string(), "key", "--desc", entry.desc.string(), "--scenario", k_test_scenario});
      REQUIRE(key.exit_code == 0);
      entry.key = key.out.substr(0, key.out.find('\n'));
      REQUIRE(entry.key.size() == 64);
      REQUIRE(entry.plain_files != entry.replaced_files);
      pool.push_back(std::move(entry));
      ++index;
    }
  }
  return pool;
}

}  // namespace

TEST_CASE("e2e::kill SIGKILL of 200+ writers at random moments leaves a sound store") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  auto pool = make_pool(dir, cache);

  std::uint64_t seed = std::random_device{}();
  if (const char* fixed = std::getenv("OPCACHE_KILL_SEED")) {
    seed = std::strtoull(fixed, nullptr, 10);
  }
  MESSAGE("kill test seed ", seed, " (replay with OPCACHE_KILL_SEED=", seed, ")");
  INFO("seed ", seed);
  std::mt19937_64 random(seed);
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<std::uint64_t>(n)); };

  // The storm goes on until 250 writers were killed, however long that takes
  // on this machine: a run ends by a count, not by the clock. About two in
  // three iterations kill (the others finished first): ten iterations a kill
  // only catch a storm that no longer kills anything.
  constexpr int k_max_kills = 250;
  constexpr int k_min_kills = 200;
  constexpr int k_max_iterations = 10 * k_max_kills;
  int kills = 0;
  int iterations = 0;
  std::map<std::string, int> kills_by_kind;
  std::map<std::string, int> finished_by_kind;
  std::vector<std::string> unexpected;  // writers that exited on their own with a wrong status
  std::vector<std::string> bad_gets;    // get --out directories holding something wrong
  int gets_checked = 0;
  const fs::path lib_gets = dir / "lib-gets";
  fs::create_directories(lib_gets);

  // Half of the kills land in the first 15 ms (start-up, opening the index),
  // half anywhere in the command's whole run (writing, fsync, publishing):
  // measure each kind of command once, unkilled.
  std::map<std::string, int> run_us;
  run_us["put"] = duration_us(put_args(cache, pool[0], false, pool[0].plain));
  run_us["put --replace (rebuilt)"] = duration_us(put_args(cache, pool[0], true, pool[0].replaced));
  run_us["put --replace (plain)"] = duration_us(put_args(cache, pool[0], true, pool[0].plain));
  run_us["get --out"] = duration_us(cli_args(cache, {"get", pool[0].key, "--out", (dir / "calibrate").string()}));
  run_us["rm"] = duration_us(cli_args(cache, {"rm", pool[0].key}));
  run_us["gc"] = duration_us(cli_args(cache, {"gc"}));
  run_us["verify --repair"] = duration_us(cli_args(cache, {"verify", "--repair"}));
  std::string timings;
  for (const auto& [kind, us] : run_us) {
    timings += " " + kind + "=" + std::to_string(us / 1000) + "ms";
  }
  MESSAGE("unkilled run times:", timings);

  const auto start = Clock::now();
  while (kills < k_max_kills && iterations < k_max_iterations) {
    ++iterations;
    const auto& kernel = pool[pick(static_cast<int>(pool.size()))];
    const int roll = pick(100);
    std::string kind;
    std::set<int> allowed_exits{0};
    fs::path get_out;
    pid_t pid = 0;
    int delay_us = pick(15001);  // 0–15 ms; see below
    if (roll < 30) {
      kind = "put";
      pid = spawn_process(put_args(cache, kernel, false, kernel.plain));
    } else if (roll < 45) {
      kind = "put --replace (rebuilt)";
      pid = spawn_process(put_args(cache, kernel, true, kernel.replaced));
    } else if (roll < 52) {
      kind = "put --replace (plain)";
      pid = spawn_process(put_args(cache, kernel, true, kernel.plain));
    } else if (roll < 60) {
      kind = "rm";
      allowed_exits = {0, 1};
      pid = spawn_process(cli_args(cache, {"rm", kernel.key}));
    } else if (roll < 63) {
      kind = "gc";
      pid = spawn_process(cli_args(cache, {"gc"}));
    } else if (roll < 66) {
      kind = "verify --repair";
      allowed_exits = {0};
      pid = spawn_process(cli_args(cache, {"verify", "--repair"}));
    } else if (roll < 82) {
      kind = "get --out";
      allowed_exits = {0, 1};
      get_out = dir / "gets" / std::to_string(iterations);
      pid = spawn_process(cli_args(cache, {"get", kernel.key, "--out", get_out.string()}));
    } else {
      kind = "library writer";
      delay_us = 2000 + pick(40001);  // let it get through open() and into its puts
      std::fflush(nullptr);
      pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        library_writer(cache, pool, seed ^ (static_cast<std::uint64_t>(iterations) << 20), lib_gets);
      }
    }
    if (kind != "library writer" && pick(2) == 0) {
      delay_us = pick(std::min(run_us[kind] * 6 / 5, 400000) + 1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    int exit_code = 0;
    if (kill_and_reap(pid, exit_code)) {
      ++kills;
      ++kills_by_kind[kind];
    } else {
      ++finished_by_kind[kind];
      if (kind == "library writer" || allowed_exits.count(exit_code) == 0) {
        unexpected.push_back(kind + " exited " + std::to_string(exit_code) + " (iteration " +
                             std::to_string(iterations) + ")");
      }
    }
    if (!get_out.empty()) {
      ++gets_checked;
      auto state = inspect(get_out);
      const bool finished = exit_code == 0 || exit_code == 1;
      bool good = state.strange.empty() && subset_of_one_version(state.members, kernel);
      if (finished && exit_code == 0) {
        good = good && equals_one_version(state.members, kernel) && state.temps.empty();
      } else if (finished && exit_code == 1) {
        good = good && state.members.empty();
      }
      if (!good) {
        bad_gets.push_back(get_out.string() + " (" + kind + ", exit " + std::to_string(exit_code) + ", " +
                           std::to_string(state.members.size()) + " members, " + std::to_string(state.strange.size()) +
                           " strange)");
      }
    }
  }
  const auto storm_ms = ms_since(start);
  std::string summary;
  for (const auto& [kind, count] : kills_by_kind) {
    summary += " " + kind + "=" + std::to_string(count);
  }
  std::string finished_summary;
  for (const auto& [kind, count] : finished_by_kind) {
    finished_summary += " " + kind + "=" + std::to_string(count);
  }
  MESSAGE(kills, " SIGKILLs in ", iterations, " iterations, ", storm_ms, " ms; killed:", summary,
          "; finished before the kill:", finished_summary);
  CHECK(kills >= k_min_kills);
  for (const auto& line : unexpected) {
    FAIL_CHECK("writer exited on its own with an unexpected status: ", line);
  }
  for (const auto& line : bad_gets) {
    FAIL_CHECK("get --out directory with a partial or wrong member: ", line);
  }
  CHECK(gets_checked > 0);

  // Gets the library writers were killed in: never a partial or wrong member.
  int lib_get_dirs = 0;
  for (const auto& item : fs::directory_iterator(lib_gets)) {
    ++lib_get_dirs;
    auto name = item.path().filename().string();
    const auto& kernel = pool[std::stoul(name.substr(0, name.find('-')))];
    auto state = inspect(item.path());
    INFO("library get directory ", name);
    CHECK(state.strange.empty());
    CHECK(subset_of_one_version(state.members, kernel));
  }
  MESSAGE(gets_checked, " CLI get directories and ", lib_get_dirs, " library get directories checked");

  // verify: nothing served wrong; only orphans and stale temps may be left.
  {
    auto verify = opcache::test::run_cli({"--cache-dir", cache.string(), "--json", "verify"});
    auto report = json::parse(verify.out, nullptr, false);
    REQUIRE_MESSAGE(report.is_object(), verify.out, verify.err);
    auto kinds = problem_kinds(report);
    MESSAGE("verify after the storm: ", report.value("entries_checked", -1), " entries, ",
            kinds.count("orphan_object"), " orphan objects, ", kinds.count("stale_temp"), " stale temps");
    CHECK((verify.exit_code == 0 || verify.exit_code == 3));
    for (const auto& problem : report["problems"]) {
      const std::string kind = problem.value("kind", std::string("?"));
      // A record a reader wrote back while a removal it raced was killed.
      CHECK_MESSAGE((kind == "orphan_object" || kind == "stale_temp" || kind == "stale_key_record"),
                    "verify found ", problem.dump());
    }
  }
  {
    auto repair = opcache::test::run_cli({"--cache-dir", cache.string(), "--json", "verify", "--repair"});
    auto repaired = json::parse(repair.out, nullptr, false);
    REQUIRE(repaired.is_object());
    CHECK(repair.exit_code == 0);
    CHECK(repaired.value("ok", false));
    for (const auto& problem : repaired["problems"]) {
      CHECK_MESSAGE(problem.value("repaired", false), "verify --repair left ", problem.dump());
    }
    auto again = opcache::test::run_cli({"--cache-dir", cache.string(), "--json", "verify"});
    INFO("second verify: ", again.out, again.err);
    CHECK(again.exit_code == 0);
    auto clean = json::parse(again.out, nullptr, false);
    REQUIRE(clean.is_object());
    CHECK(clean.value("ok", false));
    CHECK(problem_kinds(clean).empty());
  }

  // Every pool kernel is a miss or byte-exact one version ever written.
  int hits = 0;
  for (std::size_t i = 0; i < pool.size(); ++i) {
    auto out = dir / "final" / std::to_string(i);
    auto get = opcache::test::run_cli({"--cache-dir", cache.string(), "get", pool[i].key, "--out", out.string()});
    INFO("kernel ", i, ": exit ", get.exit_code, " ", get.err);
    REQUIRE((get.exit_code == 0 || get.exit_code == 1));
    CHECK(get.err.find("warning") == std::string::npos);  // no entry had to be dropped
    auto state = inspect(out);
    CHECK(state.temps.empty());
    CHECK(state.strange.empty());
    if (get.exit_code == 0) {
      ++hits;
      CHECK(equals_one_version(state.members, pool[i]));
    } else {
      CHECK(state.members.empty());
    }
  }
  MESSAGE(hits, " of ", pool.size(), " pool kernels present after the storm");

  // The store keeps working: through the CLI and through the library.
  auto fresh = opcache::test::make_kernel(dir / "fresh", "square", 1999);
  auto fresh_desc = dir / "fresh.desc.json";
  write_text(fresh_desc, fresh.descriptor_json);
  std::vector<std::string> put{"--cache-dir", cache.string(), "put", "--desc", fresh_desc.string(), "--scenario",
                               k_test_scenario};
  for (const auto& file : fresh.files()) {
    put.push_back(file.string());
  }
  auto stored = opcache::test::run_cli(put);
  INFO("put: ", stored.err);
  REQUIRE(stored.exit_code == 0);
  auto fetched = opcache::test::run_cli({"--cache-dir", cache.string(), "get", "--desc", fresh_desc.string(),
                                         "--scenario", k_test_scenario, "--out", (dir / "fresh-out").string()});
  REQUIRE(fetched.exit_code == 0);
  CHECK(read_files(fresh.files()) == inspect(dir / "fresh-out").members);

  opcache::StoreConfig config;
  config.cache_dir = cache;
  auto store = opcache::Store::open(config);
  REQUIRE(store.ok());
  auto scenario = opcache::parse_scenario(k_test_scenario);
  REQUIRE(scenario.ok());
  auto lib_kernel = opcache::test::make_kernel(dir / "lib", "relu", 1999);
  auto lib_put = store->put(lib_kernel.descriptor_json, *scenario, lib_kernel.files());
  REQUIRE(lib_put.ok());
  CHECK(lib_put->stored);
  auto lib_get = store->get(lib_put->key, dir / "lib-out");
  REQUIRE(lib_get.ok());
  REQUIRE(lib_get->has_value());
  CHECK(read_files(lib_kernel.files()) == inspect(dir / "lib-out").members);
}

namespace {

// Where check_kill_during_removal kills the removing process.
enum class KillPoint {
  after_unlink,   // the object is gone: the row must be gone too
  before_unlink,  // the row is gone, the object is not yet: an orphan, which verify --repair removes
};

// A deterministic look at two instants of the storm: a removal (`opcache rm`,
// `opcache clear`) killed right after its index transaction committed but
// before it unlinked the object, and right after it unlinked the object. The
// docs (formats.md "Store layout") promise that a kill -9 at any instant
// leaves at most an orphan object or a temp file, never a row without its
// object: the row's deletion is committed before the object is unlinked.
// strace's fault injection holds the process at its unlink syscalls, which
// makes the window wide enough to kill it in.
void check_kill_during_removal(const std::vector<std::string>& command, bool key_argument, KillPoint point) {
  hermetic_environment();
  auto strace = opcache::test::run_process({"sh", "-c", "command -v strace && strace -f -o /dev/null true"});
  if (strace.exit_code != 0) {
    MESSAGE("strace with ptrace is not available here; skipped");
    return;
  }
  TempDir dir;
  const fs::path cache = dir / "cache";
  auto kernel = opcache::test::make_kernel(dir / "kernel", "neg", 77);
  auto desc = dir / "desc.json";
  write_text(desc, kernel.descriptor_json);
  std::vector<std::string> put{"--cache-dir", cache.string(), "--json", "put", "--desc", desc.string(), "--scenario",
                               k_test_scenario};
  for (const auto& file : kernel.files()) {
    put.push_back(file.string());
  }
  auto stored = opcache::test::run_cli(put);
  REQUIRE(stored.exit_code == 0);
  auto document = json::parse(stored.out);
  const std::string key = document["key"];
  const std::string digest = document["digest"];
  const fs::path object = cache / "objects" / digest.substr(0, 2) / digest;
  REQUIRE(fs::exists(object));

  // Every unlink is held for 20 s, before or after it runs; the test kills the
  // process long before that, so the hold costs no time.
  // (From the second unlink on: the first is the key record's, erased before
  // the row so that no kill leaves a record naming a removed entry's object.)
  const std::string inject = point == KillPoint::after_unlink
                                 ? "inject=unlink,unlinkat:delay_exit=20000000:when=2+"
                                 : "inject=unlink,unlinkat:delay_enter=20000000:when=2+";
  std::vector<std::string> argv{"strace", "-f", "-o", "/dev/null", "-e", "trace=unlink,unlinkat", "-e", inject,
                                opcache::test::cli_path(), "--cache-dir", cache.string()};
  argv.insert(argv.end(), command.begin(), command.end());
  if (key_argument) {
    argv.push_back(key);
  }
  ChildGuard guard;
  SpawnOptions in_own_group;
  in_own_group.group = ProcessGroup::own;
  pid_t pid = spawn_background(guard, argv, in_own_group);
  const bool reached = poll_until(
      [&] {
        if (point == KillPoint::after_unlink) {
          std::error_code ec;
          return !fs::exists(object, ec);
        }
        // `has` exits 1 once the row's removal is committed; the remover is
        // then held at the unlink of the object (or before it).
        return run_cli({"--cache-dir", cache.string(), "has", key}).exit_code == 1;
      },
      std::chrono::seconds(15));
  guard.kill(pid);
  REQUIRE_MESSAGE(reached, command[0], (point == KillPoint::after_unlink ? " did not unlink the object"
                                                                          : " did not commit the removal"),
                  " within 15 s");
  std::error_code ec;
  CHECK(fs::exists(object, ec) == (point == KillPoint::before_unlink));

  auto verify = opcache::test::run_cli({"--cache-dir", cache.string(), "--json", "verify"});
  INFO("verify: ", verify.out, verify.err);
  auto report = json::parse(verify.out, nullptr, false);
  REQUIRE(report.is_object());
  auto kinds = problem_kinds(report);
  CHECK(kinds.count("missing_object") == 0);
  CHECK(report.value("entries_checked", -1) == 0);
  if (point == KillPoint::after_unlink) {
    CHECK(kinds.empty());
    CHECK(verify.exit_code == 0);
  } else {
    // The orphan is reported, and --repair removes it.
    CHECK(kinds == std::multiset<std::string>{"orphan_object"});
    CHECK(verify.exit_code == 3);
    auto repair = opcache::test::run_cli({"--cache-dir", cache.string(), "--json", "verify", "--repair"});
    INFO("verify --repair: ", repair.out, repair.err);
    CHECK(repair.exit_code == 0);
    auto repaired = json::parse(repair.out, nullptr, false);
    REQUIRE(repaired.is_object());
    for (const auto& problem : repaired["problems"]) {
      CHECK_MESSAGE(problem.value("repaired", false), "verify --repair left ", problem.dump());
    }
    CHECK_FALSE(fs::exists(object, ec));
    auto clean = opcache::test::run_cli({"--cache-dir", cache.string(), "verify"});
    CHECK(clean.exit_code == 0);
  }
  // Whatever state it is in, a get must not be served wrong: it is a miss.
  auto get = opcache::test::run_cli({"--cache-dir", cache.string(), "get", key, "--out", (dir / "out").string()});
  CHECK(get.exit_code == 1);
  CHECK(get.err.find("warning") == std::string::npos);  // no row had to be dropped
  // And the store keeps working: the same kernel can be stored and read again.
  auto again = opcache::test::run_cli(put);
  REQUIRE(again.exit_code == 0);
  auto hit = opcache::test::run_cli({"--cache-dir", cache.string(), "get", key, "--out", (dir / "out2").string()});
  CHECK(hit.exit_code == 0);
  CHECK(read_files(kernel.files()) == inspect(dir / "out2").members);
}

}  // namespace

TEST_CASE("e2e::kill SIGKILL of rm between unlinking the object and committing leaves no row without its object") {
  check_kill_during_removal({"rm"}, /*key_argument=*/true, KillPoint::after_unlink);
  check_kill_during_removal({"rm"}, /*key_argument=*/true, KillPoint::before_unlink);
}

TEST_CASE("e2e::kill SIGKILL of clear around unlinking an object leaves no row without its object") {
  check_kill_during_removal({"clear"}, /*key_argument=*/false, KillPoint::after_unlink);
  check_kill_during_removal({"clear"}, /*key_argument=*/false, KillPoint::before_unlink);
}
