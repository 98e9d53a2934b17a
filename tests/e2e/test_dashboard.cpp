// The dashboard end to end (issue 13): a real `opcache serve` with a read, a
// write and an admin token, filled through the real CLI (put with build
// times, push, hits from a second cache directory, misses of two op types
// from two tokens), then tests/ui/dashboard.mjs opens /ui/ in headless
// Chromium and checks that the page shows exactly what /v1/stats/summary and
// /v1/status say, that the misses table starts with the op type missed most,
// that only the admin token sees the activity per token, and that the page
// asks nothing of another origin. Screenshots go to
// <build>/tests/output/dashboard/. Skipped (never passed) without node,
// playwright-core or a Chromium that starts.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache_test_paths.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/server.hpp"
#include "tests/support/single_flight.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace opcache::test;

namespace {

constexpr const char* k_most_missed = "Conv2D";
constexpr const char* k_rc1_scenario = "device=single,phase=train,toolchain=8.0.RC1,soc=Ascend910B1";

// Why the browser test cannot run here, or nothing when it can.
std::optional<std::string> browser_test_unavailable() {
  try {
    if (run_process({"node", "--version"}).exit_code != 0) {
      return "node does not run";
    }
  } catch (const std::exception& error) {
    return std::string("node is not installed (") + error.what() + ")";
  }
  if (!fs::exists(fs::path(OPCACHE_SOURCE_DIR) / "tests/ui/node_modules/playwright-core")) {
    return "tests/ui/node_modules/playwright-core is missing; install it with "
           "`npm ci --prefix tests/ui --no-audit --no-fund` (scripts/install-deps.sh does)";
  }
  return std::nullopt;
}

// The reason in dashboard.mjs's "OPCACHE_SKIP: <reason>" line.
std::string skip_reason(const std::string& out) {
  const std::string marker = "OPCACHE_SKIP: ";
  const auto at = out.find(marker);
  if (at == std::string::npos) {
    return "dashboard.mjs exited 77 without a reason";
  }
  const auto start = at + marker.size();
  return out.substr(start, out.find('\n', start) - start);
}

// The server and the token files of the three tokens.
struct DashboardTeam {
  TempDir dir;
  std::unique_ptr<ServerProcess> server;

  DashboardTeam() {
    write_text(dir / "tokens", token_line(k_read_token, "reader", "read") +
                                   token_line(k_write_token, "ci", "write") +
                                   token_line(k_admin_token, "boss", "admin"));
    write_text(dir / "read.token", k_read_token);
    write_text(dir / "write.token", k_write_token);
    write_text(dir / "admin.token", k_admin_token);
    server = std::make_unique<ServerProcess>(dir / "storage",
                                             std::vector<std::string>{"--tokens", (dir / "tokens").string()});
  }

  // `--remote URL --token-file <name>.token`, the server as the only remote.
  std::vector<std::string> remote(const std::string& token_name) const {
    return {"--remote", server->base_url(), "--token-file", (dir / (token_name + ".token")).string()};
  }

  json get_json(const std::string& path, const char* token) const {
    auto response = http_request("GET", server->base_url() + path, {std::string("Authorization: Bearer ") + token});
    INFO("GET ", path, ": ", response.status, " ", response.body);
    REQUIRE(response.status == 200);
    return json::parse(response.body);
  }
};

// `opcache get` of `desc` from the server into a fresh cache directory, so
// every call is a lookup on the server (with the op type and scenario hint
// headers); returns the exit code (0: a hit, 1: a miss).
int remote_get(const DashboardTeam& team, const fs::path& desc, const std::string& token_name,
               const std::string& label) {
  CliRunner machine(team.dir.path(), team.dir / ("cache-" + label));
  std::vector<std::string> args{
      "get", "--desc", desc.string(), "--scenario", k_test_scenario, "--out", (team.dir / ("out-" + label)).string()};
  auto remote = team.remote(token_name);
  args.insert(args.end(), remote.begin(), remote.end());
  auto result = machine.run(args);
  INFO("opcache ", CliRunner::join(args), "\n", result.err);
  return result.exit_code;
}

// Three kernels stored with build times and pushed by the write token; hits
// from the read and the write token (`opcache get` into fresh cache
// directories); misses, the same way: three Conv2D kernels asked for by both
// tokens, one Softmax kernel by one.
void fill(const DashboardTeam& team) {
  CliRunner builder(team.dir.path(), team.dir / "cache-builder");
  std::vector<fs::path> stored;
  int build_ms = 1500;
  for (const auto& [op, length] :
       std::vector<std::pair<std::string, int>>{{"MatMul", 16}, {"MatMul", 32}, {"Add", 64}}) {
    auto kernel = make_kernel(team.dir / "kernels", op, length);
    builder.put(kernel, k_test_scenario, {"--build-ms", std::to_string(build_ms)});
    stored.push_back(builder.descriptor_file(kernel));
    build_ms += 1000;
  }
  // The team has Softmax only for the older toolchain 8.0.RC1: the
  // Softmax misses below (8.0.RC2) show it as their nearest variant.
  builder.put(make_kernel(team.dir / "kernels", "Softmax", 8), k_rc1_scenario);
  auto push_args = team.remote("write");
  push_args.push_back("push");
  auto pushed = builder.run_json(push_args);
  REQUIRE(pushed["transferred"] == 4);

  int label = 0;
  for (const auto& desc : stored) {
    CHECK(remote_get(team, desc, "read", std::to_string(label++)) == 0);
  }
  CHECK(remote_get(team, stored[0], "write", std::to_string(label++)) == 0);

  for (int i = 0; i < 3; ++i) {
    const auto desc = team.dir / ("conv" + std::to_string(i) + ".desc.json");
    write_text(desc, descriptor_for(k_most_missed, i));
    CHECK(remote_get(team, desc, "read", std::to_string(label++)) == 1);
    CHECK(remote_get(team, desc, "write", std::to_string(label++)) == 1);
  }
  const auto softmax = team.dir / "softmax.desc.json";
  write_text(softmax, descriptor_for("Softmax", 0));
  CHECK(remote_get(team, softmax, "read", std::to_string(label++)) == 1);
}

}  // namespace

TEST_CASE(
    "e2e::dashboard shows the server's figures in headless Chromium, the most missed op type first and the "
    "activity per token only to an admin") {
  hermetic_environment();
  const auto unavailable = browser_test_unavailable();
  OPCACHE_SKIP_IF(unavailable.has_value(), *unavailable);

  DashboardTeam team;
  fill(team);
  const auto summary = team.get_json("/v1/stats/summary?window=day", k_read_token);
  CHECK(summary["hits"].get<int>() >= 4);
  CHECK(summary["misses"].get<int>() >= 7);
  CHECK(summary["uploads"] == 4);
  CHECK(summary["compile_ms_saved"].get<int>() > 0);
  const auto misses = team.get_json("/v1/stats/misses", k_read_token);
  REQUIRE(!misses["groups"].empty());
  CHECK(misses["groups"][0]["op_type"] == k_most_missed);
  CHECK(misses["groups"][0]["nearest"].is_null());  // no Conv2D anywhere
  for (const auto& group : misses["groups"]) {
    if (group["op_type"] == "Softmax") {
      CHECK(group["nearest"]["entries"] == 1);
      CHECK(group["nearest"]["differences"] ==
            json::parse(R"([{"path":"scenario.toolchain","stored":"8.0.RC1","wanted":"8.0.RC2"}])"));
    }
  }

  const fs::path out = fs::path(OPCACHE_BINARY_DIR) / "tests" / "output" / "dashboard";
  fs::create_directories(out);
  MESSAGE("dashboard screenshots: " << out.string());
  const std::vector<std::string> argv{"node",
                                      (fs::path(OPCACHE_SOURCE_DIR) / "tests/ui/dashboard.mjs").string(),
                                      "--url",
                                      team.server->base_url(),
                                      "--read-token-file",
                                      (team.dir / "read.token").string(),
                                      "--admin-token-file",
                                      (team.dir / "admin.token").string(),
                                      "--expect-op-type",
                                      k_most_missed,
                                      "--token-names",
                                      "reader,ci",
                                      "--out",
                                      out.string()};
  auto browser = run_process(argv);
  MESSAGE(browser.out);
  if (browser.exit_code == 77) {
    report_skip(skip_reason(browser.out));
    return;
  }
  INFO("stdout:\n", browser.out, "\nstderr:\n", browser.err, "\nserver log:\n", team.server->log_text());
  CHECK(browser.exit_code == 0);
}
