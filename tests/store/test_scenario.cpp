// The scenario tag (include/opcache/scenario.hpp, store/scenario.hpp): both
// input forms, device defaults from the environment, validation messages, and
// the canonical JSON that is hashed into every key.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/program_search.hpp"
#include "opcache/scenario.hpp"
#include "store/scenario.hpp"
#include "tests/support/env_lookup.hpp"
#include "tests/support/expect_usage.hpp"

namespace {

using nlohmann::json;
using opcache::DeviceMode;
using opcache::ErrorCode;
using opcache::Phase;
using opcache::Result;
using opcache::Scenario;
using opcache::base::EnvLookup;
using opcache::test::env_of;
using opcache::test::expect_usage;

// An environment that fails the test if it is consulted.
EnvLookup untouchable_env() {
  return [](const char* name) -> std::optional<std::string> {
    FAIL("the environment was consulted for " << name << " although device was given");
    return std::nullopt;
  };
}

Result<Scenario> spec(const std::string& text, const EnvLookup& env = env_of({})) {
  return opcache::store::parse_scenario_spec(text, env);
}

Result<Scenario> from_json(const std::string& text, const EnvLookup& env = env_of({})) {
  return opcache::store::scenario_from_json(json::parse(text), "scenario.json", env);
}

Scenario expected_multi_train() {
  Scenario scenario;
  scenario.device_mode = DeviceMode::multi;
  scenario.phase = Phase::train;
  scenario.toolchain = "8.0.RC2";
  scenario.soc = "Ascend910B1";
  return scenario;
}

}  // namespace

TEST_CASE("opcache::parse_scenario spec form and JSON form give equal Scenarios") {
  Scenario expected = expected_multi_train();
  expected.extra = {{"python", "3.9.7"}, {"torch_npu", "2.1.0"}};

  auto from_spec = spec(
      "device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1,extra.python=3.9.7,"
      "extra.torch_npu=2.1.0");
  auto from_json_form = from_json(R"({"soc":"Ascend910B1","toolchain":"8.0.RC2","phase":"train",
      "device_mode":"multi","extra":{"torch_npu":"2.1.0","python":"3.9.7"}})");
  REQUIRE(from_spec.ok());
  REQUIRE(from_json_form.ok());
  CHECK(*from_spec == expected);
  CHECK(*from_json_form == expected);

  // The public entry points pick the form from the first character.
  auto public_spec = opcache::parse_scenario("device_mode=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1");
  auto public_json = opcache::parse_scenario(
      "  \n{\"device_mode\":\"multi\",\"phase\":\"train\",\"toolchain\":\"8.0.RC2\",\"soc\":\"Ascend910B1\"}");
  REQUIRE(public_spec.ok());
  REQUIRE(public_json.ok());
  CHECK(*public_spec == expected_multi_train());
  CHECK(*public_json == expected_multi_train());
  auto direct_json = opcache::parse_scenario_json(
      R"({"device_mode":"multi","phase":"train","toolchain":"8.0.RC2","soc":"Ascend910B1"})", "s.json");
  REQUIRE(direct_json.ok());
  CHECK(*direct_json == expected_multi_train());

  // Field order does not matter in the spec form either.
  auto reordered = spec("soc=Ascend910B1,toolchain=8.0.RC2,phase=train,device=multi");
  REQUIRE(reordered.ok());
  CHECK(*reordered == expected_multi_train());
}

TEST_CASE("opcache::parse_scenario keeps everything after the first '=' in a value") {
  auto result = spec("device=single,phase=infer,toolchain=cann=8.0 (build 42),soc=Ascend310P3");
  REQUIRE(result.ok());
  CHECK(result->toolchain == "cann=8.0 (build 42)");
  CHECK(result->soc == "Ascend310P3");
}

TEST_CASE("store::scenario_to_json and scenario_from_json round-trip") {
  Scenario scenario = expected_multi_train();
  scenario.extra = {{"debug", "op_debug_level=0"}};
  json value = opcache::store::scenario_to_json(scenario);
  CHECK(value == json::parse(R"({"device_mode":"multi","phase":"train","toolchain":"8.0.RC2",
      "soc":"Ascend910B1","extra":{"debug":"op_debug_level=0"}})"));
  auto back = opcache::store::scenario_from_json(value, "x", untouchable_env());
  REQUIRE(back.ok());
  CHECK(*back == scenario);

  scenario.extra.clear();
  CHECK_FALSE(opcache::store::scenario_to_json(scenario).contains("extra"));
}

TEST_CASE("store::parse_scenario_spec takes device from RANK_SIZE and LOCAL_WORLD_SIZE when omitted") {
  const std::string fields = "phase=train,toolchain=8.0.RC2,soc=Ascend910B1";
  struct Case {
    std::map<std::string, std::string> env;
    DeviceMode expected;
  };
  const std::vector<Case> cases = {
      {{}, DeviceMode::single},
      {{{"RANK_SIZE", "8"}}, DeviceMode::multi},
      {{{"RANK_SIZE", "2"}}, DeviceMode::multi},
      {{{"RANK_SIZE", "1"}}, DeviceMode::single},
      {{{"RANK_SIZE", ""}}, DeviceMode::single},
      {{{"LOCAL_WORLD_SIZE", "4"}}, DeviceMode::multi},
      {{{"LOCAL_WORLD_SIZE", "1"}}, DeviceMode::single},
      {{{"RANK_SIZE", "1"}, {"LOCAL_WORLD_SIZE", "8"}}, DeviceMode::multi},
      {{{"RANK_SIZE", "16"}, {"LOCAL_WORLD_SIZE", "1"}}, DeviceMode::multi},
  };
  for (const auto& c : cases) {
    std::string shown;
    for (const auto& [name, value] : c.env) {
      shown += name + "=" + value + " ";
    }
    CAPTURE(shown);
    auto from_spec = spec(fields, env_of(c.env));
    REQUIRE(from_spec.ok());
    CHECK(from_spec->device_mode == c.expected);
    auto from_json_form = from_json(R"({"phase":"train","toolchain":"8.0.RC2","soc":"Ascend910B1"})", env_of(c.env));
    REQUIRE(from_json_form.ok());
    CHECK(from_json_form->device_mode == c.expected);
    auto direct = opcache::store::device_mode_from_environment(env_of(c.env));
    REQUIRE(direct.ok());
    CHECK(*direct == c.expected);
  }
}

TEST_CASE("store::parse_scenario_spec rejects a garbage RANK_SIZE or LOCAL_WORLD_SIZE, naming the variable") {
  const std::string fields = "phase=train,toolchain=8.0.RC2,soc=Ascend910B1";
  for (const std::string value : {"eight", "0", "-2", "8x", "1.5"}) {
    CAPTURE(value);
    expect_usage(spec(fields, env_of({{"RANK_SIZE", value}})),
                 {"RANK_SIZE=\"" + value + "\"", "not a positive integer", "device="});
    expect_usage(spec(fields, env_of({{"LOCAL_WORLD_SIZE", value}})),
                 {"LOCAL_WORLD_SIZE=\"" + value + "\"", "not a positive integer"});
    expect_usage(
        from_json(R"({"phase":"train","toolchain":"8.0.RC2","soc":"Ascend910B1"})", env_of({{"RANK_SIZE", value}})),
        {"RANK_SIZE"});
  }
  // An explicit device never looks at the environment.
  auto explicit_device = spec("device=single," + fields, untouchable_env());
  REQUIRE(explicit_device.ok());
  CHECK(explicit_device->device_mode == DeviceMode::single);
  auto explicit_json =
      from_json(R"({"device_mode":"multi","phase":"train","toolchain":"t","soc":"s"})", untouchable_env());
  REQUIRE(explicit_json.ok());
  CHECK(explicit_json->device_mode == DeviceMode::multi);
}

TEST_CASE("store::parse_scenario_spec names the field and the allowed values for invalid values") {
  expect_usage(spec("device=multi,phase=bad,toolchain=8.0.RC2,soc=Ascend910B1"),
               {"--scenario", "phase", "train", "infer", "\"bad\""});
  expect_usage(spec("device=both,phase=train,toolchain=8.0.RC2,soc=Ascend910B1"),
               {"device", "single", "multi", "\"both\""});
  expect_usage(spec("device=Multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1"), {"device", "\"Multi\""});
  expect_usage(spec("device=multi,phase=TRAIN,toolchain=8.0.RC2,soc=Ascend910B1"), {"phase", "train", "infer"});
  expect_usage(from_json(R"({"device_mode":"multi","phase":"bad","toolchain":"8.0.RC2","soc":"Ascend910B1"})"),
               {"scenario.json", "phase", "train", "infer"});
  expect_usage(from_json(R"({"device_mode":"x","phase":"train","toolchain":"8.0.RC2","soc":"Ascend910B1"})"),
               {"device", "single", "multi"});
}

// store::parse_scenario_spec(spec, env) reads a scenario exactly as written
// (AutoResolution::Mode::exact, as a stored manifest's): an omitted toolchain
// or soc is still an error there. The public parsers detect them instead
// (next case, and tests/store/test_scenario_detect.cpp).
TEST_CASE("store::parse_scenario_spec names a missing or empty required field") {
  expect_usage(spec("device=multi,toolchain=8.0.RC2,soc=Ascend910B1"),
               {"missing scenario field \"phase\"", "train", "infer"});
  expect_usage(spec("device=multi,phase=train,soc=Ascend910B1"),
               {"missing scenario field \"toolchain\"", "toolchain=8.0.RC2", "phase, toolchain, soc"});
  expect_usage(spec("device=multi,phase=train,toolchain=8.0.RC2"),
               {"missing scenario field \"soc\"", "soc=Ascend910B1"});
  expect_usage(spec("device=multi,phase=train,toolchain=,soc=Ascend910B1"),
               {"scenario field \"toolchain\" must not be empty"});
  expect_usage(spec("device=multi,phase=train,toolchain=8.0.RC2,soc="), {"scenario field \"soc\" must not be empty"});
  expect_usage(spec(""), {"missing scenario field \"phase\""});
  expect_usage(from_json(R"({"device_mode":"multi","phase":"train","soc":"Ascend910B1"})"),
               {"scenario.json", "missing scenario field \"toolchain\""});
  expect_usage(from_json(R"({"device_mode":"multi","phase":"train","toolchain":"","soc":"Ascend910B1"})"),
               {"\"toolchain\" must not be empty"});
}

TEST_CASE("opcache::parse_scenario detects an omitted toolchain or soc, and names what to set when it cannot") {
  // This machine (and CI) has no CANN install and no npu-smi; the test process's
  // ASCEND_* variables are unset by tests/support/process.cpp's hermetic list.
  if (std::filesystem::exists("/usr/local/Ascend/ascend-toolkit/latest") || std::getenv("ASCEND_TOOLKIT_HOME") ||
      std::getenv("ASCEND_HOME_PATH")) {
    MESSAGE("skipped: a CANN install is present");
    return;
  }
  expect_usage(opcache::parse_scenario("device=multi,phase=train,soc=Ascend910B1"),
               {"--scenario", "toolchain=auto: no CANN install found", "set toolchain=VERSION or ASCEND_TOOLKIT_HOME"});
  expect_usage(opcache::parse_scenario_json(R"({"device_mode":"multi","phase":"train","soc":"Ascend910B1"})",
                                            "scenario.json"),
               {"scenario.json", "toolchain=auto"});
  if (!opcache::base::find_program("npu-smi", std::getenv("PATH") ? std::getenv("PATH") : "", opcache::base::EmptyPathEntry::skipped)) {
    expect_usage(opcache::parse_scenario("device=multi,phase=train,toolchain=8.0.RC2,soc=auto"),
                 {"soc=auto", "soc=CHIP"});
  }
  // Explicit fields detect nothing and still parse.
  CHECK(opcache::parse_scenario("device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1").ok());
}

TEST_CASE("store::parse_scenario_spec rejects unknown fields and lists the allowed ones") {
  expect_usage(spec("device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1,foo=1"),
               {"unknown scenario field \"foo\"", "device", "phase", "toolchain", "soc", "extra.KEY"});
  expect_usage(spec("device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1,Phase=train"),
               {"unknown scenario field \"Phase\""});
  expect_usage(from_json(R"({"device_mode":"multi","phase":"train","toolchain":"8","soc":"A","foo":"1"})"),
               {"unknown scenario field \"foo\"", "allowed: device_mode, phase, toolchain, soc, extra"});
  // The JSON form spells it device_mode; "device" is only the spec alias.
  expect_usage(from_json(R"({"device":"multi","phase":"train","toolchain":"8","soc":"A"})"),
               {"unknown scenario field \"device\""});
}

TEST_CASE("store::parse_scenario_spec rejects a field given twice") {
  expect_usage(spec("device=multi,phase=train,phase=infer,toolchain=8.0.RC2,soc=Ascend910B1"),
               {"scenario field \"phase\" is given twice"});
  expect_usage(spec("device=multi,device_mode=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1"),
               {"scenario field \"device\" is given twice"});
  expect_usage(spec("device=multi,phase=train,toolchain=a,toolchain=a,soc=Ascend910B1"),
               {"\"toolchain\" is given twice"});
  expect_usage(spec("device=multi,phase=train,toolchain=a,soc=x,soc=y"), {"\"soc\" is given twice"});
  expect_usage(spec("device=multi,phase=train,toolchain=a,soc=x,extra.py=3.9,extra.py=3.10"),
               {"scenario field \"extra.py\" is given twice"});
}

TEST_CASE("store::parse_scenario_spec rejects malformed items") {
  expect_usage(spec("device=multi,phase"), {"\"phase\" is not FIELD=VALUE", "device, phase, toolchain, soc"});
  expect_usage(spec("device=multi,,phase=train,toolchain=a,soc=b"), {"empty item"});
  expect_usage(spec("device=multi,phase=train,toolchain=a,soc=b,"), {"empty item"});
  expect_usage(spec(",device=multi,phase=train,toolchain=a,soc=b"), {"empty item"});
}

TEST_CASE("store::parse_scenario_spec validates extra keys and values") {
  const std::string base = "device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1,";
  auto good = spec(base + "extra.python-version_3.x=3.9,extra.A9=x y z");
  REQUIRE(good.ok());
  CHECK(good->extra == std::map<std::string, std::string>{{"python-version_3.x", "3.9"}, {"A9", "x y z"}});
  // An empty value is allowed (the key's presence is the information).
  auto empty_value = spec(base + "extra.flag=");
  REQUIRE(empty_value.ok());
  CHECK(empty_value->extra.at("flag").empty());

  expect_usage(spec(base + "extra.=1"), {"extra key \"\" must be 1 to 64 characters"});
  expect_usage(spec(base + "extra." + std::string(65, 'k') + "=1"), {"must be 1 to 64 characters"});
  CHECK(spec(base + "extra." + std::string(64, 'k') + "=1").ok());
  expect_usage(spec(base + "extra.a b=1"), {"extra key \"a b\"", "letters, digits"});
  expect_usage(spec(base + "extra.a/b=1"), {"extra key \"a/b\""});
  expect_usage(spec(base + "extra.k=" + std::string(257, 'v')), {"extra.k is longer than 256 bytes"});
  CHECK(spec(base + "extra.k=" + std::string(256, 'v')).ok());
  expect_usage(spec(base + "extra.k=a\tb"), {"extra.k contains a control character"});
  expect_usage(spec(base + "extra.k=\xC3\x28"), {"extra.k is not valid UTF-8"});

  const std::string json_base = R"({"device_mode":"multi","phase":"train","toolchain":"8","soc":"A",)";
  expect_usage(from_json(json_base + R"("extra":"python=3.9"})"), {"\"extra\" must be an object of strings"});
  expect_usage(from_json(json_base + R"("extra":{"python":3.9}})"),
               {"scenario field \"extra.python\" must be a string"});
  expect_usage(from_json(json_base + R"("extra":{"bad key":"1"}})"), {"extra key \"bad key\""});
}

TEST_CASE("store::scenario_from_json validates value types, lengths and characters") {
  expect_usage(opcache::store::scenario_from_json(json::array(), "scenario.json", env_of({})),
               {"scenario.json", "must be a JSON object"});
  expect_usage(from_json(R"({"device_mode":"multi","phase":1,"toolchain":"8","soc":"A"})"),
               {"scenario field \"phase\" must be a string"});
  expect_usage(from_json(R"({"device_mode":null,"phase":"train","toolchain":"8","soc":"A"})"),
               {"scenario field \"device_mode\" must be a string"});
  expect_usage(from_json(R"({"device_mode":"multi","phase":"train","toolchain":"8","soc":["A"]})"),
               {"scenario field \"soc\" must be a string"});
  expect_usage(
      from_json(R"({"device_mode":"multi","phase":"train","toolchain":")" + std::string(257, 't') + R"(","soc":"A"})"),
      {"toolchain is longer than 256 bytes"});
  expect_usage(from_json(R"({"device_mode":"multi","phase":"train","toolchain":"8\n0","soc":"A"})"),
               {"toolchain contains a control character"});
  expect_usage(opcache::parse_scenario_json(R"({"device_mode":"multi",)", "cfg/scenario.json"),
               {"cfg/scenario.json", "invalid JSON"});
  expect_usage(opcache::parse_scenario_json(R"({"phase":"train","phase":"infer"})", "dup.json"),
               {"dup.json", "duplicate"});
}

TEST_CASE("opcache::scenario_canonical_json is the exact hashed form") {
  CHECK(opcache::scenario_canonical_json(expected_multi_train()) ==
        R"({"device_mode":"multi","phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC2"})");

  Scenario single;
  single.device_mode = DeviceMode::single;
  single.phase = Phase::infer;
  single.toolchain = "7.0.0";
  single.soc = "Ascend310P3";
  CHECK(opcache::scenario_canonical_json(single) ==
        R"({"device_mode":"single","phase":"infer","soc":"Ascend310P3","toolchain":"7.0.0"})");

  // extra appears only when non-empty, with its keys sorted.
  single.extra = {{"zeta", "1"}, {"Alpha", "2"}, {"mid.key", "a\"b"}};
  CHECK(opcache::scenario_canonical_json(single) ==
        R"({"device_mode":"single","extra":{"Alpha":"2","mid.key":"a\"b","zeta":"1"},"phase":"infer",)"
        R"("soc":"Ascend310P3","toolchain":"7.0.0"})");
}

TEST_CASE("opcache::scenario_summary and to_string give short human forms") {
  CHECK(opcache::scenario_summary(expected_multi_train()) == "multi/train/8.0.RC2/Ascend910B1");
  Scenario scenario = expected_multi_train();
  scenario.device_mode = DeviceMode::single;
  scenario.phase = Phase::infer;
  scenario.extra = {{"python", "3.9"}, {"debug", "1"}};
  CHECK(opcache::scenario_summary(scenario) == "single/infer/8.0.RC2/Ascend910B1+debug=1+python=3.9");
  CHECK(std::string(opcache::to_string(DeviceMode::single)) == "single");
  CHECK(std::string(opcache::to_string(DeviceMode::multi)) == "multi");
  CHECK(std::string(opcache::to_string(Phase::train)) == "train");
  CHECK(std::string(opcache::to_string(Phase::infer)) == "infer");
}
