// Key derivation vectors. These pin the canonical form and the keys: if one of
// them changes, every cache in the field is invalidated (docs/formats.md).
#include <doctest/doctest.h>

#include <set>

#include "base/canonical_json.hpp"
#include "base/json_parse.hpp"
#include "store/key.hpp"
#include "store/scenario.hpp"
#include "base/sha256.hpp"

using opcache::base::canonical_json;
using opcache::store::derive_key;
using opcache::base::parse_json;

namespace {

std::string canonical(const std::string& text) {
  auto parsed = opcache::base::parse_json(text, "test");
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message()));
  auto result = opcache::base::canonical_json(*parsed);
  REQUIRE(result.ok());
  return *result;
}

const char* const k_multi_train_scenario =
    R"({"device_mode":"multi","phase":"train","toolchain":"8.0.RC2","soc":"Ascend910B1"})";

}  // namespace

TEST_CASE("opcache::base::canonical_json sorts keys and removes whitespace") {
  CHECK(canonical(R"({ "b" : 1, "a" : [ 1 , 2 ], "c": {"z": null, "y": true} })") ==
        R"({"a":[1,2],"b":1,"c":{"y":true,"z":null}})");
}

TEST_CASE("opcache::base::canonical_json sorts keys by UTF-16 code units, not UTF-8 bytes") {
  // U+1F600 (surrogates D83D DE00) sorts before U+FB01 in UTF-16, after it in UTF-8.
  CHECK(canonical("{\"\xEF\xAC\x81\":1,\"\xF0\x9F\x98\x80\":2,\"a\":3}") ==
        "{\"a\":3,\"\xF0\x9F\x98\x80\":2,\"\xEF\xAC\x81\":1}");
}

TEST_CASE("opcache::base::canonical_json escapes strings minimally") {
  CHECK(canonical(R"(["\u0041\u00e9\u20ac", "\"\\/", "\b\f\n\r\t", "\u0001\u001f\u007f"])") ==
        "[\"A\xC3\xA9\xE2\x82\xAC\",\"\\\"\\\\/\",\"\\b\\f\\n\\r\\t\",\"\\u0001\\u001f\x7f\"]");
  CHECK(canonical(R"("\ud83d\ude00")") == "\"\xF0\x9F\x98\x80\"");
}

TEST_CASE("opcache::base::canonical_json writes numbers like ECMAScript, integers exactly") {
  CHECK(canonical("[1.0, -0.0, 0, -0, 1e2, 1E-7, 1.5e300, 0.000001, 123456789012345680000, 1e21]") ==
        "[1,0,0,0,100,1e-7,1.5e+300,0.000001,123456789012345680000,1e+21]");
  CHECK(canonical("[0.1, 2.5, -3.75, 4.35, 333333333.33333329]") == "[0.1,2.5,-3.75,4.35,333333333.3333333]");
  // 64-bit integers are exact (the opcache deviation from RFC 8785).
  CHECK(canonical("[9007199254740993, -9223372036854775808, 18446744073709551615]") ==
        "[9007199254740993,-9223372036854775808,18446744073709551615]");
  // Beyond 64 bits an integer literal is a double.
  CHECK(canonical("[18446744073709551616]") == "[18446744073709552000]");
}

TEST_CASE("opcache::base::canonical_json keeps nested arrays in order") {
  CHECK(canonical(R"([[3,[2,[1]]],[],{}])") == R"([[3,[2,[1]]],[],{}])");
}

TEST_CASE("opcache::base::format_es_double matches RFC 8785 appendix B samples") {
  using opcache::base::format_es_double;
  CHECK(opcache::base::format_es_double(4.94065645841246544e-324) == "5e-324");
  CHECK(opcache::base::format_es_double(1.7976931348623157e308) == "1.7976931348623157e+308");
  CHECK(opcache::base::format_es_double(9007199254740992.0) == "9007199254740992");
  CHECK(opcache::base::format_es_double(295147905179352830000.0) == "295147905179352830000");
  CHECK(opcache::base::format_es_double(1e23) == "1e+23");
  CHECK(opcache::base::format_es_double(5e-7) == "5e-7");
  CHECK(opcache::base::format_es_double(0.000001) == "0.000001");
}

TEST_CASE("opcache::base::parse_json rejects duplicate keys, bad syntax and huge numbers") {
  auto duplicate = opcache::base::parse_json(R"({"a":1,"a":2})", "desc.json");
  REQUIRE_FALSE(duplicate.ok());
  CHECK(duplicate.error().message().find("desc.json") == 0);
  CHECK(duplicate.error().message().find("duplicate object key \"a\"") != std::string::npos);
  CHECK_FALSE(opcache::base::parse_json(R"({"a":)", "x").ok());
  CHECK_FALSE(opcache::base::parse_json("1e400", "x").ok());
  CHECK(opcache::base::parse_json(R"({"a":{"a":1},"b":{"a":2}})", "x").ok());  // same key in different objects is fine
}

TEST_CASE("store::derive_key pins the key of known descriptors") {
  auto scenario = opcache::base::parse_json(k_multi_train_scenario, "scenario").value();
  auto descriptor = opcache::base::parse_json(R"({"op_type":"Square","inputs":[{"shape":[3],"dtype":"float32"}]})", "d").value();
  auto preimage = opcache::store::key_preimage(descriptor, scenario).value();
  CHECK(preimage ==
        "opcache-key-v1\n"
        R"({"inputs":[{"dtype":"float32","shape":[3]}],"op_type":"Square"})"
        "\n"
        R"({"device_mode":"multi","phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC2"})");
  CHECK(derive_key(descriptor, scenario).value() == opcache::base::sha256_hex(preimage));
  // Computed independently: python3 -c 'import hashlib; print(hashlib.sha256(PREIMAGE).hexdigest())'
  CHECK(derive_key(descriptor, scenario).value() ==
        "0b260b16045d4c3ebf96fddd95e5b25f3b6432c2446d8e796dced272f43eef54");
}

TEST_CASE("store::derive_key ignores key order and whitespace but not semantics") {
  auto scenario = opcache::base::parse_json(k_multi_train_scenario, "scenario").value();
  auto a = opcache::base::parse_json(R"({"op_type":"MatMul","attrs":{"transpose_a":false,"n":9007199254740993}})", "a").value();
  auto b = opcache::base::parse_json("{ \"attrs\" : { \"n\" : 9007199254740993, \"transpose_a\" : false },\n \"op_type\":\"MatMul\" }",
                      "b")
               .value();
  auto c = opcache::base::parse_json(R"({"op_type":"MatMul","attrs":{"transpose_a":false,"n":9007199254740992}})", "c").value();
  auto d = opcache::base::parse_json(R"({"op_type":"MatMul","attrs":{"transpose_a":false,"n":9007199254740993.0}})", "d").value();
  CHECK(derive_key(a, scenario).value() == derive_key(b, scenario).value());
  CHECK(derive_key(a, scenario).value() != derive_key(c, scenario).value());  // low bits of a big integer
  CHECK(derive_key(a, scenario).value() != derive_key(d, scenario).value());  // integer vs float
}

TEST_CASE("store::derive_key separates scenarios") {
  auto descriptor = opcache::base::parse_json(R"({"op_type":"Relu"})", "d").value();
  auto train = opcache::base::parse_json(k_multi_train_scenario, "s").value();
  auto infer = train;
  infer["phase"] = "infer";
  auto single = train;
  single["device_mode"] = "single";
  auto toolchain = train;
  toolchain["toolchain"] = "8.0.RC3";
  auto extra = train;
  extra["extra"] = {{"python", "3.11"}};
  std::set<std::string> keys;
  for (const auto& scenario : {train, infer, single, toolchain, extra}) {
    keys.insert(derive_key(descriptor, scenario).value());
  }
  CHECK(keys.size() == 5);
}

TEST_CASE("store::check_key accepts only 64 lowercase hex characters") {
  CHECK(opcache::store::check_key(std::string(64, 'a')).ok());
  CHECK_FALSE(opcache::store::check_key(std::string(64, 'A')).ok());
  CHECK_FALSE(opcache::store::check_key(std::string(63, 'a')).ok());
  CHECK_FALSE(opcache::store::check_key("../../etc/passwd").ok());
}
