// A team of "machines" (cache directories) running `opcache exec` against
// one team server or several replicas, for the team single-flight tests
// (tests/e2e/test_team_single_flight.cpp, tests/e2e/test_replicas.cpp). A
// shared counter file that every build appends "<kernel> <pid>" to shows
// who built what; each build writes its own pid into its output, so outputs
// that came from two builds differ.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/children.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test {

/// A build that takes `seconds`: appends "<kernel> <pid>" to the counter
/// ($0), sleeps, then writes kernel.o naming its builder into the out dir
/// ($2). With `hold_kernel_0_for` (a server URL), the build of kernel 0 first
/// holds until that server's /metrics shows a request waiting for an entry
/// (at most 120 s), so that another machine surely waits for this one
/// however slow the machine running the test is.
std::string flight_build_script(double seconds, const std::string& hold_kernel_0_for = "");

/// The servers, the kernels' descriptors, the counter, and the CLI
/// arguments that make a process of one machine use a server.
struct FlightTeam {
  TempDir dir;
  /// One server, or the replicas over one bucket; machine m uses
  /// servers[m % size] unless `front_url` is set.
  std::vector<std::unique_ptr<ServerProcess>> servers;
  /// When not empty, every machine's URL (a proxy in front of the replicas).
  std::string front_url;
  std::filesystem::path counter = dir / "builds.log";
  std::vector<std::filesystem::path> descs;
  /// Whether the build of kernel 0 holds until a request waits for an entry
  /// on the first server.
  bool hold_kernel_0 = false;

  /// `kernels` descriptors, the tokens file and the token; no server yet.
  explicit FlightTeam(int kernels);

  /// Starts one server over `storage` with the team's tokens and `args`.
  ServerProcess& start_server(const std::filesystem::path& storage, std::vector<std::string> args = {});

  /// The first server.
  ServerProcess& server() const { return *servers.front(); }

  /// Machine `machine`'s cache directory.
  std::filesystem::path cache(int machine) const;

  /// The server URL machine `machine` uses.
  std::string url(int machine) const;

  /// `--remote URL|upload<attributes> --token-file …` of machine `machine`.
  std::vector<std::string> remote_args(int machine = 0, const std::string& remote_attributes = "") const;

  /// `opcache exec` of kernel `index` on `machine` into `out` (extra: the
  /// global options; empty means remote_args(machine)).
  std::vector<std::string> exec(int machine, int index, const std::filesystem::path& out, double build_seconds,
                                std::vector<std::string> extra = {}) const;

  /// Counter lines by kernel.
  std::map<std::string, int> builds() const;

  /// `opcache --json stats` of machine `machine`.
  nlohmann::json stats(int machine) const;

  /// GET /v1/status of `server` with the team's token.
  nlohmann::json status(const ServerProcess& server) const;
};

/// A counter of `opcache --json stats`, 0 when absent.
std::int64_t stats_counter(const nlohmann::json& stats, const std::string& name);

/// Runs `machines` x `per_machine` team members (threads of the test), each
/// exec-ing every kernel once (each process starting at a different kernel), into
/// dir/out/<m>-<p>/<k>, with `extra(machine)` as global options; runs
/// `meanwhile` after starting them. Returns the wall time in ms; CHECKs
/// that every exec exited 0 (naming the failures).
std::int64_t run_flight(FlightTeam& team, int machines, int per_machine, double build_seconds,
                        const std::function<std::vector<std::string>(int machine)>& extra,
                        const std::function<void()>& meanwhile = {});

/// Every process's output of each kernel: one distinct content per kernel
/// when each was built once.
std::map<int, std::set<std::string>> flight_outputs(const FlightTeam& team);

/// Machine 0's exec of kernel 0 into out-a, in its own process group, with
/// a build of `build_seconds`; returns once the build has started (it holds
/// the lease).
pid_t start_flight_holder(FlightTeam& team, ChildGuard& guard, double build_seconds);

}  // namespace opcache::test
