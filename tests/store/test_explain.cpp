// store/explain: how stored entries differ from a lookup, and which are nearest.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/explain.hpp"

using nlohmann::json;
using opcache::store::Candidate;
using opcache::store::Difference;
using opcache::store::json_differences;
using opcache::store::rank_candidates;

TEST_CASE("store::json_differences names each differing leaf by its path, with both values") {
  const json stored = json::parse(R"({"op_type":"Add","inputs":[{"shape":[8,8],"dtype":"float16"}],"attrs":{"axis":1}})");
  const json wanted = json::parse(R"({"op_type":"Add","inputs":[{"shape":[8,16],"dtype":"float16"}],"mode":"x"})");
  const auto differences = json_differences(stored, wanted, "descriptor");
  REQUIRE(differences.size() == 3);
  CHECK(differences[0] == Difference{"descriptor.attrs", json{{"axis", 1}}, std::nullopt});
  CHECK(differences[1] == Difference{"descriptor.inputs[0].shape[1]", json(8), json(16)});
  CHECK(differences[2] == Difference{"descriptor.mode", std::nullopt, json("x")});
  CHECK(json_differences(stored, stored, "descriptor").empty());
}

TEST_CASE("store::json_differences compares exec's [name, digest] pairs by name and quotes odd member names") {
  const json stored = json::parse(R"({"files":[["k.c","aaa"],["k.h","hhh"]],"extra":{"cann.opp":"8.0.RC2"}})");
  const json wanted = json::parse(R"({"files":[["k.h","hhh"],["k.c","bbb"],["new.c","nnn"]],"extra":{"cann.opp":"8.0.RC3"}})");
  const auto differences = json_differences(stored, wanted, "x");
  REQUIRE(differences.size() == 3);
  CHECK(differences[0].path == "x.extra[\"cann.opp\"]");
  CHECK(differences[1] == Difference{"x.files[\"k.c\"]", json("aaa"), json("bbb")});
  CHECK(differences[2] == Difference{"x.files[\"new.c\"]", std::nullopt, json("nnn")});
}

TEST_CASE("store::rank_candidates puts the fewest differences first, the exact entry with none, and keeps `limit`") {
  const json descriptor = json::parse(R"({"op_type":"Add","inputs":[{"shape":[8]}]})");
  const json scenario = json::parse(R"({"device_mode":"single","phase":"train","toolchain":"8.0.RC3","soc":"Ascend910B1"})");
  json older_toolchain = scenario;
  older_toolchain["toolchain"] = "8.0.RC2";
  json other_chip = older_toolchain;
  other_chip["soc"] = "Ascend310P3";
  const json other_shape = json::parse(R"({"op_type":"Add","inputs":[{"shape":[16]}]})");
  const std::vector<Candidate> candidates{{"c2", other_shape, other_chip},
                                          {"b1", descriptor, older_toolchain},
                                          {"a0", descriptor, scenario}};
  const auto ranked = rank_candidates(descriptor, scenario, candidates, 2);
  REQUIRE(ranked.size() == 2);
  CHECK(ranked[0].key == "a0");
  CHECK(ranked[0].differences.empty());
  CHECK(ranked[1].key == "b1");
  REQUIRE(ranked[1].differences.size() == 1);
  CHECK(ranked[1].differences[0] == Difference{"scenario.toolchain", json("8.0.RC2"), json("8.0.RC3")});
  CHECK(rank_candidates(descriptor, scenario, candidates, 5).back().differences.size() == 3);
}
