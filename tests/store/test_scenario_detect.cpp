// Detected scenario fields (store/scenario_detect, store/cann_install, and
// the `auto` handling of store/scenario): what enters the scenario from a
// CANN install laid out as the vendor does, a tuning bank, python3 and
// npu-smi, and what must not (paths, unrelated files).
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/key.hpp"
#include "opcache/scenario.hpp"
#include "store/cann_install.hpp"
#include "store/explain.hpp"
#include "store/scenario.hpp"
#include "store/scenario_detect.hpp"
#include "tests/support/cann_tree.hpp"
#include "tests/support/expect_usage.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

using opcache::test::expect_usage;

namespace {

namespace fs = std::filesystem;
using opcache::ErrorCode;
using opcache::Result;
using opcache::Scenario;
using opcache::ScenarioInput;
using opcache::base::EnvLookup;
using opcache::store::AutoResolution;
using opcache::store::DetectContext;
using opcache::test::CannTree;
using opcache::test::TempDir;

constexpr const char* k_square_descriptor = R"({"op_type":"Square","inputs":[{"shape":[3],"dtype":"float32"}]})";

// The example of docs/formats.md, "Detected scenario fields (`auto`)".
constexpr std::string_view k_docs_example_scenario =
    R"({"device_mode":"multi","extra":{"cann.compiler":"8.0.RC2","cann.fusion_strategy":"bbdfcf26b12d06ba",)"
    R"("cann.opp":"8.0.RC2","cann.opp_kernel":"8.0.RC2","cann.runtime":"8.0.RC2","cann.tune_bank":"c37d4ce2d2aacb6a",)"
    R"("python":"3.9"},"phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC2"})";
constexpr std::string_view k_docs_example_key = "86ee138205f6c85bf052886466a47603532fd1a0fa7a20992864b871966b879d";

// A machine: its environment variables, its bin directory with stand-ins,
// and its digest cache, all inside one temp directory.
struct Machine {
  TempDir dir;
  std::map<std::string, std::string> env;
  fs::path bin = dir / "bin";
  fs::path npu_smi_runs = dir / "npu-smi.runs";
  fs::path python_runs = dir / "python.runs";

  Machine() {
    fs::create_directories(bin);
    env["PATH"] = bin.string();
    env["HOME"] = (dir / "home").string();
    opcache::test::write_python3(bin, "3.9", python_runs);
    opcache::test::write_text(dir / "boot_id", "6a1b1c1d-0000-4000-8000-000000000001\n");
  }

  DetectContext context() const {
    DetectContext context;
    context.env = [variables = env](const char* name) -> std::optional<std::string> {
      auto it = variables.find(name);
      return it == variables.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    context.cache = opcache::base::DigestCache(dir / "digests");
    context.default_cann_root = dir / "no-default-install";
    context.driver_version_file = dir / "driver/version.info";
    context.boot_id_file = dir / "boot_id";
    return context;
  }

  Result<Scenario> resolve(const std::string& spec, std::vector<ScenarioInput>* inputs = nullptr,
                           std::vector<std::string>* notes = nullptr) const {
    AutoResolution resolution;
    resolution.mode = AutoResolution::Mode::detect;
    resolution.context = [this] { return context(); };
    resolution.inputs = inputs;
    resolution.note = [notes](const std::string& message) {
      if (notes != nullptr) {
        notes->push_back(message);
      }
    };
    const DetectContext detect = context();
    return opcache::store::parse_scenario_spec(spec, detect.env, resolution);
  }

  std::string key(const std::string& spec) const {
    auto scenario = resolve(spec);
    INFO("spec: " << spec << "; " << (scenario ? "" : scenario.error().message()));
    REQUIRE(scenario.ok());
    auto key = opcache::derive_key(k_square_descriptor, *scenario, std::nullopt);
    REQUIRE(key.ok());
    return *key;
  }

  // resolve() that must succeed.
  Scenario resolved(const std::string& spec, std::vector<ScenarioInput>* inputs = nullptr) const {
    auto scenario = resolve(spec, inputs);
    INFO("spec: " << spec << "; " << (scenario ? "" : scenario.error().message()));
    REQUIRE(scenario.ok());
    return *scenario;
  }
};

// The fields in which two resolved scenarios differ, as `opcache explain`
// names them (store/explain): "scenario.extra[\"cann.opp\"]"…
std::vector<std::string> scenario_differences(const Scenario& stored, const Scenario& wanted) {
  std::vector<std::string> paths;
  for (const auto& difference : opcache::store::json_differences(
           opcache::store::scenario_to_json(stored), opcache::store::scenario_to_json(wanted), "scenario")) {
    paths.push_back(difference.path);
  }
  return paths;
}

// The one difference naming the extra entry `name`.
std::vector<std::string> only_extra(const std::string& name) {
  return {"scenario.extra[\"" + name + "\"]"};
}

// The source an input of `inputs` was read from ("" when there is none).
std::string input_source(const std::vector<ScenarioInput>& inputs, const std::string& name) {
  for (const auto& input : inputs) {
    if (input.name == name) {
      return input.source;
    }
  }
  return "";
}

}  // namespace

TEST_CASE("store::scenario_detect resolves toolchain=auto from the CANN install's version files, banks and python3") {
  Machine machine;
  CannTree tree{machine.dir / "Ascend/ascend-toolkit/8.0.RC2"};
  tree.versions["opp"] = "8.0.RC2.alpha003";
  tree.write();
  machine.env["ASCEND_TOOLKIT_HOME"] = tree.root.string();
  machine.env["ASCEND_CACHE_PATH"] = (machine.dir / "cache_path").string();
  opcache::test::write_tune_bank(machine.dir / "cache_path/aoe_data", "Ascend910B1");

  std::vector<ScenarioInput> inputs;
  auto scenario = machine.resolve("device=multi,phase=train,toolchain=auto,soc=Ascend910B1", &inputs);
  INFO((scenario ? "" : scenario.error().message()));
  REQUIRE(scenario.ok());
  CHECK(scenario->toolchain == "8.0.RC2");
  CHECK(scenario->soc == "Ascend910B1");
  CHECK(scenario->extra.at("cann.compiler") == "8.0.RC2");
  CHECK(scenario->extra.at("cann.opp") == "8.0.RC2.alpha003");
  CHECK(scenario->extra.at("cann.runtime") == "8.0.RC2");
  CHECK(scenario->extra.at("cann.opp_kernel") == "8.0.RC2");
  CHECK(scenario->extra.count("cann.toolkit") == 0);
  CHECK(scenario->extra.at("cann.tune_bank").size() == opcache::store::k_bank_digest_chars);
  CHECK(scenario->extra.at("cann.fusion_strategy").size() == opcache::store::k_bank_digest_chars);
  CHECK(scenario->extra.at("python") == "3.9");
  CHECK(scenario->extra.size() == 7);
  // No path of this machine is in what is hashed.
  const std::string canonical = opcache::scenario_canonical_json(*scenario);
  CHECK(canonical.find(machine.dir.path().string()) == std::string::npos);

  std::map<std::string, std::string> sources;
  for (const auto& input : inputs) {
    sources[input.name] = input.source;
  }
  CHECK(sources.at("toolchain").find("compiler/version.info") != std::string::npos);
  CHECK(sources.at("toolchain").find("$ASCEND_TOOLKIT_HOME") != std::string::npos);
  CHECK(sources.at("extra.cann.tune_bank").find("aoe_data/Ascend910B1") != std::string::npos);
  CHECK(sources.at("extra.python").find("python3") != std::string::npos);
  CHECK(sources.at("soc") == "--scenario");
}

TEST_CASE("store::scenario_detect gives another key for an upgraded component, a re-tuned bank or another Python") {
  Machine machine;
  CannTree tree{machine.dir / "toolkit"};
  tree.write();
  machine.env["ASCEND_HOME_PATH"] = tree.root.string();
  const fs::path bank = opcache::test::write_tune_bank(machine.dir / "home/Ascend/latest/data/aoe/custom/op",
                                                       "Ascend910B1");
  const std::string spec = "phase=train,soc=Ascend910B1";  // toolchain omitted: auto
  const std::string before = machine.key(spec);
  CHECK(machine.key("phase=train,toolchain=auto,soc=Ascend910B1") == before);

  SUBCASE("opp upgraded 8.0.RC2 -> 8.0.RC3") {
    tree.set_version("opp", "8.0.RC3");
    CHECK(machine.key(spec) != before);
    tree.set_version("opp", "8.0.RC2");
    CHECK(machine.key(spec) == before);
  }
  SUBCASE("a bank file re-tuned") {
    opcache::test::write_text(bank / "rl/MatMulV2_float16.json", R"({"shape":[1024,1024],"tiling":"bm64_bn256"})");
    CHECK(machine.key(spec) != before);
  }
  SUBCASE("a new bank file") {
    opcache::test::write_text(bank / "rl/Add.json", "{}");
    CHECK(machine.key(spec) != before);
  }
  SUBCASE("the built-in fusion strategy changed") {
    opcache::test::write_text(tree.root / "compiler/data/fusion_strategy/built-in/built_in_fusion_strategy.json",
                              "{}");
    CHECK(machine.key(spec) != before);
  }
  SUBCASE("python3 on PATH is another major.minor") {
    opcache::test::write_python3(machine.bin, "3.11");
    CHECK(machine.key(spec) != before);
  }
  SUBCASE("TUNE_BANK_PATH chooses another (absent) bank") {
    machine.env["TUNE_BANK_PATH"] = (machine.dir / "absent-bank").string();
    auto scenario = machine.resolve(spec);
    REQUIRE(scenario.ok());
    CHECK(scenario->extra.at("cann.tune_bank") == "none");
    CHECK(machine.key(spec) != before);
  }
}

TEST_CASE("store::scenario_detect keeps the key for unrelated files, another install path and a copied bank") {
  Machine machine;
  CannTree tree{machine.dir / "a/ascend-toolkit/8.0.RC2"};
  tree.write();
  machine.env["ASCEND_TOOLKIT_HOME"] = tree.root.string();
  machine.env["TUNE_BANK_PATH"] = opcache::test::write_tune_bank(machine.dir / "banks-a", "Ascend910B1").string();
  const std::string spec = "phase=infer,soc=Ascend910B1";
  const std::string before = machine.key(spec);

  SUBCASE("an unrelated file added to the install, a version.info line other than Version= changed") {
    opcache::test::write_text(tree.root / "opp/built-in/op_impl/ai_core/tbe/impl/relu.py", "def relu(): pass\n");
    opcache::test::write_text(tree.root / "tools/profiler/readme.txt", "hello");
    opcache::test::write_text(tree.root / "compiler/version.info",
                              "Version=8.0.RC2\nversion_dir=8.0.RC2\ntimestamp=20250101_000000000\n");
    CHECK(machine.key(spec) == before);
  }
  SUBCASE("the same install and bank at other paths") {
    const fs::path other = machine.dir / "b/elsewhere/cann";
    fs::create_directories(other.parent_path());
    fs::copy(tree.root, other, fs::copy_options::recursive);
    fs::copy(machine.dir / "banks-a", machine.dir / "banks-b", fs::copy_options::recursive);
    machine.env["ASCEND_TOOLKIT_HOME"] = other.string();
    machine.env["TUNE_BANK_PATH"] = (machine.dir / "banks-b/Ascend910B1").string();
    CHECK(machine.key(spec) == before);
  }
}

TEST_CASE("store::scenario_detect leaves explicit values as they were: today's key") {
  Machine machine;
  CannTree tree{machine.dir / "toolkit"};
  tree.write();
  machine.env["ASCEND_TOOLKIT_HOME"] = tree.root.string();
  opcache::test::write_npu_smi(machine.bin, {"910B1"}, machine.npu_smi_runs);
  // The pinned vector of docs/formats.md and tests/store/test_key.cpp.
  CHECK(machine.key("device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1") ==
        "0b260b16045d4c3ebf96fddd95e5b25f3b6432c2446d8e796dced272f43eef54");
  CHECK(opcache::test::count_lines(machine.npu_smi_runs) == 0);
  CHECK(opcache::test::count_lines(machine.python_runs) == 0);
  // An explicit extra wins over a detected one, and python3 is then not run.
  auto scenario = machine.resolve("phase=train,soc=Ascend910B1,extra.python=3.7,extra.cann.opp=custom");
  REQUIRE(scenario.ok());
  CHECK(scenario->extra.at("python") == "3.7");
  CHECK(scenario->extra.at("cann.opp") == "custom");
  CHECK(scenario->extra.at("cann.compiler") == "8.0.RC2");
  CHECK(opcache::test::count_lines(machine.python_runs) == 0);
}

TEST_CASE("store::scenario_detect names what to set when nothing can be detected") {
  Machine machine;
  SUBCASE("no CANN install: toolchain=") {
    expect_usage(machine.resolve("phase=train,soc=Ascend910B1"),
                 {"toolchain=auto: no CANN install found", "$ASCEND_TOOLKIT_HOME unset", "$ASCEND_HOME_PATH unset",
                  "no-default-install missing", "set toolchain=VERSION or ASCEND_TOOLKIT_HOME"});
  }
  SUBCASE("ASCEND_TOOLKIT_HOME is not an install") {
    fs::create_directories(machine.dir / "empty");
    machine.env["ASCEND_TOOLKIT_HOME"] = (machine.dir / "empty").string();
    expect_usage(machine.resolve("phase=train,soc=Ascend910B1"),
                 {"toolchain=auto", "neither compiler/version.info nor version.info", "$ASCEND_TOOLKIT_HOME"});
  }
  SUBCASE("a version.info without Version=") {
    CannTree tree{machine.dir / "toolkit"};
    tree.write();
    opcache::test::write_text(tree.root / "opp/version.info", "timestamp=1\n");
    machine.env["ASCEND_TOOLKIT_HOME"] = tree.root.string();
    expect_usage(machine.resolve("phase=train,soc=Ascend910B1"), {"toolchain=auto", "opp/version.info", "Version="});
  }
  SUBCASE("no npu-smi: soc=") {
    expect_usage(machine.resolve("phase=train,toolchain=8.0.RC2"), {"soc=auto", "npu-smi", "set soc=CHIP"});
  }
  SUBCASE("neither: both in one message") {
    expect_usage(machine.resolve("phase=train"), {"soc=auto", "toolchain=auto"});
  }
  SUBCASE("no python3: extra.python=") {
    CannTree tree{machine.dir / "toolkit"};
    tree.write();
    machine.env["ASCEND_TOOLKIT_HOME"] = tree.root.string();
    fs::remove(machine.bin / "python3");
    expect_usage(machine.resolve("phase=train,soc=Ascend910B1"), {"python3", "extra.python=MAJOR.MINOR"});
  }
}

TEST_CASE("store::scenario_detect asks npu-smi for soc=auto once per boot") {
  Machine machine;
  opcache::test::write_npu_smi(machine.bin, {"910B1", "910B1"}, machine.npu_smi_runs);
  opcache::test::age_past_digest_too_new();  // a just-written npu-smi is not remembered
  std::vector<ScenarioInput> inputs;
  auto first = machine.resolve("phase=infer,toolchain=8.0.RC2", &inputs);
  INFO((first ? "" : first.error().message()));
  REQUIRE(first.ok());
  CHECK(first->soc == "Ascend910B1");
  CHECK(opcache::test::count_lines(machine.npu_smi_runs) == 1);
  bool found = false;
  for (const auto& input : inputs) {
    if (input.name == "soc") {
      found = true;
      CHECK(input.source.find("npu-smi info") != std::string::npos);
      CHECK(input.source.find("ran") != std::string::npos);
    }
  }
  CHECK(found);

  auto second = machine.resolve("phase=infer,toolchain=8.0.RC2,soc=auto");
  REQUIRE(second.ok());
  CHECK(second->soc == "Ascend910B1");
  CHECK(opcache::test::count_lines(machine.npu_smi_runs) == 1);  // remembered: not run again

  // After a reboot the cards are asked again.
  opcache::test::write_text(machine.dir / "boot_id", "6a1b1c1d-0000-4000-8000-000000000002\n");
  CHECK(machine.resolve("phase=infer,toolchain=8.0.RC2").ok());
  CHECK(opcache::test::count_lines(machine.npu_smi_runs) == 2);
}

TEST_CASE("store::parse_npu_smi_info reads the vendor's table and refuses mixed or missing cards") {
  auto one = opcache::store::parse_npu_smi_info(opcache::test::npu_smi_table({"310P3"}));
  REQUIRE(one.ok());
  CHECK(*one == "Ascend310P3");
  auto eight = opcache::store::parse_npu_smi_info(opcache::test::npu_smi_table(std::vector<std::string>(8, "910B1")));
  REQUIRE(eight.ok());
  CHECK(*eight == "Ascend910B1");
  expect_usage(opcache::store::parse_npu_smi_info(opcache::test::npu_smi_table({"910B1", "910B2"})),
               {"soc=", "NPU 0: Ascend910B1", "NPU 1: Ascend910B2"});
  expect_usage(opcache::store::parse_npu_smi_info("npu-smi: command failed\n"), {"soc=", "listed no NPU"});
  expect_usage(opcache::store::parse_npu_smi_info(opcache::test::npu_smi_table({})), {"soc=", "listed no NPU"});
}

TEST_CASE("store::read_version_info takes the Version= line and ignores the rest") {
  TempDir dir;
  opcache::test::write_text(dir / "a.info", "version_dir=x\n Version = 8.0.RC2 \r\ntimestamp=1\n");
  auto a = opcache::store::read_version_info(dir / "a.info");
  REQUIRE(a.ok());
  REQUIRE(a->has_value());
  CHECK(**a == "8.0.RC2");
  auto missing = opcache::store::read_version_info(dir / "missing.info");
  REQUIRE(missing.ok());
  CHECK_FALSE(missing->has_value());
  opcache::test::write_text(dir / "b.info", "Version=\n");
  expect_usage(opcache::store::read_version_info(dir / "b.info"), {"b.info", "Version="});
}

TEST_CASE("store::scenario AutoResolution: exact keeps 'auto' literal, keep defaults omitted fields to 'auto'") {
  const EnvLookup env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
  // Mode::exact, a stored manifest's scenario: as written, a missing field is an error.
  expect_usage(opcache::store::parse_scenario_spec("phase=train,soc=Ascend910B1", env),
               {"missing scenario field \"toolchain\""});
  auto literal = opcache::store::parse_scenario_spec("phase=train,toolchain=auto,soc=auto", env);
  REQUIRE(literal.ok());
  CHECK(literal->toolchain == "auto");
  AutoResolution keep;
  keep.mode = AutoResolution::Mode::keep;
  keep.context = []() -> DetectContext {
    FAIL("Mode::keep detected something");
    return DetectContext();
  };
  auto kept = opcache::store::parse_scenario_spec("phase=train", env, keep);
  REQUIRE(kept.ok());
  CHECK(kept->toolchain == "auto");
  CHECK(kept->soc == "auto");
  CHECK(kept->extra.empty());
  auto public_keep = opcache::parse_scenario("phase=infer,soc=auto", opcache::AutoFields::keep);
  REQUIRE(public_keep.ok());
  CHECK(public_keep->toolchain == "auto");
}

TEST_CASE("store::scenario_detect shows the driver version as not keyed") {
  Machine machine;
  auto absent = opcache::store::driver_input(machine.context());
  CHECK_FALSE(absent.keyed);
  CHECK(absent.value == "not installed");
  opcache::test::write_text(machine.dir / "driver/version.info", "Version=23.0.3\n");
  auto present = opcache::store::driver_input(machine.context());
  CHECK(present.value == "23.0.3");
  CHECK(present.name == "driver");
}

TEST_CASE("store::scenario_detect: the example of docs/formats.md \"Detected scenario fields\"") {
  Machine machine;
  CannTree tree{machine.dir / "toolkit"};
  tree.write();
  machine.env["ASCEND_TOOLKIT_HOME"] = tree.root.string();
  machine.env["RANK_SIZE"] = "8";
  opcache::test::write_tune_bank(machine.dir / "home/Ascend/latest/data/aoe/custom/op", "Ascend910B1");
  opcache::test::write_npu_smi(machine.bin, {"910B1"}, machine.npu_smi_runs);
  auto scenario = machine.resolve("phase=train");
  REQUIRE(scenario.ok());
  const std::string canonical = opcache::scenario_canonical_json(*scenario);
  MESSAGE("canonical: " << canonical);
  CHECK(canonical == k_docs_example_scenario);
  CHECK(machine.key("phase=train") == k_docs_example_key);
}

TEST_CASE("store::scenario_detect reads the version of the OPP that ASCEND_OPP_PATH names") {
  Machine machine;
  CannTree tree{machine.dir / "Ascend/ascend-toolkit/8.0.RC2"};
  tree.write();
  machine.env["ASCEND_TOOLKIT_HOME"] = tree.root.string();
  const std::string spec = "phase=train,soc=Ascend910B1";
  const Scenario unset = machine.resolved(spec);
  const std::string before = machine.key(spec);

  SUBCASE("set to <root>/opp, as the toolkit's set_env.sh does: the same key") {
    machine.env["ASCEND_OPP_PATH"] = (tree.root / "opp").string();
    CHECK(machine.key(spec) == before);
  }
  SUBCASE("an OPP of 8.0.RC3 beside the 8.0.RC2 toolkit: cann.opp says so, another key") {
    const fs::path opp = opcache::test::write_opp(machine.dir / "opp-8.0.RC3", "8.0.RC3");
    machine.env["ASCEND_OPP_PATH"] = opp.string();
    std::vector<ScenarioInput> inputs;
    const Scenario scenario = machine.resolved(spec, &inputs);
    CHECK(scenario.toolchain == "8.0.RC2");
    CHECK(scenario.extra.at("cann.opp") == "8.0.RC3");
    CHECK(scenario_differences(unset, scenario) == only_extra("cann.opp"));
    CHECK(machine.key(spec) != before);
    CHECK(opcache::test::contains(input_source(inputs, "extra.cann.opp"), (opp / "version.info").string()));
    CHECK(opcache::test::contains(input_source(inputs, "extra.cann.opp"), "($ASCEND_OPP_PATH)"));
  }
  SUBCASE("an OPP of the same version at another path: the same key") {
    machine.env["ASCEND_OPP_PATH"] = opcache::test::write_opp(machine.dir / "elsewhere/opp", "8.0.RC2").string();
    CHECK(machine.key(spec) == before);
  }
  SUBCASE("an OPP without a version.info: no cann.opp entry, another key") {
    fs::create_directories(machine.dir / "bare-opp");
    machine.env["ASCEND_OPP_PATH"] = (machine.dir / "bare-opp").string();
    CHECK(machine.resolved(spec).extra.count("cann.opp") == 0);
    CHECK(machine.key(spec) != before);
  }
}

TEST_CASE("store::scenario_detect digests each custom operator package of the OPP's vendors") {
  Machine machine;
  CannTree tree{machine.dir / "toolkit"};
  tree.write();
  machine.env["ASCEND_TOOLKIT_HOME"] = tree.root.string();
  const std::string spec = "phase=train,soc=Ascend910B1";
  const Scenario bare = machine.resolved(spec);
  const fs::path customize = tree.add_vendor("customize", "1.0.0");
  std::vector<ScenarioInput> inputs;
  const Scenario with = machine.resolved(spec, &inputs);
  const std::string entry = with.extra.at("cann.opp_vendor.customize");
  CHECK(entry.starts_with("1.0.0/"));
  CHECK(entry.size() == std::string("1.0.0/").size() + opcache::store::k_bank_digest_chars);
  CHECK(with.extra.at("cann.opp_vendor_priority") == "customize");
  CHECK(scenario_differences(bare, with) == std::vector<std::string>{R"(scenario.extra["cann.opp_vendor.customize"])",
                                                                     R"(scenario.extra["cann.opp_vendor_priority"])"});
  CHECK(opcache::test::contains(input_source(inputs, "extra.cann.opp_vendor.customize"), customize.string()));
  CHECK(opcache::test::contains(input_source(inputs, "extra.cann.opp_vendor_priority"), "vendors/config.ini"));
  const std::string before = machine.key(spec);

  SUBCASE("editing the op's kernel source changes the key, and explain names the package") {
    opcache::test::write_text(opcache::test::custom_op_kernel_source(customize), "// tuned\n");
    CHECK(scenario_differences(with, machine.resolved(spec)) == only_extra("cann.opp_vendor.customize"));
    CHECK(machine.key(spec) != before);
  }
  SUBCASE("op_proto and op_tiling are digested too") {
    opcache::test::write_text(customize / "op_proto/inc/op_proto.h",
                              "REG_OP(AddCustom).INPUT(x, TensorType({DT_FLOAT}))\n");
    const Scenario proto = machine.resolved(spec);
    CHECK(scenario_differences(with, proto) == only_extra("cann.opp_vendor.customize"));
    opcache::test::write_text(customize / "op_tiling/liboptiling.so", "tiling");
    CHECK(scenario_differences(proto, machine.resolved(spec)) == only_extra("cann.opp_vendor.customize"));
  }
  SUBCASE("files no compile loads, and a version.info line other than Version=, keep the key") {
    opcache::test::write_text(customize / "framework/onnx/libcust_onnx_parsers.so", "parser");
    opcache::test::write_text(customize / "op_api/lib/libcust_opapi.so", "api");
    opcache::test::write_text(customize / "bin/set_env.bash", "# moved\n");
    opcache::test::write_text(customize / "version.info", "Version=1.0.0\ncustom_opp_compiler_version=8.0.RC3\n");
    CHECK(machine.key(spec) == before);
  }
  SUBCASE("a new version of the package") {
    opcache::test::write_text(customize / "version.info", "Version=1.0.1\n");
    const Scenario upgraded = machine.resolved(spec);
    CHECK(upgraded.extra.at("cann.opp_vendor.customize").starts_with("1.0.1/"));
    CHECK(scenario_differences(with, upgraded) == only_extra("cann.opp_vendor.customize"));
  }
  SUBCASE("a second vendor has its own entry; the load priority is keyed") {
    const fs::path mdc = tree.add_vendor("mdc", "");
    const Scenario two = machine.resolved(spec);
    CHECK(two.extra.at("cann.opp_vendor.mdc").starts_with("unversioned/"));
    CHECK(two.extra.at("cann.opp_vendor.customize") == entry);
    CHECK(two.extra.at("cann.opp_vendor_priority") == "customize,mdc");
    opcache::test::write_text(opcache::test::custom_op_kernel_source(mdc), "// mdc's own\n");
    const Scenario edited = machine.resolved(spec);
    CHECK(scenario_differences(two, edited) == only_extra("cann.opp_vendor.mdc"));
    tree.set_vendor_priority("mdc,customize");
    CHECK(scenario_differences(edited, machine.resolved(spec)) == only_extra("cann.opp_vendor_priority"));
  }
  SUBCASE("the vendors of the OPP that ASCEND_OPP_PATH names are read, not <root>/opp's") {
    const fs::path opp = opcache::test::write_opp(machine.dir / "other-opp", "8.0.RC2");
    machine.env["ASCEND_OPP_PATH"] = opp.string();
    CHECK(machine.resolved(spec).extra.count("cann.opp_vendor.customize") == 0);
    // The same package there: the same entry (its path does not enter).
    opcache::test::write_custom_op_package(opp / "vendors/customize", "1.0.0");
    const Scenario moved = machine.resolved(spec);
    CHECK(moved.extra.at("cann.opp_vendor.customize") == entry);
    CHECK(moved.extra.count("cann.opp_vendor_priority") == 0);  // that OPP has no config.ini
  }
}

TEST_CASE("store::scenario_detect digests each package ASCEND_CUSTOM_OPP_PATH names, and their order") {
  Machine machine;
  CannTree tree{machine.dir / "toolkit"};
  tree.write();
  machine.env["ASCEND_TOOLKIT_HOME"] = tree.root.string();
  const std::string spec = "phase=infer,soc=Ascend910B1";
  const fs::path mine = opcache::test::write_custom_op_package(machine.dir / "a/vendors/my_ops", "0.1");
  const fs::path theirs = opcache::test::write_custom_op_package(machine.dir / "b/vendors/their_ops", "");
  opcache::test::write_text(opcache::test::custom_op_kernel_source(theirs), "// theirs\n");
  const Scenario bare = machine.resolved(spec);
  machine.env["ASCEND_CUSTOM_OPP_PATH"] = mine.string() + ":" + theirs.string();
  std::vector<ScenarioInput> inputs;
  const Scenario both = machine.resolved(spec, &inputs);
  CHECK(both.extra.at("cann.custom_opp.my_ops").starts_with("0.1/"));
  CHECK(both.extra.at("cann.custom_opp.their_ops").starts_with("unversioned/"));
  CHECK(both.extra.at("cann.custom_opp_order") == "my_ops,their_ops");
  CHECK(scenario_differences(bare, both).size() == 3);
  CHECK(opcache::test::contains(input_source(inputs, "extra.cann.custom_opp.my_ops"), "$ASCEND_CUSTOM_OPP_PATH"));
  const std::string before = machine.key(spec);

  SUBCASE("editing one package's kernel source changes its entry only") {
    opcache::test::write_text(opcache::test::custom_op_kernel_source(mine), "// faster\n");
    CHECK(scenario_differences(both, machine.resolved(spec)) == only_extra("cann.custom_opp.my_ops"));
    CHECK(machine.key(spec) != before);
  }
  SUBCASE("the order is keyed: the first package wins an op both define") {
    machine.env["ASCEND_CUSTOM_OPP_PATH"] = theirs.string() + ":" + mine.string();
    CHECK(scenario_differences(both, machine.resolved(spec)) == only_extra("cann.custom_opp_order"));
  }
  SUBCASE("empty items, a trailing '/' and a missing directory change nothing") {
    machine.env["ASCEND_CUSTOM_OPP_PATH"] =
        ":" + mine.string() + "/:" + (machine.dir / "missing").string() + "::" + theirs.string();
    CHECK(machine.key(spec) == before);
  }
  SUBCASE("the same packages at other paths: the same key") {
    fs::copy(machine.dir / "a", machine.dir / "copy-a", fs::copy_options::recursive);
    fs::copy(machine.dir / "b", machine.dir / "copy-b", fs::copy_options::recursive);
    machine.env["ASCEND_CUSTOM_OPP_PATH"] =
        (machine.dir / "copy-a/vendors/my_ops").string() + ":" + (machine.dir / "copy-b/vendors/their_ops").string();
    CHECK(machine.key(spec) == before);
  }
  SUBCASE("a second package of the same name is my_ops.2; a name a key cannot hold is cleaned") {
    const fs::path again = opcache::test::write_custom_op_package(machine.dir / "c/vendors/my_ops", "0.2");
    const fs::path odd = opcache::test::write_custom_op_package(machine.dir / "d/my ops+x", "3");
    machine.env["ASCEND_CUSTOM_OPP_PATH"] =
        mine.string() + ":" + theirs.string() + ":" + again.string() + ":" + odd.string();
    const Scenario four = machine.resolved(spec);
    CHECK(four.extra.at("cann.custom_opp.my_ops.2").starts_with("0.2/"));
    CHECK(four.extra.at("cann.custom_opp.my_ops_x").starts_with("3/"));
    CHECK(four.extra.at("cann.custom_opp_order") == "my_ops,their_ops,my_ops.2,my_ops_x");
  }
  SUBCASE("an explicit entry wins") {
    const Scenario pinned = machine.resolved(spec + ",extra.cann.custom_opp.my_ops=pinned");
    CHECK(pinned.extra.at("cann.custom_opp.my_ops") == "pinned");
    CHECK(pinned.extra.at("cann.custom_opp.their_ops") == both.extra.at("cann.custom_opp.their_ops"));
  }
}

TEST_CASE("store::scenario_detect keys an explicit toolchain as given and notes when the install differs") {
  Machine machine;
  CannTree tree{machine.dir / "Ascend/ascend-toolkit/8.0.RC2"};
  tree.write();
  const std::string explicit_rc3 = "device=multi,phase=train,toolchain=8.0.RC3,soc=Ascend910B1";
  const std::string without_install = machine.key(explicit_rc3);
  machine.env["ASCEND_TOOLKIT_HOME"] = tree.root.string();
  std::vector<std::string> notes;
  std::vector<ScenarioInput> inputs;

  SUBCASE("8.0.RC3 given, 8.0.RC2 installed: the key uses 8.0.RC3, one note names both") {
    auto scenario = machine.resolve(explicit_rc3, &inputs, &notes);
    REQUIRE(scenario.ok());
    CHECK(scenario->toolchain == "8.0.RC3");
    CHECK(scenario->extra.empty());
    CHECK(machine.key(explicit_rc3) == without_install);
    REQUIRE(notes.size() == 1);
    for (const char* part : {"toolchain=8.0.RC3", "is given explicitly", "8.0.RC2", "compiler/version.info",
                             "$ASCEND_TOOLKIT_HOME", "the key uses 8.0.RC3", "toolchain=auto"}) {
      CAPTURE(part);
      CHECK(opcache::test::contains(notes.front(), part));
    }
    bool shown = false;
    for (const auto& input : inputs) {
      if (input.name == opcache::store::k_input_installed_toolchain) {
        shown = true;
        CHECK(input.value == "8.0.RC2");
        CHECK_FALSE(input.keyed);
      }
    }
    CHECK(shown);
  }
  SUBCASE("the version installed: no note") {
    REQUIRE(machine.resolve("device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1", &inputs, &notes).ok());
    CHECK(notes.empty());
    CHECK(input_source(inputs, opcache::store::k_input_installed_toolchain).empty());
  }
  SUBCASE("no compiler/version.info: compared with the toolkit's version") {
    fs::remove(tree.root / "compiler/version.info");
    tree.set_version("toolkit", "8.0.RC3");
    REQUIRE(machine.resolve(explicit_rc3, &inputs, &notes).ok());
    CHECK(notes.empty());
  }
  SUBCASE("no install: no note") {
    machine.env.erase("ASCEND_TOOLKIT_HOME");
    REQUIRE(machine.resolve(explicit_rc3, &inputs, &notes).ok());
    CHECK(notes.empty());
  }
  SUBCASE("an unreadable install: no note, no error (an explicit toolchain needs none)") {
    opcache::test::write_text(tree.root / "compiler/version.info", "timestamp=1\n");
    REQUIRE(machine.resolve(explicit_rc3, &inputs, &notes).ok());
    CHECK(notes.empty());
  }
}
