// scan_manifest_for_hit (store/manifest_scan.cpp): the fast read of a local
// hit's manifest gives what the strict parse gives, or gives up.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "base/canonical_json.hpp"
#include "base/sha256.hpp"
#include "store/manifest.hpp"
#include "store/manifest_scan.hpp"
#include "tests/store/aging_fixture.hpp"

using opcache::store::BundleLimits;
using opcache::store::KeyCheck;
using opcache::store::scan_manifest_for_hit;

namespace {

nlohmann::json sample_manifest_json() {
  opcache::store::Manifest manifest;
  manifest.descriptor = {{"op_type", "Add"}, {"attrs", {{"alpha", 1.5}, {"name", "a \"quoted\" \\ value"}}},
                         {"inputs", nlohmann::json::array({{{"shape", {2, 3}}, {"dtype", "float16"}}})}};
  manifest.scenario = {{"device_mode", "single"}, {"phase", "train"}, {"soc", "Ascend910B1"}, {"toolchain", "8.0"}};
  manifest.key = opcache::base::sha256_hex("key");
  manifest.members = {{"Add_1_0.o", 5280, opcache::base::sha256_hex("o"), "object"},
                      {"Add_1_0.json", 0, opcache::base::sha256_hex(""), "metadata"}};
  manifest.producer = {"opcache", "0.1.0", "host"};
  manifest.created = "2026-11-23T22:40:36Z";
  manifest.build_ms = 282;
  return opcache::store::manifest_to_json(manifest);
}

std::string canonical_text(const nlohmann::json& value) {
  return opcache::base::canonical_json(value).value();
}

}  // namespace

TEST_CASE("store::scan_manifest_for_hit reads key, members, created and build_ms as the strict parse does") {
  const nlohmann::json value = sample_manifest_json();
  auto strict = opcache::store::manifest_from_json(value, BundleLimits{}, KeyCheck::trust_digest);
  REQUIRE(strict.ok());
  for (const std::string& text : {canonical_text(value), value.dump(2)}) {
    auto scanned = scan_manifest_for_hit(text, BundleLimits{});
    REQUIRE(scanned.has_value());
    CHECK(scanned->key == strict->key);
    CHECK(scanned->members == strict->members);
    CHECK(scanned->created == strict->created);
    CHECK(scanned->build_ms == strict->build_ms);
    CHECK(scanned->descriptor.is_null());  // skipped: a hit does not use it
  }
}

TEST_CASE("store::scan_manifest_for_hit gives up on anything it cannot vouch for") {
  const nlohmann::json value = sample_manifest_json();
  auto with = [&](const char* pointer, const nlohmann::json& replacement) {
    nlohmann::json changed = value;
    changed[nlohmann::json::json_pointer(pointer)] = replacement;
    return canonical_text(changed);
  };
  CHECK_FALSE(scan_manifest_for_hit(with("/members/0/name", "a\nb.o"), {}));       // escaped in JSON
  CHECK_FALSE(scan_manifest_for_hit(with("/members/0/name", "../evil.o"), {}));    // unsafe name
  CHECK_FALSE(scan_manifest_for_hit(with("/members/1/name", "Add_1_0.o"), {}));    // twice
  CHECK_FALSE(scan_manifest_for_hit(with("/members/0/size", 52.5), {}));
  CHECK_FALSE(scan_manifest_for_hit(with("/members/0/size", -1), {}));
  CHECK_FALSE(scan_manifest_for_hit(with("/members/0/sha256", "00"), {}));
  CHECK_FALSE(scan_manifest_for_hit(with("/members/0/role", "weird"), {}));
  CHECK_FALSE(scan_manifest_for_hit(with("/members", nlohmann::json::array()), {}));
  CHECK_FALSE(scan_manifest_for_hit(with("/key", "not-hex"), {}));
  CHECK_FALSE(scan_manifest_for_hit(with("/format_version", 2), {}));
  CHECK_FALSE(scan_manifest_for_hit(with("/compression", "gzip"), {}));
  CHECK_FALSE(scan_manifest_for_hit(with("/extra", 1), {}));  // unknown field
  BundleLimits small;
  small.max_member_bytes = 100;
  CHECK_FALSE(scan_manifest_for_hit(canonical_text(value), small));
  const std::string text = canonical_text(value);
  CHECK_FALSE(scan_manifest_for_hit(text + "x", {}));
  CHECK_FALSE(scan_manifest_for_hit(text.substr(0, text.size() - 1), {}));
  CHECK_FALSE(scan_manifest_for_hit("{\"key\":\"" + value["key"].get<std::string>() + "\"," + text.substr(1), {}));
  CHECK_FALSE(scan_manifest_for_hit("[]", {}));
  CHECK_FALSE(scan_manifest_for_hit("", {}));
}

TEST_CASE("store::LocalStore::get falls back to the strict parse for a manifest the scan gives up on") {
  opcache::test::TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "kernel", "relu", 20);
  opcache::store::StoreOptions options;
  options.root = temp / "cache";
  auto store = opcache::store::LocalStore::open(options);
  REQUIRE(store.ok());
  // A '"' in a member name is escaped in the manifest's JSON: the scan gives up.
  auto input = opcache::test::aging::fixed_stamp_input(kernel);
  opcache::test::write_text(temp / "odd", "odd bytes");
  input.members.push_back(opcache::store::MemberSource{"we\"ird é.bin", temp / "odd", ""});
  auto put = (*store)->put(input, opcache::ReplacePolicy::keep_existing);
  REQUIRE(put.ok());
  auto hit = (*store)->get(put->key, temp / "out");
  REQUIRE(hit.ok());
  REQUIRE(hit->has_value());
  CHECK(opcache::test::read_text(temp / "out" / "we\"ird é.bin") == "odd bytes");
  CHECK(opcache::test::read_text(temp / "out" / kernel.object.filename()) == opcache::test::read_text(kernel.object));
}
