// The bundle manifest (store/manifest.hpp): JSON round trip, strict
// validation of every field, member names and roles.
#include <doctest/doctest.h>

#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/canonical_json.hpp"
#include "base/sha256.hpp"
#include "store/key.hpp"
#include "store/manifest.hpp"
#include "store/scenario.hpp"
#include "tests/support/bundle_inputs.hpp"

namespace {

using nlohmann::json;
using opcache::ErrorCode;
using opcache::base::sha256_hex;
using opcache::store::BundleLimits;
using opcache::store::check_member_name;
using opcache::store::Manifest;
using opcache::store::manifest_from_json;
using opcache::store::manifest_to_json;
using opcache::store::role_for_member_name;
using opcache::test::scenario_json;

Manifest sample_manifest() {
  Manifest manifest;
  manifest.descriptor = {{"op_type", "Square"},
                         {"inputs", {{{"shape", {3}}, {"dtype", "float32"}, {"format", "ND"}}}},
                         {"outputs", {{{"shape", {3}}, {"dtype", "float32"}, {"format", "ND"}}}},
                         {"attrs", {{"big", 9007199254740993ull}}}};
  manifest.scenario = scenario_json("device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1,extra.python=3.9");
  manifest.key = *opcache::store::derive_key(manifest.descriptor, manifest.scenario);
  manifest.members = {{"square_12484080525657478220_2.o", 4,
                       opcache::base::sha256_hex("\x7f"
                                  "ELF"),
                       "object"},
                      {"square_12484080525657478220_2.json", 2, opcache::base::sha256_hex("{}"), "metadata"},
                      {"square_12484080525657478220_2.info", 0, opcache::base::sha256_hex(""), "info"}};
  manifest.producer = {"opcache", "0.1.0", "node-7"};
  manifest.created = "2026-11-22T00:51:54Z";
  manifest.build_ms = 4321;
  return manifest;
}

json sample_json() {
  return manifest_to_json(sample_manifest());
}

// Expects manifest_from_json(value) to fail with `corrupt` and a message holding every needle.
void expect_rejected(const json& value, const std::vector<std::string>& needles, const BundleLimits& limits = {}) {
  auto result = manifest_from_json(value, limits);
  REQUIRE_FALSE(result.ok());
  INFO("message: " << result.error().message());
  CHECK(result.error().code() == ErrorCode::corrupt);
  for (const auto& needle : needles) {
    CHECK_MESSAGE(result.error().message().find(needle) != std::string::npos,
                  "expected \"" << needle << "\" in the message");
  }
}

}  // namespace

TEST_CASE("store::manifest_to_json and manifest_from_json round-trip every field") {
  Manifest original = sample_manifest();
  json value = manifest_to_json(original);
  CHECK(value["format"] == "opcache-bundle");
  CHECK(value["format_version"] == 1);
  CHECK(value["compression"] == "zstd");
  CHECK(value["producer"]["host"] == "node-7");

  auto parsed = manifest_from_json(value, {});
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message()));
  CHECK(parsed->key == original.key);
  CHECK(parsed->descriptor == original.descriptor);
  CHECK(parsed->scenario == original.scenario);
  CHECK(parsed->members == original.members);
  CHECK(parsed->producer.tool == "opcache");
  CHECK(parsed->producer.version == "0.1.0");
  CHECK(parsed->producer.host == "node-7");
  CHECK(parsed->created == original.created);
  CHECK(parsed->build_ms == 4321);
  CHECK(parsed->op_type() == "Square");
  CHECK(parsed->total_size() == 6);
  // The 64-bit attribute survives exactly, and the canonical bytes are stable.
  CHECK(parsed->descriptor["attrs"]["big"].get<std::uint64_t>() == 9007199254740993ull);
  CHECK(*opcache::base::canonical_json(manifest_to_json(*parsed)) == *opcache::base::canonical_json(value));
}

TEST_CASE("store::manifest_from_json accepts a manifest without producer.host and one parsed from canonical text") {
  Manifest original = sample_manifest();
  original.producer.host.clear();
  json value = manifest_to_json(original);
  CHECK_FALSE(value["producer"].contains("host"));
  auto text = opcache::base::canonical_json(value);
  REQUIRE(text.ok());
  auto parsed = manifest_from_json(json::parse(*text), {});
  REQUIRE(parsed.ok());
  CHECK(parsed->producer.host.empty());
  CHECK(parsed->members == original.members);
}

TEST_CASE("store::manifest_from_json rejects unknown fields at the top level and in members") {
  json top = sample_json();
  top["signature"] = "abc";
  expect_rejected(top, {"manifest has unknown field \"signature\""});

  json member = sample_json();
  member["members"][1]["mode"] = "0755";
  expect_rejected(member, {"manifest member 1 has unknown field \"mode\""});
}

TEST_CASE("store::manifest_from_json rejects a manifest that is not an object or lacks a field") {
  expect_rejected(json::array(), {"manifest is not a JSON object"});
  expect_rejected("manifest", {"manifest is not a JSON object"});
  for (const char* field : {"format", "format_version", "key", "descriptor", "scenario", "members", "compression",
                            "producer", "created", "build_ms"}) {
    CAPTURE(field);
    json value = sample_json();
    value.erase(field);
    expect_rejected(value, {std::string("manifest has no \"") + field + "\""});
  }
  for (const char* field : {"name", "size", "sha256", "role"}) {
    CAPTURE(field);
    json value = sample_json();
    value["members"][0].erase(field);
    expect_rejected(value, {std::string("manifest has no \"") + field + "\""});
  }
  for (const char* field : {"tool", "version"}) {
    CAPTURE(field);
    json value = sample_json();
    value["producer"].erase(field);
    expect_rejected(value, {std::string("manifest has no \"") + field + "\""});
  }
}

TEST_CASE("store::manifest_from_json rejects fields of the wrong type") {
  struct Case {
    const char* field;
    json value;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"format", 1, "field \"format\" must be a string"},
      {"format_version", "1", "field \"format_version\" must be an integer"},
      {"format_version", 1.0, "field \"format_version\" must be an integer"},
      {"format_version", -1, "field \"format_version\" must be an integer"},
      {"key", 7, "field \"key\" must be a string"},
      {"descriptor", "Square", "field \"descriptor\" must be an object"},
      {"scenario", json::array(), "field \"scenario\" must be an object"},
      {"members", json::object(), "field \"members\" must be an array"},
      {"compression", nullptr, "field \"compression\" must be a string"},
      {"producer", "opcache", "field \"producer\" must be an object"},
      {"created", 0, "field \"created\" must be a string"},
      {"build_ms", -1, "field \"build_ms\" must be a non-negative integer"},
      {"build_ms", "5", "field \"build_ms\" must be a non-negative integer"},
      {"build_ms", 1.5, "field \"build_ms\" must be a non-negative integer"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.field);
    CAPTURE(c.value.dump());
    json value = sample_json();
    value[c.field] = c.value;
    expect_rejected(value, {c.expected});
  }

  json host = sample_json();
  host["producer"]["host"] = 5;
  expect_rejected(host, {"\"producer.host\" must be a string"});
  json tool = sample_json();
  tool["producer"]["tool"] = false;
  expect_rejected(tool, {"field \"tool\" must be a string"});
}

TEST_CASE("store::manifest_from_json rejects a build_ms beyond the signed 64-bit range") {
  // 2^64-1 is a JSON integer but Manifest::build_ms is int64_t: it must not
  // silently wrap to -1.
  json value = sample_json();
  value["build_ms"] = 18446744073709551615ull;
  expect_rejected(value, {"build_ms"});
}

TEST_CASE("store::manifest_from_json rejects a created time that is not RFC 3339 UTC") {
  // schemas/manifest.schema.json requires "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$";
  // the reader must not accept manifests its own schema refuses.
  for (const std::string created : {"yesterday", "2026-11-22 00:51:54", "2026-11-22T00:51:54+01:00", ""}) {
    CAPTURE(created);
    json value = sample_json();
    value["created"] = created;
    expect_rejected(value, {"created"});
  }
}

TEST_CASE("store::manifest_from_json rejects members with bad values") {
  struct Case {
    const char* field;
    json value;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"name", 5, "field \"name\" must be a string"},
      {"name", "../escape.o", "manifest member 0: member name \"../escape.o\""},
      {"name", "dir/k.o", "must be a base name"},
      {"size", -4, "field \"size\" must be a non-negative integer"},
      {"size", "4", "field \"size\" must be a non-negative integer"},
      {"size", 4.0, "field \"size\" must be a non-negative integer"},
      {"sha256", 1, "field \"sha256\" must be a string"},
      {"sha256", std::string(64, 'A'),
       "manifest member 0 (\"square_12484080525657478220_2.o\") has a malformed sha256"},
      {"sha256", std::string(63, 'a'), "has a malformed sha256"},
      {"sha256", std::string(64, 'g'), "has a malformed sha256"},
      {"role", "binary", "has unknown role \"binary\""},
      {"role", 1, "field \"role\" must be a string"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.field);
    CAPTURE(c.value.dump());
    json value = sample_json();
    value["members"][0][c.field] = c.value;
    expect_rejected(value, {c.expected});
  }

  json not_object = sample_json();
  not_object["members"][2] = "k.o";
  expect_rejected(not_object, {"manifest member 2 is not an object"});

  json none = sample_json();
  none["members"] = json::array();
  expect_rejected(none, {"manifest lists no members"});

  json twice = sample_json();
  twice["members"][1]["name"] = twice["members"][0]["name"];
  expect_rejected(twice, {"manifest lists member \"square_12484080525657478220_2.o\" twice"});
}

TEST_CASE("store::manifest_from_json enforces member count, member size and total size limits") {
  BundleLimits count;
  count.max_members = 2;
  expect_rejected(sample_json(), {"manifest lists 3 members, above the limit of 2"}, count);

  BundleLimits member;
  member.max_member_bytes = 3;
  expect_rejected(sample_json(), {"manifest member 0", "declares 4 bytes, above the limit of 3"}, member);

  BundleLimits total;
  total.max_total_bytes = 5;
  expect_rejected(sample_json(), {"manifest members add up to more than the limit of 5 bytes"}, total);

  BundleLimits exact;
  exact.max_members = 3;
  exact.max_member_bytes = 4;
  exact.max_total_bytes = 6;
  CHECK(manifest_from_json(sample_json(), exact).ok());

  // A huge declared size is refused from the manifest, before any decompression.
  json huge = sample_json();
  huge["members"][0]["size"] = 1ull << 40;
  expect_rejected(huge, {"declares 1099511627776 bytes, above the limit of 1073741824"});
}

TEST_CASE("store::manifest_from_json rejects a wrong format, format_version or compression") {
  json format = sample_json();
  format["format"] = "opcache-bundle-v2";
  expect_rejected(format, {"manifest format is not \"opcache-bundle\""});

  json version = sample_json();
  version["format_version"] = 2;
  expect_rejected(version, {"manifest format_version 2 is not supported", "reads 1"});

  json compression = sample_json();
  compression["compression"] = "gzip";
  expect_rejected(compression, {"manifest compression \"gzip\" is not supported", "only \"zstd\""});
}

TEST_CASE("store::manifest_from_json rejects a malformed key") {
  const std::string good = sample_json()["key"];
  std::string upper = good;
  for (auto& c : upper) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  REQUIRE(upper != good);
  for (const std::string& key : {upper, good.substr(1), good + "0", std::string(64, 'z'), std::string()}) {
    CAPTURE(key);
    json value = sample_json();
    value["key"] = key;
    expect_rejected(value, {"manifest key is not 64 lowercase hexadecimal characters"});
  }
}

TEST_CASE("store::manifest_from_json rejects a key that does not match the descriptor and scenario") {
  const std::string key = sample_json()["key"];

  json descriptor = sample_json();
  descriptor["descriptor"]["inputs"][0]["shape"][0] = 4;  // a tampered shape
  std::string recomputed = *opcache::store::derive_key(descriptor["descriptor"], descriptor["scenario"]);
  expect_rejected(descriptor,
                  {"manifest key " + key + " does not match its descriptor and scenario", "hash to " + recomputed});

  json attr = sample_json();
  attr["descriptor"]["attrs"]["big"] = 9007199254740992ull;  // differs only in the lowest bit
  expect_rejected(attr, {"does not match its descriptor and scenario"});

  json scenario = sample_json();
  scenario["scenario"]["soc"] = "Ascend910B2";
  expect_rejected(scenario, {"does not match its descriptor and scenario"});

  json extra = sample_json();
  extra["scenario"]["extra"]["python"] = "3.10";
  expect_rejected(extra, {"does not match its descriptor and scenario"});

  json other_key = sample_json();
  other_key["key"] = opcache::base::sha256_hex("something else");
  expect_rejected(other_key, {"does not match its descriptor and scenario"});
}

TEST_CASE("store::manifest_from_json rejects an invalid stored descriptor") {
  json no_op = sample_json();
  no_op["descriptor"].erase("op_type");
  expect_rejected(no_op, {"manifest", "op_type"});

  json empty_op = sample_json();
  empty_op["descriptor"]["op_type"] = "";
  expect_rejected(empty_op, {"\"op_type\" must be a non-empty string"});

  json number_op = sample_json();
  number_op["descriptor"]["op_type"] = 3;
  expect_rejected(number_op, {"\"op_type\" must be a non-empty string"});
}

TEST_CASE("store::manifest_from_json rejects a scenario that is not in canonical form") {
  SUBCASE("an empty extra is present") {
    json value = sample_json();
    value["scenario"]["extra"] = json::object();
    // Even with a key computed over exactly this object, the form is refused.
    value["key"] = *opcache::store::derive_key(value["descriptor"], value["scenario"]);
    expect_rejected(value, {"manifest scenario is not in canonical form", "empty \"extra\" must be omitted"});
  }
  SUBCASE("device_mode is missing") {
    json value = sample_json();
    value["scenario"].erase("device_mode");
    value["key"] = *opcache::store::derive_key(value["descriptor"], value["scenario"]);
    expect_rejected(value, {"manifest scenario has no \"device_mode\""});
  }
  SUBCASE("an invalid phase") {
    json value = sample_json();
    value["scenario"]["phase"] = "serve";
    expect_rejected(value, {"manifest scenario", "phase must be \"train\" or \"infer\""});
  }
  SUBCASE("an unknown scenario field") {
    json value = sample_json();
    value["scenario"]["rank"] = "0";
    expect_rejected(value, {"manifest scenario", "unknown scenario field \"rank\""});
  }
  SUBCASE("a non-string toolchain") {
    json value = sample_json();
    value["scenario"]["toolchain"] = 8;
    expect_rejected(value, {"scenario field \"toolchain\" must be a string"});
  }
}

TEST_CASE("store::check_member_name accepts safe base names") {
  const std::vector<std::string> accepted = {
      "square_12484080525657478220_2.o",
      "square_12484080525657478220_2.json",
      "te_matmul_0123abcd.info",
      "Conv2D (v2)+fast.o",
      "static_kernel_20240101.run",
      "\xE7\xAE\x97\xE5\xAD\x90.o",  // 算子.o
      "\xF0\x9F\x98\x80.cubin",      // U+1F600
      ".hidden.o",
      "a.b.c",
      "-rf",
      "x",
      std::string(255, 'n'),
      [] {  // 85 three-byte characters: exactly 255 bytes
        std::string name;
        for (int i = 0; i < 85; ++i) {
          name += "\xE7\xAE\x97";
        }
        return name;
      }(),
  };
  for (const auto& name : accepted) {
    CAPTURE(name);
    auto status = check_member_name(name);
    CHECK_MESSAGE(status.ok(), (status.ok() ? "" : status.error().message()));
  }
}

TEST_CASE("store::check_member_name rejects names that could leave their directory or confuse a terminal") {
  struct Case {
    std::string name;
    const char* expected;
  };
  const std::vector<Case> rejected = {
      {"", "must be 1 to 255 bytes long"},
      {std::string(256, 'n'), "must be 1 to 255 bytes long"},
      {".", "must not be \".\" or contain \"..\""},
      {"..", "contain \"..\""},
      {"../etc/passwd", "contain \"..\""},
      {"a..b.o", "contain \"..\""},
      {"k.o..", "contain \"..\""},
      {"/etc/passwd", "must be a base name"},
      {"a/b", "must be a base name"},
      {"dir/", "must be a base name"},
      {"a\\b", "must be a base name"},
      {"C:\\x.o", "must be a base name"},
      {std::string("a\0b", 3), "control character"},
      {"a\nb", "control character"},
      {"a\tb", "control character"},
      {"\x1b[31mred.o", "control character"},
      {"a\x7f", "control character"},
      {"\xC3\x28.o", "not valid UTF-8"},          // bad continuation byte
      {"\xC0\xAF.o", "not valid UTF-8"},          // overlong '/'
      {"\xED\xA0\x80.o", "not valid UTF-8"},      // UTF-16 surrogate
      {"\xF4\x90\x80\x80.o", "not valid UTF-8"},  // beyond U+10FFFF
      {"\xE7\xAE", "not valid UTF-8"},            // truncated sequence
      {"\xFF.o", "not valid UTF-8"},
  };
  for (const auto& c : rejected) {
    CAPTURE(c.name);
    auto status = check_member_name(c.name);
    REQUIRE_FALSE(status.ok());
    INFO("message: " << status.error().message());
    CHECK(status.error().code() == ErrorCode::usage);
    CHECK(status.error().message().find("member name") != std::string::npos);
    CHECK(status.error().message().find(c.expected) != std::string::npos);
  }
  // 86 three-byte characters are 258 bytes: too long, although only 86 characters.
  std::string long_utf8;
  for (int i = 0; i < 86; ++i) {
    long_utf8 += "\xE7\xAE\x97";
  }
  CHECK_FALSE(check_member_name(long_utf8).ok());
}

TEST_CASE("store::role_for_member_name maps extensions to roles") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"square_1_2.o", "object"},  {"kernel.cubin", "object"},
      {"kernel.bin", "object"},    {"square_1_2.json", "metadata"},
      {"square_1_2.info", "info"}, {"static_kernel.run", "package"},
      {"README", "other"},         {"k.O", "other"},
      {"k.json.bak", "other"},     {"o", "other"},
      {"k.obj", "other"},          {"k.txt", "other"},
  };
  for (const auto& [name, role] : cases) {
    CAPTURE(name);
    CHECK(role_for_member_name(name) == role);
  }
}

TEST_CASE("store::rfc3339_now is UTC with seconds precision") {
  std::string now = opcache::store::rfc3339_now();
  CHECK(std::regex_match(now, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)")));
}

TEST_CASE("store::Manifest::op_type is empty when the descriptor has no string op_type") {
  Manifest manifest;
  manifest.descriptor = {{"inputs", json::array()}};
  CHECK(manifest.op_type().empty());
  manifest.descriptor = {{"op_type", 5}};
  CHECK(manifest.op_type().empty());
  CHECK(manifest.total_size() == 0);
}
