// `opcache explain` (cli/cmd_explain, api/explain, server/api_explain): the
// nearest stored entries of an op type and what differs, in this cache and
// on a real `opcache serve`; the one-line hint a miss prints; exit 0 for an
// exact entry, 1 otherwise.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/api_schema.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace opcache::test;

namespace {

constexpr const char* k_rc2 = "device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1";
constexpr const char* k_rc3 = "device=single,phase=train,toolchain=8.0.RC3,soc=Ascend910B1";

// The differences of the first of `nearest` that is in `where`.
json differences_in(const json& document, const std::string& where) {
  for (const auto& entry : document["nearest"]) {
    if (entry["where"] == where) {
      return entry["differences"];
    }
  }
  return json();
}

}  // namespace

TEST_CASE("cli::explain names the scenario field that keeps a lookup from its stored kernel, and the miss says so") {
  TempDir temp;
  CliRunner cli(temp);
  auto kernel = make_kernel(temp / "k", "add", 64);
  cli.put(kernel, k_rc2);
  const auto desc = cli.descriptor_file(kernel).string();

  auto miss = cli.run({"get", "--desc", desc, "--scenario", k_rc3, "--out", (temp / "out").string()}, hermetic());
  CHECK(miss.exit_code == 1);
  CHECK(contains(miss.err, "miss: no entry for"));
  CHECK(contains(miss.err, "`opcache explain` with the same --desc and --scenario"));

  auto text = cli.run({"explain", "--desc", desc, "--scenario", k_rc3}, hermetic());
  INFO(text.out, text.err);
  CHECK(text.exit_code == 1);
  CHECK(contains(text.out, "scenario.toolchain: stored \"8.0.RC2\", asked \"8.0.RC3\""));
  CHECK(contains(text.out, "1 difference"));

  auto document = cli.run_json({"explain", "--desc", desc, "--scenario", k_rc3}, 1);
  CHECK(document["exact"] == false);
  REQUIRE(document["nearest"].size() == 1);
  CHECK(document["nearest"][0]["where"] == "local");
  CHECK(differences_in(document, "local") ==
        json::parse(R"([{"path":"scenario.toolchain","stored":"8.0.RC2","wanted":"8.0.RC3"}])"));

  auto exact = cli.run_json({"explain", "--desc", desc, "--scenario", k_rc2}, 0);
  CHECK(exact["exact"] == true);
  CHECK(exact["nearest"][0]["differences"].empty());

  // Another op type: nothing to compare, no hint.
  auto other = make_kernel(temp / "o", "square", 64);
  const auto other_desc = cli.descriptor_file(other).string();
  auto quiet = cli.run({"get", "--desc", other_desc, "--scenario", k_rc3, "--out", (temp / "out2").string()}, hermetic());
  CHECK(quiet.exit_code == 1);
  CHECK_FALSE(contains(quiet.err, "opcache explain"));
  auto none = cli.run({"explain", "--desc", other_desc, "--scenario", k_rc3}, hermetic());
  CHECK(none.exit_code == 1);
  CHECK(contains(none.out, "no stored entry of op type"));
}

TEST_CASE("cli::explain asks a team server too, whose POST /v1/explain answers by its schema") {
  TempDir temp;
  CliRunner storage(temp.path(), temp / "storage");
  auto kernel = make_kernel(temp / "k", "add", 64);
  storage.put(kernel, k_rc2);
  ServerProcess server(temp / "storage", {"--anonymous-read"});
  const auto desc = storage.descriptor_file(kernel).string();

  // A fresh machine's cache, with the server as its remote.
  CliRunner fresh(temp.path(), temp / "fresh");
  auto document = fresh.run_json({"--remote", server.base_url(), "explain", "--desc", desc, "--scenario", k_rc3}, 1);
  CHECK(document["exact"] == false);
  CHECK(document["unanswered"].empty());
  CHECK(differences_in(document, server.base_url()) ==
        json::parse(R"([{"path":"scenario.toolchain","stored":"8.0.RC2","wanted":"8.0.RC3"}])"));
  auto exact = fresh.run_json({"--remote", server.base_url(), "explain", "--desc", desc, "--scenario", k_rc2}, 0);
  CHECK(exact["exact"] == true);

  // The route itself.
  const json request = {{"descriptor", json::parse(kernel.descriptor_json)},
                        {"scenario", {{"device_mode", "single"}, {"phase", "train"}, {"toolchain", "8.0.RC3"}, {"soc", "Ascend910B1"}}},
                        {"limit", 3}};
  CHECK(schema_errors("explain-request.schema.json", request).empty());
  auto response = http_request("POST", server.base_url() + "/v1/explain", {"Content-Type: application/json"}, request.dump());
  REQUIRE(response.status == 200);
  auto answer = json::parse(response.body);
  CHECK(schema_errors("explain-response.schema.json", answer).empty());
  CHECK(answer["compared"] == 1);
  auto bad = http_request("POST", server.base_url() + "/v1/explain", {"Content-Type: application/json"},
                          R"({"descriptor":{"op_type":"Add"}})");
  CHECK(bad.status == 400);
}

TEST_CASE("cli::explain of an exec command names the input its last build read that changed") {
  TempDir temp;
  CliRunner cli(temp);
  write_text(temp / "desc.json", R"({"op_type":"Scale"})");
  write_text(temp / "scale.h", "#define FACTOR 3\n");
  write_text(temp / "scale.c", "#include \"scale.h\"\nint scale(int x) { return x * FACTOR; }\n");
  auto options = hermetic();
  options.cwd = temp.path().string();
  const std::vector<std::string> exec_tail{"--desc", "desc.json", "--scenario", k_rc2, "--out", "out", "--",
                                           "gcc", "-O2", "-c", "scale.c", "-o", "out/scale.o"};
  std::vector<std::string> exec{"exec"};
  exec.insert(exec.end(), exec_tail.begin(), exec_tail.end());
  std::vector<std::string> explain{"--json", "explain"};
  explain.insert(explain.end(), exec_tail.begin(), exec_tail.end());

  auto never = cli.run(explain, options);
  CHECK(never.exit_code == 1);
  CHECK(json::parse(never.out)["exec"]["reason"].get<std::string>().find("never built") != std::string::npos);
  REQUIRE(cli.run(exec, options).exit_code == 0);
  auto same = cli.run(explain, options);
  CHECK(same.exit_code == 0);
  CHECK(json::parse(same.out)["exec"]["hit"] == true);

  write_text(temp / "scale.h", "#define FACTOR 5\n");
  auto result = cli.run(explain, options);
  INFO(result.out, result.err);
  CHECK(result.exit_code == 1);
  auto document = json::parse(result.out);
  CHECK(document["exec"]["hit"] == false);
  CHECK(document["exec"]["reason"] == "scale.h changed");
  std::vector<std::string> text_explain(explain.begin() + 1, explain.end());
  CHECK(contains(cli.run(text_explain, options).out, "miss: scale.h changed"));

  // The rebuilt exec names it too, in its one-line miss note.
  auto rebuilt = cli.run(exec, options);
  CHECK(rebuilt.exit_code == 0);
  CHECK(contains(rebuilt.err, "miss: scale.h changed since the last build of this command"));
}
