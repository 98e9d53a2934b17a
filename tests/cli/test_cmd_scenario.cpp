// `opcache scenario` (cli/cmd_scenario.cpp) through the real binary: the
// resolved scenario, --explain's inputs, --json, exit statuses, and npu-smi's
// answer remembered in <cache>/digests.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/cann_tree.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

namespace {

namespace fs = std::filesystem;
using opcache::test::CannTree;
using opcache::test::CliRunner;
using opcache::test::contains;
using opcache::test::hermetic;
using opcache::test::TempDir;

// A machine with a CANN install, a tuning bank, npu-smi and python3 stand-ins.
struct CannMachine {
  TempDir dir;
  CliRunner cli{dir};
  fs::path bin = dir / "bin";
  CannTree tree{dir / "Ascend/ascend-toolkit/8.0.RC2"};
  fs::path npu_smi_runs = dir / "npu-smi.runs";
  std::map<std::string, std::string> env;

  CannMachine() {
    tree.write();
    opcache::test::write_tune_bank(dir / "aoe_cache/aoe_data", "Ascend910B1");
    opcache::test::write_npu_smi(bin, {"910B1", "910B1"}, npu_smi_runs);
    opcache::test::write_python3(bin, "3.9");
    env = {{"PATH", bin.string() + ":/usr/bin:/bin"},
           {"ASCEND_TOOLKIT_HOME", tree.root.string()},
           {"ASCEND_CACHE_PATH", (dir / "aoe_cache").string()},
           {"HOME", (dir / "home").string()},
           {"OPCACHE_DIR", cli.cache().string()}};
  }
};

}  // namespace

TEST_CASE("cli::scenario --explain --json prints the resolved scenario and every input") {
  CannMachine machine;
  auto document = machine.cli.run_json({"scenario", "--scenario", "device=multi,phase=train", "--explain"}, 0,
                                       hermetic(machine.env));
  INFO(document.dump());
  const auto& scenario = document.at("scenario");
  CHECK(scenario.at("device_mode") == "multi");
  CHECK(scenario.at("phase") == "train");
  CHECK(scenario.at("toolchain") == "8.0.RC2");
  CHECK(scenario.at("soc") == "Ascend910B1");
  const auto& extra = scenario.at("extra");
  CHECK(extra.at("cann.compiler") == "8.0.RC2");
  CHECK(extra.at("cann.opp") == "8.0.RC2");
  CHECK(extra.at("cann.runtime") == "8.0.RC2");
  CHECK(extra.at("cann.opp_kernel") == "8.0.RC2");
  CHECK(extra.at("python") == "3.9");
  CHECK(extra.at("cann.tune_bank").get<std::string>().size() == 16);
  CHECK(extra.at("cann.fusion_strategy").get<std::string>().size() == 16);
  CHECK(document.at("canonical").get<std::string>() == scenario.dump());
  CHECK(contains(document.at("summary").get<std::string>(), "multi/train/8.0.RC2/Ascend910B1"));
  CHECK_FALSE(contains(document.at("canonical").get<std::string>(), machine.dir.path().string()));

  std::map<std::string, nlohmann::json> inputs;
  for (const auto& input : document.at("inputs")) {
    inputs[input.at("name").get<std::string>()] = input;
  }
  for (const char* name : {"device_mode", "phase", "toolchain", "soc", "extra.cann.compiler", "extra.cann.opp",
                           "extra.cann.runtime", "extra.cann.opp_kernel", "extra.cann.tune_bank",
                           "extra.cann.fusion_strategy", "extra.python", "driver"}) {
    CAPTURE(name);
    REQUIRE(inputs.count(name) == 1);
    CHECK(inputs[name].at("source").get<std::string>() != "");
  }
  CHECK(contains(inputs["toolchain"].at("source"), "compiler/version.info"));
  CHECK(contains(inputs["soc"].at("source"), "npu-smi"));
  CHECK(contains(inputs["extra.cann.tune_bank"].at("source"), "aoe_data/Ascend910B1"));
  CHECK(inputs["driver"].at("keyed") == false);
  CHECK(inputs["toolchain"].at("keyed") == true);

  // The text form says the same.
  auto text = machine.cli.run({"scenario", "--scenario", "device=multi,phase=train", "--explain"},
                              hermetic(machine.env));
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "scenario:  multi/train/8.0.RC2/Ascend910B1"));
  CHECK(contains(text.out, "canonical: " + scenario.dump()));
  CHECK(contains(text.out, "[not keyed]"));
}

TEST_CASE("cli::scenario gives the key of explicit fields as before, and another for an upgraded opp") {
  CannMachine machine;
  auto explicit_fields = machine.cli.run_json(
      {"scenario", "--scenario", "device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1"}, 0,
      hermetic(machine.env));
  CHECK(explicit_fields.at("canonical") ==
        R"({"device_mode":"multi","phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC2"})");
  CHECK(opcache::test::count_lines(machine.npu_smi_runs) == 0);

  auto before = machine.cli.run_json({"scenario", "--scenario", "phase=train"}, 0, hermetic(machine.env));
  machine.tree.set_version("opp", "8.0.RC3");
  auto after = machine.cli.run_json({"scenario", "--scenario", "phase=train"}, 0, hermetic(machine.env));
  CHECK(before.at("scenario").at("extra").at("cann.opp") == "8.0.RC2");
  CHECK(after.at("scenario").at("extra").at("cann.opp") == "8.0.RC3");
  CHECK(before.at("canonical") != after.at("canonical"));

  // opcache key follows the same resolution.
  opcache::test::write_text(machine.dir / "d.json", R"({"op_type":"Add"})");
  auto key_auto = machine.cli.run_json({"key", "--desc", (machine.dir / "d.json").string(), "--scenario", "phase=train"},
                                       0, hermetic(machine.env));
  CHECK(key_auto.at("scenario_canonical") == after.at("canonical"));
}

TEST_CASE("cli::scenario remembers npu-smi's answer in the cache root's digests") {
  CannMachine machine;
  SUBCASE("no cache root yet: nothing is remembered") {
    for (int i = 0; i < 2; ++i) {
      REQUIRE(machine.cli.run({"scenario", "--scenario", "phase=infer,toolchain=8.0.RC2"}, hermetic(machine.env))
                  .exit_code == 0);
    }
    CHECK(opcache::test::count_lines(machine.npu_smi_runs) == 2);
    CHECK_FALSE(fs::exists(machine.cli.cache() / "digests"));
  }
  SUBCASE("with a cache root: npu-smi runs once") {
    fs::create_directories(machine.cli.cache());
    opcache::test::age_past_digest_too_new();  // a just-written npu-smi is not remembered
    for (int i = 0; i < 3; ++i) {
      auto document = machine.cli.run_json({"scenario", "--scenario", "phase=infer,toolchain=8.0.RC2"}, 0,
                                           hermetic(machine.env));
      CHECK(document.at("scenario").at("soc") == "Ascend910B1");
    }
    CHECK(opcache::test::count_lines(machine.npu_smi_runs) == 1);
    CHECK(fs::is_directory(machine.cli.cache() / "digests"));
  }
}

TEST_CASE("cli::scenario exits 2 naming what to set when detection fails, and --help has an example") {
  TempDir dir;
  CliRunner cli(dir);
  fs::create_directories(dir / "bin");
  const auto options = hermetic({{"PATH", (dir / "bin").string() + ":/usr/bin:/bin"}});
  auto no_install = cli.run({"scenario", "--scenario", "phase=train,soc=Ascend910B1"}, options);
  CHECK(no_install.exit_code == 2);
  CHECK(contains(no_install.err, "toolchain=auto: no CANN install found"));
  CHECK(contains(no_install.err, "set toolchain=VERSION or ASCEND_TOOLKIT_HOME"));
  auto no_npu_smi = cli.run_json({"scenario", "--scenario", "phase=train,toolchain=8.0.RC2"}, 2, options);
  CHECK(no_npu_smi.at("error") == "usage");
  CHECK(contains(no_npu_smi.at("message").get<std::string>(), "soc=auto"));
  auto missing = cli.run({"scenario"}, options);
  CHECK(missing.exit_code == 2);
  auto help = cli.run({"scenario", "--help"}, options);
  CHECK(help.exit_code == 0);
  CHECK(contains(help.out, "opcache scenario --scenario phase=train --explain"));
  CHECK(contains(help.out, "--explain"));
}

TEST_CASE("cli::scenario and key note once on stderr when an explicit toolchain differs from the install") {
  CannMachine machine;  // 8.0.RC2 installed
  const std::string spec = "device=multi,phase=train,toolchain=8.0.RC3,soc=Ascend910B1";
  const std::string note =
      "note: toolchain=8.0.RC3 is given explicitly, but the CANN install the op compiler loads is 8.0.RC2";
  auto said = [&note](const std::string& err) {
    std::size_t count = 0;
    for (auto at = err.find(note); at != std::string::npos; at = err.find(note, at + 1)) {
      ++count;
    }
    return count;
  };
  auto explained = machine.cli.run({"scenario", "--scenario", spec, "--explain"}, hermetic(machine.env));
  INFO(explained.err);
  REQUIRE(explained.exit_code == 0);
  CHECK(said(explained.err) == 1);
  CHECK(contains(explained.out, "installed_toolchain"));
  auto document = machine.cli.run_json({"scenario", "--scenario", spec, "--explain"}, 0, hermetic(machine.env));
  CHECK(document.at("canonical") ==
        R"({"device_mode":"multi","phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC3"})");
  bool shown = false;
  for (const auto& input : document.at("inputs")) {
    if (input.at("name") == "installed_toolchain") {
      shown = true;
      CHECK(input.at("value") == "8.0.RC2");
      CHECK(input.at("keyed") == false);
    }
  }
  CHECK(shown);

  opcache::test::write_text(machine.dir / "d.json", R"({"op_type":"Add"})");
  auto key =
      machine.cli.run({"key", "--desc", (machine.dir / "d.json").string(), "--scenario", spec}, hermetic(machine.env));
  REQUIRE(key.exit_code == 0);
  CHECK(said(key.err) == 1);
  auto agreeing = machine.cli.run(
      {"scenario", "--scenario", "device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1"}, hermetic(machine.env));
  REQUIRE(agreeing.exit_code == 0);
  CHECK_FALSE(contains(agreeing.err, "given explicitly"));
}
