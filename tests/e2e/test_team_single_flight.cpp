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
#include "tests/support/flight_team.hpp"
#include "tests/support/process.hpp"
#include "tests/support/server.hpp"
#include "tests/support/single_flight.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace opcache::test;
using namespace std::chrono_literals;


TEST_CASE("e2e::team single flight: 16 processes on 4 machines build each of 30 kernels once in total and all get "
          "the same bytes") {
  hermetic_environment();
  FlightTeam team(30);
  team.start_server(team.dir / "storage");
  team.hold_kernel_0 = true;  // so that team_waits > 0 on a machine of any speed
  const auto wall_ms = run_flight(team, 4, 4, 0.5, [&](int) { return team.remote_args(); });
  MESSAGE("16 processes x 30 kernels (0.5 s builds) through one server: " << wall_ms << " ms");

  const auto builds = team.builds();
  CHECK(builds.size() == 30);
  for (const auto& [kernel, count] : builds) {
    CHECK_MESSAGE(count == 1, "kernel " << kernel << " was built " << count << " times");
  }
  const auto by_kernel = flight_outputs(team);
  CHECK(by_kernel.size() == 30);
  for (const auto& [kernel, contents] : by_kernel) {
    CHECK_MESSAGE(contents.size() == 1, "kernel " << kernel << " has " << contents.size() << " different outputs");
  }
  std::int64_t team_builds = 0, team_waits = 0;
  for (int m = 0; m < 4; ++m) {
    const auto stats = team.stats(m);
    team_builds += stats_counter(stats, "team_builds");
    team_waits += stats_counter(stats, "team_waits");
  }
  CHECK(team_builds == 30);
  CHECK(team_waits > 0);
  auto text = run_cli({"--cache-dir", team.cache(0).string(), "--no-remote", "stats"});
  CHECK(text.out.find("team single flight") != std::string::npos);
  CHECK(text.out.find(std::to_string(stats_counter(team.stats(0), "team_builds")) + " built here") != std::string::npos);  // with 16 processes starting at 16 places, some waited for another machine
  const auto status = team.status(team.server());
  CHECK(status["leases"]["granted"] == 30);
  CHECK(status["leases"]["active"] == 0);
  CHECK(status["entries"] == 30);
}

TEST_CASE("e2e::team single flight: a lease holder killed mid-build is taken over after the TTL, and nothing stays "
          "locked") {
  hermetic_environment();
  FlightTeam team(1);
  team.start_server(team.dir / "storage", {"--lease-ttl", "1"});
  ChildGuard guard;
  const pid_t holder = start_flight_holder(team, guard, 60);

  const pid_t waiter = spawn_background(guard, team.exec(1, 0, team.dir / "out-b", 0.1));
  wait_until(
      [&] {
        auto status = team.status(team.server());
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
  CHECK(stats_counter(team.stats(1), "team_takeovers") == 1);
}

TEST_CASE("e2e::team single flight: a holder stalled past the TTL (SIGSTOP) and resumed does not replace the entry "
          "built meanwhile") {
  hermetic_environment();
  FlightTeam team(1);
  team.start_server(team.dir / "storage", {"--lease-ttl", "1"});
  ChildGuard guard;
  const pid_t stalled = start_flight_holder(team, guard, 2);
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
  team.start_server(team.dir / "storage");
  const auto wall_ms = run_flight(
      team, 2, 2, 0.3, [&](int) { return team.remote_args(0, "|timeout=2000|connect-timeout=500"); },
      [&] {
        wait_until([&] { return team.builds().size() >= 3; }, 30s, "the first builds");
        team.server().signal(SIGKILL);
      });
  MESSAGE("4 processes x 10 kernels, server killed after 3 builds: " << wall_ms << " ms");
  const auto by_kernel = flight_outputs(team);
  CHECK(by_kernel.size() == 10);
  for (const auto& [kernel, contents] : by_kernel) {
    CHECK(!contents.empty());
  }
}
