// The bucket layout (remote/s3/layout.hpp): marker names round-trip every
// field, including empty, dot-only and non-ASCII ones.
#include <doctest/doctest.h>

#include "base/sha256.hpp"
#include "remote/s3/layout.hpp"

using namespace opcache::remote;

TEST_CASE("remote::S3Layout marker names round-trip empty, dot-only, slashed and non-ASCII fields") {
  const std::string key = opcache::base::sha256_hex("layout");
  const S3IndexFields fields{"", ".", "..", "gcc/12 \xC3\xA9", "Mat%Mul"};
  const std::string name = s3_index_name(fields, key);
  CHECK(name == "v1/index/%/%./%../gcc%2F12%20%C3%A9/Mat%25Mul/" + key);
  auto parsed = parse_s3_index_name(name);
  REQUIRE(parsed.has_value());
  CHECK(parsed->first.device_mode.empty());
  CHECK(parsed->first.phase == ".");
  CHECK(parsed->first.toolchain == "..");
  CHECK(parsed->first.soc == "gcc/12 \xC3\xA9");
  CHECK(parsed->first.op_type == "Mat%Mul");
  CHECK(parsed->second == key);
}

TEST_CASE("remote::S3Layout prefixes stop at the first empty filter field and reject foreign names") {
  CHECK(s3_index_prefix(S3IndexFields{"npu", "train", "", "910b", ""}) == "v1/index/npu/train/");
  CHECK(s3_index_prefix(S3IndexFields{}) == "v1/index/");
  CHECK(s3_bundle_name("abc") == "v1/bundles/abc");
  CHECK_FALSE(parse_s3_index_name("v1/bundles/x").has_value());
  CHECK_FALSE(parse_s3_index_name("v1/index/a/b/c/d/e/not-a-key").has_value());
  CHECK_FALSE(parse_s3_index_name("v1/index/a/b/c/d/" + opcache::base::sha256_hex("x")).has_value());
}
