// Key derivation without a store (include/opcache/key.hpp) and the format
// versions (include/opcache/formats.hpp).
#include <doctest/doctest.h>

#include <string>

#include "opcache/formats.hpp"
#include "opcache/key.hpp"
#include "opcache/opcache.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::ErrorCode;

namespace {

opcache::Scenario scenario() {
  return opcache::parse_scenario("device=single,phase=infer,toolchain=t1,soc=s1").value();
}

constexpr const char* k_add_descriptor = R"({"op_type": "Add", "kernel_name": "te_add_123", "shape": [2, 3]})";

}  // namespace

TEST_CASE("api::derive_key equals Store::key for the same volatile-fields setting") {
  opcache::test::TempDir dir;
  for (const char* setting : {"", "none", "+shape", "shape"}) {
    CAPTURE(setting);
    opcache::StoreConfig config;
    config.cache_dir = dir.path() / (std::string("store") + setting);
    config.no_remote = true;
    std::optional<std::string> volatile_fields;
    if (*setting != '\0') {
      volatile_fields = setting;
      config.volatile_fields = setting;
    }
    auto store = opcache::Store::open(config);
    REQUIRE(store);
    auto expected = store->key(k_add_descriptor, scenario());
    REQUIRE(expected);
    auto key = opcache::derive_key(k_add_descriptor, scenario(), volatile_fields);
    REQUIRE(key);
    CHECK(*key == *expected);
  }
  CHECK(opcache::derive_key(k_add_descriptor, scenario(), std::nullopt).value() !=
        opcache::derive_key(k_add_descriptor, scenario(), std::string("none")).value());
}

TEST_CASE("api::derive_key reports bad descriptors and settings as usage errors") {
  CHECK(opcache::derive_key("{", scenario(), std::nullopt).error().code() == ErrorCode::usage);
  CHECK(opcache::derive_key(R"({"shape": 1})", scenario(), std::nullopt).error().code() == ErrorCode::usage);
  CHECK(opcache::derive_key(k_add_descriptor, scenario(), std::string("a..b")).error().code() == ErrorCode::usage);
}

TEST_CASE("api::formats reports the key, bundle and index versions") {
  CHECK(opcache::key_derivation_version() == "opcache-key-v1");
  CHECK(opcache::bundle_format_version() == 1);
  CHECK(opcache::index_schema_version() == 2);
}
