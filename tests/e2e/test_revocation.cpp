// Revocation end to end (docs/remotes.md "Revocation"): one real `opcache
// serve`, four cache directories standing for machines that hold a kernel,
// `opcache revoke` with an admin token; after each machine's next contact
// (an `opcache exec`, or an `opcache pull`) none serves the kernel, exec
// rebuilds it, and a second server over the same storage refuses it too.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.hpp"
#include "tests/support/process.hpp"
#include "tests/support/server.hpp"
#include "tests/support/single_flight.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace opcache::test;

namespace {

constexpr int k_machines = 4;

// A build that appends "<machine> <pid>" to the counter ($0) and writes
// kernel.o naming its builder into the out dir ($2).
const std::string k_build_script =
    "printf '%s %s\\n' \"$1\" \"$$\" >> \"$0\"; printf 'kernel built by %s\\n' \"$$\" > \"$2/kernel.o\"";

struct RevocationTeam {
  TempDir dir;
  fs::path storage = dir / "storage";
  std::unique_ptr<ServerProcess> server;
  fs::path desc = dir / "kernel.desc.json";
  fs::path counter = dir / "builds.log";

  RevocationTeam() {
    write_text(dir / "tokens", token_line(k_admin_token, "admin", "admin") +
                                   token_line(k_write_token, "team", "read,write"));
    write_text(dir / "team.token", k_write_token);
    write_text(dir / "admin.token", k_admin_token);
    server = std::make_unique<ServerProcess>(storage, std::vector<std::string>{"--tokens", (dir / "tokens").string()});
    write_text(desc, descriptor_for("RevokedOp", 7));
  }

  fs::path cache(int machine) const { return dir / ("machine" + std::to_string(machine)); }

  // The global options of a machine's processes: the server, the team
  // token, and a revocation check on every use (so "the next contact" needs
  // no waiting).
  std::vector<std::string> remote_args(const std::string& token = "team.token") const {
    return {"--remote", server->base_url() + "|upload", "--token-file", (dir / token).string(),
            "--revocation-check-interval", "0", "--team-single-flight", "false"};
  }

  ProcessResult exec(int machine, const std::string& run) const {
    const auto out = dir / "out" / (std::to_string(machine) + "-" + run);
    return run_process(exec_argv(cache(machine), desc, out, {"kernel.o"}, k_build_script,
                                 {counter.string(), std::to_string(machine), out.string()}, JsonOutput::yes,
                                 remote_args()),
                       hermetic());
  }

  ProcessResult cli(int machine, std::vector<std::string> args, const std::string& token = "team.token") const {
    std::vector<std::string> argv = {"--cache-dir", cache(machine).string()};
    const auto remote = remote_args(token);
    argv.insert(argv.end(), remote.begin(), remote.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return run_cli(argv, hermetic());
  }

  int builds() const {
    std::istringstream lines(fs::exists(counter) ? read_text(counter) : "");
    int count = 0;
    for (std::string line; std::getline(lines, line);) {
      count += line.empty() ? 0 : 1;
    }
    return count;
  }
};

json parsed(const ProcessResult& result) {
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  auto document = json::parse(result.out, nullptr, false);
  REQUIRE(document.is_object());
  return document;
}

}  // namespace

TEST_CASE("e2e::revocation: a kernel revoked on the server leaves all 4 machines at their next contact, exec "
          "rebuilds it, and a second server over the same storage refuses it") {
  RevocationTeam team;
  // Machine 0 builds the kernel and pushes it; machines 1 to 3 get it from the server.
  auto first = team.exec(0, "first");
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  CHECK(json_source(first.out) == "built");
  REQUIRE(team.cli(0, {"push"}).exit_code == 0);
  for (int machine = 1; machine < k_machines; ++machine) {
    auto hit = team.exec(machine, "first");
    REQUIRE_MESSAGE(hit.exit_code == 0, hit.err);
    CHECK(json_source(hit.out) == "hit");
  }
  CHECK(team.builds() == 1);
  const std::string key = parsed(first)["key"];
  auto key_of = run_cli({"--cache-dir", team.cache(0).string(), "--no-remote", "key", "--desc", team.desc.string(),
                         "--scenario", k_test_scenario},
                        hermetic());
  CHECK(key_of.out.substr(0, 64) == key);  // --key-on descriptor: the key opcache put and key use
  for (int machine = 0; machine < k_machines; ++machine) {
    CHECK(team.cli(machine, {"--no-remote", "has", key}).exit_code == 0);
  }

  // A team token may not revoke; an admin token may.
  auto refused = team.cli(k_machines, {"revoke", key, "--reason", "wrong results"});
  CHECK(refused.exit_code == 4);
  CHECK(refused.err.find("403") != std::string::npos);
  auto revoked = team.cli(k_machines, {"--json", "revoke", key, "--reason", "wrong results on Ascend910B1"},
                          "admin.token");
  REQUIRE_MESSAGE(revoked.exit_code == 0, revoked.err);
  CHECK(parsed(revoked)["revoked"] == json::array({{{"key", key}, {"deleted", true}}}));
  CHECK(fs::exists(team.storage / "revocations" / (key + ".json")));
  auto gone = http_request("GET", team.server->base_url() + "/v1/entries/" + key,
                           {std::string("Authorization: Bearer ") + k_write_token});
  CHECK(gone.status == 410);

  // Machines 0 and 1: the next contact is a compile. The revocation list
  // purges the copy, the server answers 410 (a miss, not a failure), exec builds.
  for (int machine = 0; machine < 2; ++machine) {
    auto rebuilt = team.exec(machine, "after");
    REQUIRE_MESSAGE(rebuilt.exit_code == 0, rebuilt.err);
    CHECK(json_source(rebuilt.out) == "built");
    CHECK(rebuilt.err.find("wrong results on Ascend910B1") != std::string::npos);
    CHECK(rebuilt.err.find("failed") == std::string::npos);
  }
  CHECK(team.builds() == 3);
  // Machines 2 and 3: the next contact is a pull; nothing serves the kernel after it.
  for (int machine = 2; machine < k_machines; ++machine) {
    auto pulled = team.cli(machine, {"pull"});
    CHECK_MESSAGE(pulled.exit_code == 0, pulled.err);
    CHECK(team.cli(machine, {"--no-remote", "has", key}).exit_code == 1);
    auto get = team.cli(machine, {"get", key, "--out", (team.dir / "got" / std::to_string(machine)).string()});
    CHECK(get.exit_code == 1);
    auto stats = parsed(run_cli({"--cache-dir", team.cache(machine).string(), "--json", "stats"}, hermetic()));
    CHECK(pulled.err.find("deleted " + key + " from the local store") != std::string::npos);
    CHECK(stats["counters"]["revoked"] == 1);
  }
  for (int machine = 0; machine < 2; ++machine) {
    CHECK(read_text(team.dir / "out" / (std::to_string(machine) + "-after") / "kernel.o").find("kernel built by") == 0);
  }

  // A second replica over the same storage agrees, and refuses the upload too.
  ServerProcess replica(team.storage, {"--tokens", (team.dir / "tokens").string()});
  auto from_replica = http_request("GET", replica.base_url() + "/v1/entries/" + key,
                                   {std::string("Authorization: Bearer ") + k_write_token});
  CHECK(from_replica.status == 410);
  CHECK(json::parse(from_replica.body)["reason"] == "wrong results on Ascend910B1");
  auto push = run_cli({"--cache-dir", team.cache(0).string(), "--remote", replica.base_url(), "--token-file",
                       (team.dir / "team.token").string(), "push"},
                      hermetic());
  CHECK(push.exit_code != 0);
  CHECK(push.err.find("revoked") != std::string::npos);
  CHECK(http_request("HEAD", replica.base_url() + "/v1/entries/" + key,
                     {std::string("Authorization: Bearer ") + k_write_token})
            .status == 410);

  // Unrevoked, the kernel may be shared again.
  auto unrevoked = team.cli(k_machines, {"unrevoke", key}, "admin.token");
  CHECK_MESSAGE(unrevoked.exit_code == 0, unrevoked.err);
  REQUIRE(team.cli(0, {"push"}).exit_code == 0);
  CHECK(http_request("HEAD", replica.base_url() + "/v1/entries/" + key,
                     {std::string("Authorization: Bearer ") + k_write_token})
            .status == 200);
}
