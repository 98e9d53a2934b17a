// Team single flight end to end (docs/remotes.md "Team single flight"): one
// real `opcache serve` on loopback, separate cache directories standing for
// machines, and `opcache exec` processes on each. A shared counter file that
// every build appends "<kernel> <pid>" to shows who built what; each build
// writes its own pid into its output, so outputs that came from two builds
// would differ. Covered: 16 processes on 4 machines build each of 30 kernels
// once in total; a holder killed with SIGKILL is taken over after the lease
// TTL and leaves nothing locked; a stalled holder (SIGSTOP) that resumes
// does not replace the entry that was built meanwhile; a server killed in
// the middle of the run only makes the processes build locally.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/children.hpp"
#include "tests/support/files.hpp"
#include "tests/support/process.hpp"
#include "tests/support/server.hpp"
#include "tests/support/single_flight.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace opcache::test;
using namespace std::chrono_literals;

namespace {

// A build that takes `seconds`: appends "<kernel> <pid>" to the counter
// ($0), sleeps, then writes kernel.o naming its builder into the out dir ($2).
// With `hold_kernel_0_for` (a server URL), the build of kernel 0 first holds
// until the server's /metrics shows a request waiting for an entry (at most
// 120 s), so that another machine surely waits for this one however slow
// the machine running the test is (under a sanitizer, say).
std::string build_script(double seconds, const std::string& hold_kernel_0_for = "") {
  std::ostringstream script;
  script << "printf '%s %s\\n' \"$1\" \"$$\" >> \"$0\"; ";
  if (!hold_kernel_0_for.empty()) {
    script << "if [ \"$1\" = 0 ]; then i=0; while [ $i -lt 1200 ] && ! curl -sf -H 'Authorization: Bearer " << k_write_token
           << "' " << hold_kernel_0_for
           << "/metrics | grep -q '^opcache_entry_waits [1-9]'; do sleep 0.1; i=$((i+1)); done; fi; ";
  }
  script << "sleep " << seconds << "; printf 'kernel %s built by %s\\n' \"$1\" \"$$\" > \"$2/kernel.o\"";
  return script.str();
}

// The server, the kernels' descriptors, the counter, and the CLI arguments
// that make a process of one "machine" use the server.
struct FlightTeam {
  TempDir dir;
  std::unique_ptr<ServerProcess> server;
  fs::path counter = dir / "builds.log";
  std::vector<fs::path> descs;

  explicit FlightTeam(int kernels, std::vector<std::string> server_args = {}) {
    write_text(dir / "tokens", token_line(k_write_token, "team", "read,write"));
    write_text(dir / "token", k_write_token);
    server_args.insert(server_args.begin(), {"--tokens", (dir / "tokens").string()});
    server = std::make_unique<ServerProcess>(dir / "storage", server_args);
    for (int i = 0; i < kernels; ++i) {
      descs.push_back(dir / ("kernel" + std::to_string(i) + ".desc.json"));
      write_text(descs.back(), descriptor_for("TeamOp", i));
    }
  }

  fs::path cache(int machine) const { return dir / ("machine" + std::to_string(machine)); }

  std::vector<std::string> remote_args(const std::string& remote_attributes = "") const {
    return {"--remote", server->base_url() + "|upload" + remote_attributes, "--token-file", (dir / "token").string()};
  }

  // `opcache exec` of kernel `index` on `machine` into `out`.
  std::vector<std::string> exec(int machine, int index, const fs::path& out, double build_seconds,
                                std::vector<std::string> extra = {}) const {
    if (extra.empty()) {
      extra = remote_args();
    }
    return exec_argv(cache(machine), descs[static_cast<std::size_t>(index)], out, {"kernel.o"},
                     build_script(build_seconds, hold_kernel_0 ? server->base_url() : ""),
                     {counter.string(), std::to_string(index), out.string()}, JsonOutput::yes, extra);
  }

  // Whether the build of kernel 0 holds until a request waits for an entry.
  bool hold_kernel_0 = false;

  // Counter lines by kernel.
  std::map<std::string, int> builds() const {
    std::map<std::string, int> by_kernel;
    std::istringstream lines(fs::exists(counter) ? read_text(counter) : "");
    std::string kernel, pid;
    while (lines >> kernel >> pid) {
      ++by_kernel[kernel];
    }
    return by_kernel;
  }

  json stats(int machine) const {
    auto result = run_cli({"--cache-dir", cache(machine).string(), "--no-remote", "--json", "stats"});
    return json::parse(result.out, nullptr, false);
  }
};

std::int64_t counter_of(const json& stats, const std::string& name) {
  return stats.is_object() && stats["counters"].contains(name) ? stats["counters"][name].get<std::int64_t>() : 0;
}

// Runs `machines` x `per_machine` processes, each exec-ing every kernel once
// (each process starting at a different kernel), into dir/out/<m>-<p>/<k>.
// Returns the wall time; REQUIREs that every exec exited 0.
std::int64_t run_all(FlightTeam& team, int machines, int per_machine, double build_seconds,
                     const std::function<std::vector<std::string>(int machine)>& extra,
                     const std::function<void()>& meanwhile = {}) {
  ChildGuard guard;
  std::vector<pid_t> children;
  const auto started = Clock::now();
  const int kernels = static_cast<int>(team.descs.size());
  for (int m = 0; m < machines; ++m) {
    for (int p = 0; p < per_machine; ++p) {
      const int first = (m * per_machine + p) * 7 % kernels;
      children.push_back(fork_child(guard, [&, m, p, first]() -> int {
        for (int step = 0; step < kernels; ++step) {
          const int k = (first + step) % kernels;
          const auto out = team.dir / "out" / (std::to_string(m) + "-" + std::to_string(p)) / std::to_string(k);
          auto result = run_process(team.exec(m, k, out, build_seconds, extra(m)));
          if (result.exit_code != 0) {
            write_text(team.dir / ("failed-" + std::to_string(m) + "-" + std::to_string(p)),
                       "kernel " + std::to_string(k) + ": exit " + std::to_string(result.exit_code) + "\n" + result.err);
            return 1;
          }
        }
        return 0;
      }));
    }
  }
  if (meanwhile) {
    meanwhile();
  }
  for (auto pid : children) {
    const int status = guard.wait(pid);
    CHECK_MESSAGE(status == 0, "a process failed; see " << team.dir.path().string() << "/failed-*");
  }
  for (const auto& item : fs::directory_iterator(team.dir.path())) {
    if (item.path().filename().string().rfind("failed-", 0) == 0) {
      FAIL_CHECK(read_text(item.path()));
    }
  }
  return ms_since(started);
}

// Every process's output of each kernel: one distinct content per kernel.
std::map<int, std::set<std::string>> outputs(const FlightTeam& team) {
  std::map<int, std::set<std::string>> by_kernel;
  for (const auto& process : fs::directory_iterator(team.dir / "out")) {
    for (const auto& kernel : fs::directory_iterator(process.path())) {
      by_kernel[std::stoi(kernel.path().filename().string())].insert(read_text(kernel.path() / "kernel.o"));
    }
  }
  return by_kernel;
}

// Machine 0's exec of kernel 0 into out-a, in its own process group, with a
// build of `build_seconds`; returns once the build has started (it holds the lease).
pid_t start_holder(FlightTeam& team, ChildGuard& guard, double build_seconds) {
  SpawnOptions own_group;
  own_group.group = ProcessGroup::own;
  const pid_t holder = spawn_background(guard, team.exec(0, 0, team.dir / "out-a", build_seconds), own_group);
  wait_until([&] { return team.builds()["0"] == 1; }, 20s, "the holder to start building");
  return holder;
}

}  // namespace

TEST_CASE("e2e::team single flight: 16 processes on 4 machines build each of 30 kernels once in total and all get "
          "the same bytes") {
  hermetic_environment();
  FlightTeam team(30);
  team.hold_kernel_0 = true;  // so that team_waits > 0 on a machine of any speed
  const auto wall_ms = run_all(team, 4, 4, 0.5, [&](int) { return team.remote_args(); });
  MESSAGE("16 processes x 30 kernels (0.5 s builds) through one server: " << wall_ms << " ms");

  const auto builds = team.builds();
  CHECK(builds.size() == 30);
  for (const auto& [kernel, count] : builds) {
    CHECK_MESSAGE(count == 1, "kernel " << kernel << " was built " << count << " times");
  }
  const auto by_kernel = outputs(team);
  CHECK(by_kernel.size() == 30);
  for (const auto& [kernel, contents] : by_kernel) {
    CHECK_MESSAGE(contents.size() == 1, "kernel " << kernel << " has " << contents.size() << " different outputs");
  }
  std::int64_t team_builds = 0, team_waits = 0;
  for (int m = 0; m < 4; ++m) {
    const auto stats = team.stats(m);
    team_builds += counter_of(stats, "team_builds");
    team_waits += counter_of(stats, "team_waits");
  }
  CHECK(team_builds == 30);
  CHECK(team_waits > 0);
  auto text = run_cli({"--cache-dir", team.cache(0).string(), "--no-remote", "stats"});
  CHECK(text.out.find("team single flight") != std::string::npos);
  CHECK(text.out.find(std::to_string(counter_of(team.stats(0), "team_builds")) + " built here") != std::string::npos);  // with 16 processes starting at 16 places, some waited for another machine
  const auto status = json::parse(http_request("GET", team.server->base_url() + "/v1/status",
                                               {std::string("Authorization: Bearer ") + k_write_token})
                                      .body);
  CHECK(status["leases"]["granted"] == 30);
  CHECK(status["leases"]["active"] == 0);
  CHECK(status["entries"] == 30);
}

TEST_CASE("e2e::team single flight: a lease holder killed mid-build is taken over after the TTL, and nothing stays "
          "locked") {
  hermetic_environment();
  FlightTeam team(1, {"--lease-ttl", "1"});
  ChildGuard guard;
  const pid_t holder = start_holder(team, guard, 60);

  const pid_t waiter = spawn_background(guard, team.exec(1, 0, team.dir / "out-b", 0.1));
  wait_until(
      [&] {
        auto status = json::parse(http_request("GET", team.server->base_url() + "/v1/status",
                                               {std::string("Authorization: Bearer ") + k_write_token})
                                      .body);
        return status["leases"]["waiting"] == 1 || status["leases"]["refused"].get<int>() >= 1;
      },
      20s, "the second machine to find the lease held");
  guard.kill(holder);  // SIGKILL, mid-build
  CHECK(guard.wait(waiter) == 0);
  CHECK(team.builds()["0"] == 2);  // the killed build and the takeover
  CHECK(read_text(team.dir / "out-b" / "kernel.o").find("kernel 0 built by") == 0);

  // The killed holder's machine: nothing is locked, and it gets the taken-over build.
  auto again = run_process(team.exec(0, 0, team.dir / "out-a2", 0.1));
  CHECK_MESSAGE(again.exit_code == 0, again.err);
  CHECK(json_source(again.out) == "hit");
  CHECK(read_text(team.dir / "out-a2" / "kernel.o") == read_text(team.dir / "out-b" / "kernel.o"));
  CHECK(team.builds()["0"] == 2);
  CHECK(counter_of(team.stats(1), "team_takeovers") == 1);
}

TEST_CASE("e2e::team single flight: a holder stalled past the TTL (SIGSTOP) and resumed does not replace the entry "
          "built meanwhile") {
  hermetic_environment();
  FlightTeam team(1, {"--lease-ttl", "1"});
  ChildGuard guard;
  const pid_t stalled = start_holder(team, guard, 2);
  REQUIRE(::kill(-stalled, SIGSTOP) == 0);

  auto taker = run_process(team.exec(1, 0, team.dir / "out-b", 0.1));
  CHECK_MESSAGE(taker.exit_code == 0, taker.err);
  CHECK(json_source(taker.out) == "built");
  const auto taken = read_text(team.dir / "out-b" / "kernel.o");

  REQUIRE(::kill(-stalled, SIGCONT) == 0);
  CHECK(guard.wait(stalled) == 0);
  CHECK(read_text(team.dir / "out-a" / "kernel.o") != taken);  // two builds, two contents

  auto third = run_process(team.exec(2, 0, team.dir / "out-c", 0.1));
  CHECK_MESSAGE(third.exit_code == 0, third.err);
  CHECK(json_source(third.out) == "hit");
  CHECK(read_text(team.dir / "out-c" / "kernel.o") == taken);  // the server kept the entry built meanwhile
  auto verify = run_cli({"--cache-dir", team.cache(2).string(), "--no-remote", "verify"});
  CHECK(verify.exit_code == 0);
}

TEST_CASE("e2e::team single flight: when the server is killed in the middle of the run every process still "
          "finishes, building locally") {
  hermetic_environment();
  FlightTeam team(10);
  const auto wall_ms = run_all(
      team, 2, 2, 0.3, [&](int) { return team.remote_args("|timeout=2000|connect-timeout=500"); },
      [&] {
        wait_until([&] { return team.builds().size() >= 3; }, 30s, "the first builds");
        team.server->signal(SIGKILL);
      });
  MESSAGE("4 processes x 10 kernels, server killed after 3 builds: " << wall_ms << " ms");
  const auto by_kernel = outputs(team);
  CHECK(by_kernel.size() == 10);
  for (const auto& [kernel, contents] : by_kernel) {
    CHECK(!contents.empty());
  }
}
