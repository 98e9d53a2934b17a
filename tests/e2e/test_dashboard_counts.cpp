// The dashboard counts kernels, not requests (docs/protocol.md "Statistics"):
// one real `opcache serve`, refcc compiling examples/models/transformer_block.json
// (48 distinct kernels) on "machines" that are separate cache directories,
// through the team cache. Checked: three machines (A builds and uploads, B
// with the same scenario gets everything, C with another toolchain builds
// its own) give exactly 48 hits and 96 misses and the compile time A
// recorded; a machine that pulls first and then compiles; four machines at
// once under team single flight, where each kernel is a miss once per build
// and a hit for every other machine. After each run /v1/status, /metrics,
// /v1/stats/summary, the time series, the tokens table and `opcache stats
// --remote` say the same.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/children.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/files.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/process.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"
#include "opcache_test_paths.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace opcache::test;

namespace dashboard_counts {

constexpr const char* k_rc2 = "device=single,phase=infer,toolchain=8.0.RC2,soc=Ascend910B1";
constexpr const char* k_rc3 = "device=single,phase=infer,toolchain=8.0.RC3,soc=Ascend910B1";
constexpr int k_model_kernels = 48;

std::string refcc_binary() {
  const fs::path flat = fs::path(OPCACHE_BINARY_DIR) / "refcc";
  return fs::is_regular_file(flat) ? flat.string() : (flat / "refcc").string();
}

std::string model_path() { return std::string(OPCACHE_SOURCE_DIR) + "/examples/models/transformer_block.json"; }

// The server and what a machine needs to use it.
struct Team {
  TempDir dir;
  std::unique_ptr<ServerProcess> server;

  // Machines on loopback share an address, and the server tells clients apart by token name and
  // address: each machine has a token of its own, as machines have addresses of their own.
  static constexpr const char* k_machines[] = {"a", "b", "c", "m0", "m1", "m2", "m3"};

  static std::string token_of(const std::string& machine) { return std::string(k_write_token) + "-" + machine; }

  Team() {
    std::string tokens = token_line(k_write_token, "team", "read,write") + token_line(k_admin_token, "boss", "admin");
    for (const char* machine : k_machines) {
      tokens += token_line(token_of(machine), machine, "read,write");
    }
    write_text(dir / "tokens", tokens);
    write_text(dir / "token", k_write_token);
    server = std::make_unique<ServerProcess>(dir / "storage", std::vector<std::string>{"--tokens", (dir / "tokens").string()});
  }

  ProcessOptions machine_env(const std::string& machine) const {
    ProcessOptions options = hermetic({{"OPCACHE_REMOTE", server->base_url() + "|upload"},
                                       {"OPCACHE_TOKEN", token_of(machine)}});  // the token itself
    options.unset_env.insert(options.unset_env.end(), {"DEVICE_ID", "CC"});
    return options;
  }

  // `refcc model` of the transformer block on `machine` in `scenario`; its JSON report.
  json compile(const std::string& machine, const std::string& scenario) const {
    auto result = run_process({refcc_binary(), "model", model_path(), "--out", (dir / machine / "kernel_meta").string(),
                               "--cache-dir", (dir / machine / "cache").string(), "--scenario", scenario, "--jobs", "2",
                               "--json"},
                              machine_env(machine));
    INFO("refcc on ", machine, ": ", result.err);
    REQUIRE(result.exit_code == 0);
    json report = json::parse(result.out);
    REQUIRE(report["distinct_kernels"] == k_model_kernels);
    REQUIRE(report["failed"] == 0);
    return report;
  }

  HttpResponse get(const std::string& path, const char* token = k_write_token) const {
    return http_request("GET", server->base_url() + path, {std::string("Authorization: Bearer ") + token});
  }
  json get_json(const std::string& path, const char* token = k_write_token) const {
    auto response = get(path, token);
    REQUIRE(response.status == 200);
    return json::parse(response.body);
  }
};

double metric(const std::string& text, const std::string& name) {
  const std::regex line("^" + std::regex_replace(name, std::regex(R"([{}"=])"), R"(\$&)") + " ([0-9.e+]+)$",
                        std::regex::multiline);
  std::smatch match;
  REQUIRE_MESSAGE(std::regex_search(text, match, line), name);
  return std::stod(match[1]);
}

// Every place that reports hits and misses says `hits` and `misses`.
void check_figures_agree(const Team& team, std::int64_t hits, std::int64_t misses) {
  // The server counts a request once it has answered it; the last one may still be on its way.
  json summary;
  wait_until(
      [&] {
        summary = team.get_json("/v1/stats/summary");
        return summary["hits"].get<std::int64_t>() + summary["misses"].get<std::int64_t>() >= hits + misses;
      },
      std::chrono::seconds(60), "the statistics to count every kernel");
  CHECK(summary["hits"] == hits);
  CHECK(summary["misses"] == misses);
  CHECK(summary["lookups"] == hits + misses);
  CHECK(summary["all_time"]["hits"] == hits);
  CHECK(summary["all_time"]["misses"] == misses);

  const json status = team.get_json("/v1/status");
  CHECK(status["hits"] == hits);
  CHECK(status["misses"] == misses);

  const std::string metrics = without_replica_label(team.get("/metrics").body);
  CHECK(metric(metrics, R"(opcache_kernel_lookups{result="hit"})") == static_cast<double>(hits));
  CHECK(metric(metrics, R"(opcache_kernel_lookups{result="miss"})") == static_cast<double>(misses));

  std::int64_t series_hits = 0;
  std::int64_t series_misses = 0;
  const json series = team.get_json("/v1/stats/timeseries?window=hour");
  INFO("timeseries: ", series.dump());
  for (const auto& point : series["points"]) {
    series_hits += point["hits"].get<std::int64_t>();
    series_misses += point["misses"].get<std::int64_t>();
  }
  CHECK(series_hits == hits);
  CHECK(series_misses == misses);

  std::int64_t token_hits = 0;
  std::int64_t token_misses = 0;
  const json tokens = team.get_json("/v1/stats/tokens", k_admin_token);
  INFO("tokens: ", tokens.dump());
  for (const auto& token : tokens["tokens"]) {
    token_hits += token["hits"].get<std::int64_t>();
    token_misses += token["misses"].get<std::int64_t>();
  }
  CHECK(token_hits == hits);
  CHECK(token_misses == misses);

  auto cli = run_cli({"--json", "stats", "--remote", team.server->base_url(), "--token-file",
                      (team.dir / "token").string()},
                     hermetic());
  INFO("opcache stats --remote: ", cli.err);
  REQUIRE(cli.exit_code == 0);
  const json printed = json::parse(cli.out);
  const json& printed_summary = printed.contains("summary") ? printed["summary"] : printed;
  CHECK(printed_summary["hits"] == hits);
  CHECK(printed_summary["misses"] == misses);
}

// (the test cases below stay in namespace dashboard_counts: the unity build shares helpers' names)

TEST_CASE("e2e::dashboard counts kernels: three machines give 48 hits, 96 misses and A's compile time saved") {
  Team team;
  const json a = team.compile("a", k_rc2);
  CHECK(a["builds"] == k_model_kernels);
  const json b = team.compile("b", k_rc2);  // an empty cache, the same scenario: all from the team cache
  CHECK(b["builds"] == 0);
  const json c = team.compile("c", k_rc3);  // another toolchain: its own kernels
  CHECK(c["builds"] == k_model_kernels);

  check_figures_agree(team, k_model_kernels, 2 * k_model_kernels);
  const json summary = team.get_json("/v1/stats/summary");
  const double saved = summary["compile_ms_saved"].get<double>();
  const double built = a["build_ms"].get<double>();
  INFO("compile time saved ", saved, " ms; A built for ", built, " ms");
  CHECK(saved > 0);
  CHECK(std::abs(saved - built) <= 0.3 * built);
  CHECK(summary["uploads"] == 2 * k_model_kernels);
  CHECK(team.get_json("/v1/stats/misses")["tracked_keys"] == 0);  // everything missed was built and uploaded
}

TEST_CASE("e2e::dashboard counts kernels: a machine that pulls first, then compiles, counts the pulled kernels once") {
  Team team;
  const json a = team.compile("a", k_rc2);
  CHECK(a["builds"] == k_model_kernels);
  write_text(team.dir / "b.token", Team::token_of("b"));
  auto pulled = run_cli({"--cache-dir", (team.dir / "b" / "cache").string(), "--remote", team.server->base_url(),
                         "--token-file", (team.dir / "b.token").string(), "pull", "--scenario", k_rc2},
                        hermetic());
  INFO("pull: ", pulled.err);
  REQUIRE(pulled.exit_code == 0);
  const json b = team.compile("b", k_rc2);
  CHECK(b["builds"] == 0);
  CHECK(b["hits"] == k_model_kernels);
  // Counted when transferred (docs/protocol.md): B's 48, A's 48 misses; B's run asked nothing more.
  check_figures_agree(team, k_model_kernels, k_model_kernels);
}

TEST_CASE("e2e::dashboard counts kernels: four machines at once under team single flight, one miss per build") {
  Team team;
  std::vector<ProcessResult> results(4);
  std::vector<std::thread> machines;
  for (std::size_t m = 0; m < results.size(); ++m) {
    const std::string name = "m" + std::to_string(m);
    machines.emplace_back([&team, &results, m, name] {
      results[m] = run_process({refcc_binary(), "model", model_path(), "--out", (team.dir / name / "kernel_meta").string(),
                                "--cache-dir", (team.dir / name / "cache").string(), "--scenario", k_rc2, "--jobs", "2",
                                "--json"},
                               team.machine_env(name));
    });
  }
  for (auto& machine : machines) {
    machine.join();
  }
  std::int64_t builds = 0;
  for (const auto& result : results) {
    INFO("refcc: ", result.err);
    REQUIRE(result.exit_code == 0);
    const json report = json::parse(result.out);
    REQUIRE(report["failed"] == 0);
    builds += report["builds"].get<std::int64_t>();
  }
  INFO("kernels built across the four machines: ", builds);
  CHECK(builds >= k_model_kernels);  // each kernel at least once; team single flight keeps most from building twice
  CHECK(builds < 2 * k_model_kernels);
  // Each machine asked for each kernel once: a miss where it built it, else a hit (waiters included).
  check_figures_agree(team, 4 * k_model_kernels - builds, builds);
}

}  // namespace dashboard_counts
