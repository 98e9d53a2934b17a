// Volatile descriptor fields (store/volatile_fields.hpp) and descriptor
// normalization (store/descriptor.hpp).
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/descriptor.hpp"
#include "store/key.hpp"
#include "store/volatile_fields.hpp"

namespace {

using nlohmann::json;
using opcache::ErrorCode;
using opcache::store::VolatileFieldFilter;

VolatileFieldFilter compiled(const std::vector<std::string>& patterns) {
  auto filter = VolatileFieldFilter::compile(patterns);
  REQUIRE_MESSAGE(filter.ok(), (filter.ok() ? "" : filter.error().message()));
  return *filter;
}

VolatileFieldFilter defaults() {
  auto filter = VolatileFieldFilter::from_setting(std::nullopt);
  REQUIRE(filter.ok());
  return *filter;
}

// A MindSpore .info compile job (docs/ascend-formats.md), as an opcache descriptor.
json mindspore_descriptor(const std::string& device_id, int job_id, const std::string& stem) {
  return json::parse(R"({
    "op_type": "Square",
    "job_content": {
      "SocInfo": {"autoTilingMode": "NO_TUNE", "coreNum": "", "deviceId": ")" +
                     device_id + R"(",
                  "l1Fusion": "false", "l2Mode": "2", "op_debug_dir": "./rank_)" +
                     device_id + R"(/",
                  "op_debug_level": "0", "op_impl_mode": "", "socVersion": "Ascend910A"},
      "full_name": "Default/Square-op)" +
                     std::to_string(job_id) + R"(",
      "fusion_op_name": ")" +
                     stem + R"(",
      "op_list": [
        {"name": "x_0", "type": "Data",
         "output_desc": [{"data_type": "float32", "format": "ND", "ori_format": "NCHW", "shape": [3],
                          "range": [[3, 3]], "param_type": "required"}]},
        {"build_type": "accurately_build", "func_name": "square", "module_name": "impl.square",
         "id": 7,
         "input_desc": [{"name": "x_0", "data_type": "float32", "format": "ND", "shape": [3]}],
         "output_desc": [{"name": "y", "shape": [3], "data_type": "float32", "format": "ND"}],
         "attrs": [{"name": "alpha", "value": 1.5}],
         "pattern": "Opaque", "py_module_path": "/usr/local/Ascend/opp/op_impl/built-in/ai_core/tbe",
         "kernel_name": ")" +
                     stem + R"(", "type": "Square", "unknown_shape": false}],
      "scope_id": -1},
    "job_id": )" + std::to_string(job_id) +
                     R"(, "job_type": "Compile", "source_id": 2})");
}

}  // namespace

TEST_CASE("store::VolatileFieldFilter defaults strip MindSpore job bookkeeping but keep what changes the kernel") {
  json raw = mindspore_descriptor("2", 1, "square_12484080525657478220_2");
  json stripped = defaults().strip(raw);
  json expected = json::parse(R"({
    "op_type": "Square",
    "job_content": {
      "SocInfo": {"autoTilingMode": "NO_TUNE", "coreNum": "", "l1Fusion": "false", "l2Mode": "2",
                  "op_debug_level": "0", "op_impl_mode": "", "socVersion": "Ascend910A"},
      "op_list": [
        {"type": "Data",
         "output_desc": [{"data_type": "float32", "format": "ND", "ori_format": "NCHW", "shape": [3],
                          "range": [[3, 3]], "param_type": "required"}]},
        {"build_type": "accurately_build", "func_name": "square", "module_name": "impl.square",
         "input_desc": [{"data_type": "float32", "format": "ND", "shape": [3]}],
         "output_desc": [{"shape": [3], "data_type": "float32", "format": "ND"}],
         "attrs": [{"name": "alpha", "value": 1.5}],
         "pattern": "Opaque", "type": "Square", "unknown_shape": false}]},
    "job_type": "Compile"})");
  CHECK(stripped == expected);
  // Attribute names are not tensor names: they are kept.
  CHECK(stripped["job_content"]["op_list"][1]["attrs"][0]["name"] == "alpha");
}

TEST_CASE("store::VolatileFieldFilter defaults give the same key for the same kernel compiled on another rank") {
  auto filter = defaults();
  json scenario = {{"device_mode", "multi"}, {"phase", "train"}, {"toolchain", "8.0.RC2"}, {"soc", "Ascend910A"}};
  json rank2 = filter.strip(mindspore_descriptor("2", 1, "square_12484080525657478220_2"));
  json rank5 = filter.strip(mindspore_descriptor("5", 40, "square_98765_5"));
  CHECK(rank2 == rank5);
  CHECK(*opcache::store::derive_key(rank2, scenario) == *opcache::store::derive_key(rank5, scenario));

  // A different shape is a different kernel.
  json other_shape = mindspore_descriptor("2", 1, "square_12484080525657478220_2");
  other_shape["job_content"]["op_list"][1]["input_desc"][0]["shape"] = {4};
  CHECK(*opcache::store::derive_key(filter.strip(other_shape), scenario) !=
        *opcache::store::derive_key(rank2, scenario));
  // So is a different chip.
  json other_soc = mindspore_descriptor("2", 1, "square_12484080525657478220_2");
  other_soc["job_content"]["SocInfo"]["socVersion"] = "Ascend910B1";
  CHECK(filter.strip(other_soc) != rank2);
}

TEST_CASE("store::VolatileFieldFilter '**' matches at any depth, including zero levels") {
  auto filter = compiled({"**.job_id"});
  json value = json::parse(R"({"job_id": 1, "keep": 1,
      "a": {"job_id": 2, "b": {"c": {"job_id": 3, "keep": 2}}},
      "list": [{"job_id": 4, "keep": 3}, [{"job_id": 5}]]})");
  CHECK(filter.strip(value) ==
        json::parse(R"({"keep": 1, "a": {"b": {"c": {"keep": 2}}}, "list": [{"keep": 3}, [{}]]})"));

  // A '**' in the middle: a.**.b matches a.b, a.x.b and a.x.y.b, but not c.b.
  auto middle = compiled({"a.**.b"});
  json nested = json::parse(R"({"a": {"b": 1, "x": {"b": 2, "y": {"b": 3, "k": 4}}}, "c": {"b": 5}, "b": 6})");
  CHECK(middle.strip(nested) == json::parse(R"({"a": {"x": {"y": {"k": 4}}}, "c": {"b": 5}, "b": 6})"));

  // Two '**' in one pattern.
  auto two = compiled({"**.op_list.**.name"});
  json ops = json::parse(R"({"name": "top", "op_list": [{"name": "n0", "desc": [{"name": "d0", "shape": [1]}]}],
                             "x": {"op_list": {"name": "n1"}}})");
  CHECK(two.strip(ops) ==
        json::parse(R"({"name": "top", "op_list": [{"desc": [{"shape": [1]}]}], "x": {"op_list": {}}})"));

  // '**' twice in a row is one '**'; the same pattern twice, or two patterns
  // reaching one field, remove it once.
  auto doubled = compiled({"**.**.pid", "**.pid", "a.pid"});
  CHECK(doubled.strip(json::parse(R"({"pid": 1, "a": {"pid": 2, "b": [{"pid": 3, "k": 4}]}})")) ==
        json::parse(R"({"a": {"b": [{"k": 4}]}})"));
  // Patterns anchored at the top beside ones that start with '**'.
  auto mixed = compiled({"**.pid", "a.b"});
  CHECK(mixed.strip(json::parse(R"({"x": {"a": {"b": 1}}, "a": {"b": 2, "pid": 3, "c": {"pid": 4}}})")) ==
        json::parse(R"({"x": {"a": {"b": 1}}, "a": {"c": {}}})"));
  // In place, the same result as the copy.
  json in_place = nested;
  middle.strip_in_place(in_place);
  CHECK(in_place == middle.strip(nested));
}

TEST_CASE("store::VolatileFieldFilter '*' matches one object key or array index, and removed elements shift") {
  auto keys = compiled({"*.id"});
  json value = json::parse(R"({"id": 0, "a": {"id": 1, "deep": {"id": 2}}, "b": [{"id": 3}], "c": 4})");
  // '*' is exactly one level: top-level "id" and a.deep.id stay, b.0.id is two levels down.
  CHECK(keys.strip(value) == json::parse(R"({"id": 0, "a": {"deep": {"id": 2}}, "b": [{"id": 3}], "c": 4})"));

  auto elements = compiled({"list.*.name"});
  CHECK(elements.strip(json::parse(R"({"list": [{"name": "a", "k": 1}, {"name": "b"}, 7]})")) ==
        json::parse(R"({"list": [{"k": 1}, {}, 7]})"));

  // Whole elements are removed and later ones move up.
  auto all = compiled({"list.*"});
  CHECK(all.strip(json::parse(R"({"list": [1, 2, 3], "other": [1]})")) == json::parse(R"({"list": [], "other": [1]})"));
  auto index = compiled({"list.1"});
  CHECK(index.strip(json::parse(R"({"list": [10, 20, 30, 40]})")) == json::parse(R"({"list": [10, 30, 40]})"));
  auto two_indices = compiled({"list.0", "list.2"});
  // Indices refer to the original array, not to positions after earlier removals.
  CHECK(two_indices.strip(json::parse(R"({"list": ["a", "b", "c", "d"]})")) == json::parse(R"({"list": ["b", "d"]})"));
  // A pattern that reaches into a scalar matches nothing.
  auto into_scalar = compiled({"a.b.c"});
  CHECK(into_scalar.strip(json::parse(R"({"a": {"b": 5}})")) == json::parse(R"({"a": {"b": 5}})"));
  // A top-level array is walked like any other.
  auto top = compiled({"*.pid"});
  CHECK(top.strip(json::parse(R"([{"pid": 1, "k": 2}, {"pid": 3}])")) == json::parse(R"([{"k": 2}, {}])"));
  // Scalars pass through.
  CHECK(top.strip(json(5)) == json(5));
}

TEST_CASE("store::VolatileFieldFilter::from_setting reads empty, none, +additions and replacements") {
  SUBCASE("absent or empty: the defaults") {
    for (const auto& setting : {std::optional<std::string>(), std::optional<std::string>("")}) {
      auto filter = VolatileFieldFilter::from_setting(setting);
      REQUIRE(filter.ok());
      CHECK(filter->patterns() == VolatileFieldFilter::default_patterns());
    }
    CHECK(!VolatileFieldFilter::default_patterns().empty());
  }
  SUBCASE("none: nothing is stripped") {
    auto filter = VolatileFieldFilter::from_setting(std::string("none"));
    REQUIRE(filter.ok());
    CHECK(filter->patterns().empty());
    json raw = mindspore_descriptor("2", 1, "stem");
    CHECK(filter->strip(raw) == raw);
  }
  SUBCASE("+a,b: the defaults plus a and b") {
    auto filter = VolatileFieldFilter::from_setting(std::string("+**.build_id,attrs.seed"));
    REQUIRE(filter.ok());
    std::vector<std::string> expected = VolatileFieldFilter::default_patterns();
    expected.push_back("**.build_id");
    expected.push_back("attrs.seed");
    CHECK(filter->patterns() == expected);
    json raw = json::parse(R"({"op_type": "X", "job_id": 1, "build_id": 2, "attrs": {"seed": 3, "k": 4}})");
    CHECK(filter->strip(raw) == json::parse(R"({"op_type": "X", "attrs": {"k": 4}})"));
  }
  SUBCASE("a,b: exactly a and b") {
    auto filter = VolatileFieldFilter::from_setting(std::string("**.build_id,attrs.seed"));
    REQUIRE(filter.ok());
    CHECK(filter->patterns() == std::vector<std::string>{"**.build_id", "attrs.seed"});
    json raw = json::parse(R"({"op_type": "X", "job_id": 1, "build_id": 2, "attrs": {"seed": 3, "k": 4}})");
    CHECK(filter->strip(raw) == json::parse(R"({"op_type": "X", "job_id": 1, "attrs": {"k": 4}})"));
  }
}

TEST_CASE("store::VolatileFieldFilter rejects invalid patterns with a usage error naming the pattern") {
  struct Case {
    std::string pattern;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"", "has an empty segment"},
      {"a..b", "has an empty segment"},
      {".job_id", "has an empty segment"},
      {"job_id.", "has an empty segment"},
      {"**", "must end with a field name or \"*\""},
      {"op_list.**", "must end with a field name or \"*\""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.pattern);
    auto filter = VolatileFieldFilter::compile({"**.ok", c.pattern});
    REQUIRE_FALSE(filter.ok());
    INFO("message: " << filter.error().message());
    CHECK(filter.error().code() == ErrorCode::usage);
    CHECK(filter.error().message().find("\"" + c.pattern + "\"") != std::string::npos);
    CHECK(filter.error().message().find(c.expected) != std::string::npos);
  }
  for (const std::string setting : {"a,,b", "+", "+a,", "x.**"}) {
    CAPTURE(setting);
    auto filter = VolatileFieldFilter::from_setting(setting);
    REQUIRE_FALSE(filter.ok());
    CHECK(filter.error().code() == ErrorCode::usage);
    CHECK(filter.error().message().find("volatile field pattern") != std::string::npos);
  }
}

TEST_CASE("store::VolatileFieldFilter stripping is idempotent") {
  auto filter = defaults();
  json once = filter.strip(mindspore_descriptor("3", 9, "square_1_3"));
  CHECK(filter.strip(once) == once);

  auto custom = compiled({"**.name", "*.x", "a.**.b", "list.*.id"});
  json value = json::parse(R"({"name": 1, "a": {"x": 1, "b": 2, "c": {"b": 3, "name": 4}},
                                "list": [{"id": 1, "v": 2}, {"id": 3}], "z": {"x": 5, "y": 6}})");
  json custom_once = custom.strip(value);
  CHECK(custom.strip(custom_once) == custom_once);
  CHECK(custom_once == json::parse(R"({"a": {"c": {}}, "list": [{"v": 2}, {}], "z": {"y": 6}})"));
}

TEST_CASE("store::normalize_descriptor strips volatile fields and checks op_type") {
  auto filter = defaults();
  auto normalized = opcache::store::normalize_descriptor(mindspore_descriptor("2", 1, "stem"), filter, "square.info");
  REQUIRE(normalized.ok());
  CHECK(normalized->op_type == "Square");
  CHECK(normalized->normalized == filter.strip(mindspore_descriptor("2", 1, "stem")));
  CHECK_FALSE(normalized->normalized.contains("job_id"));

  struct Case {
    json descriptor;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {json::parse(R"({"inputs": []})"), "descriptor has no \"op_type\" member"},
      {json::parse(R"({"op_type": 5})"), "descriptor member \"op_type\" must be a non-empty string"},
      {json::parse(R"({"op_type": ""})"), "descriptor member \"op_type\" must be a non-empty string"},
      {json::parse(R"({"op_type": ["MatMul"]})"), "must be a non-empty string"},
      {json::parse(R"(["op_type", "MatMul"])"), "a descriptor must be a JSON object"},
      {json("MatMul"), "a descriptor must be a JSON object"},
      {json(nullptr), "a descriptor must be a JSON object"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.descriptor.dump());
    auto result = opcache::store::normalize_descriptor(c.descriptor, filter, "desc.json");
    REQUIRE_FALSE(result.ok());
    INFO("message: " << result.error().message());
    CHECK(result.error().code() == ErrorCode::usage);
    CHECK(result.error().message().rfind("desc.json: ", 0) == 0);
    CHECK(result.error().message().find(c.expected) != std::string::npos);
  }

  // A pattern that removes op_type itself leaves nothing to list the kernel by.
  auto drops_op_type = compiled({"op_type"});
  auto result = opcache::store::normalize_descriptor(json::parse(R"({"op_type": "MatMul"})"), drops_op_type, "d");
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code() == ErrorCode::usage);
  CHECK(result.error().message().find("after removing volatile fields") != std::string::npos);
  CHECK(result.error().message().find("op_type") != std::string::npos);
}

TEST_CASE("store::stored_descriptor checks without stripping") {
  json descriptor = json::parse(R"({"op_type": "MatMul", "job_id": 3})");
  auto stored = opcache::store::stored_descriptor(descriptor, "manifest");
  REQUIRE(stored.ok());
  CHECK(stored->normalized == descriptor);
  CHECK(stored->op_type == "MatMul");
  auto bad = opcache::store::stored_descriptor(json::parse(R"({"op": "MatMul"})"), "manifest");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code() == ErrorCode::usage);
  CHECK(bad.error().message() == "manifest: descriptor has no \"op_type\" member (a string such as \"MatMul\")");
}
