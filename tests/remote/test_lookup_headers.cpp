// The lookup hint headers (remote/lookup_headers): exact values (base64url
// without padding of the canonical scenario) and the protocol's limits.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "remote/lookup_headers.hpp"

using namespace opcache::remote;

namespace {

const nlohmann::json k_header_scenario = {
    {"device_mode", "single"}, {"phase", "train"}, {"toolchain", "8.0"}, {"soc", "Ascend910B1"}};
// base64url, no padding, of {"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0"}.
const std::string k_scenario_header_value =
    "eyJkZXZpY2VfbW9kZSI6InNpbmdsZSIsInBoYXNlIjoidHJhaW4iLCJzb2MiOiJBc2NlbmQ5MTBCMSIsInRvb2xjaGFpbiI6IjguMCJ9";

}  // namespace

TEST_CASE("remote::lookup_headers: the op type as given and the scenario's canonical JSON in base64url") {
  const auto hint = make_lookup_hint("MatMul", k_header_scenario);
  CHECK(hint.scenario_json == R"({"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0"})");
  const auto values = lookup_header_values(hint);
  CHECK(values.op_type == "MatMul");
  CHECK(values.scenario == k_scenario_header_value);
  const auto lines = lookup_header_lines(hint);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "X-Opcache-Op-Type: MatMul");
  CHECK(lines[1] == "X-Opcache-Scenario: " + k_scenario_header_value);
}

TEST_CASE("remote::lookup_headers: an unknown hint sends nothing") {
  CHECK(lookup_header_lines(LookupHint{}).empty());
  const auto only_scenario = lookup_header_lines(LookupHint{"", "{}"});
  REQUIRE(only_scenario.size() == 1);
  CHECK(only_scenario[0] == "X-Opcache-Scenario: e30");
}

TEST_CASE("remote::lookup_headers: an op type over 128 bytes or not printable ASCII is not sent") {
  const std::string longest(k_max_op_type_header, 'M');
  CHECK(lookup_header_values(LookupHint{longest, ""}).op_type == longest);
  CHECK(lookup_header_values(LookupHint{longest + "M", ""}).op_type.empty());
  CHECK(lookup_header_values(LookupHint{"Mat\nMul", ""}).op_type.empty());
  CHECK(lookup_header_values(LookupHint{"Mat\tMul", ""}).op_type.empty());
  CHECK(lookup_header_values(LookupHint{"MatM\xc3\xbcl", ""}).op_type.empty());
  CHECK(lookup_header_values(LookupHint{"Mat\x7f", ""}).op_type.empty());
  CHECK(lookup_header_values(LookupHint{"Mat Mul ~!", ""}).op_type == "Mat Mul ~!");
  CHECK(is_op_type_header_value(longest));
  CHECK_FALSE(is_op_type_header_value(""));
  CHECK_FALSE(is_op_type_header_value(longest + "M"));
  // The scenario is still sent beside a refused op type.
  const auto lines = lookup_header_lines(LookupHint{longest + "M", "{}"});
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("X-Opcache-Scenario: ", 0) == 0);
}

TEST_CASE("remote::lookup_headers: a scenario over 2048 bytes of base64url is not sent") {
  // 1536 bytes encode to exactly 2048 characters; one more byte to 2050.
  const std::string fits(1536, 'x');
  CHECK(lookup_header_values(LookupHint{"MatMul", fits}).scenario.size() == k_max_scenario_header);
  const auto too_long = lookup_header_values(LookupHint{"MatMul", fits + "x"});
  CHECK(too_long.scenario.empty());
  CHECK(too_long.op_type == "MatMul");
}
