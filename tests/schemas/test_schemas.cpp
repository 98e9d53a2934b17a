// The JSON Schemas in schemas/ describe what the code really writes: real
// manifests (from write_bundle over compiled kernels) and scenarios validate,
// and documents the code rejects fail the schemas too.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/utils/nlohmann_json_utils.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "base/sha256.hpp"
#include "opcache_test_paths.hpp"
#include "store/bundle_reader.hpp"
#include "store/bundle_writer.hpp"
#include "store/manifest.hpp"
#include "store/scenario.hpp"
#include "tests/support/bundle_inputs.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

namespace {

using nlohmann::json;
using opcache::test::joined_lines;
using opcache::test::scenario_json;
namespace fs = std::filesystem;

fs::path schema_dir() {
  return fs::path(OPCACHE_SOURCE_DIR) / "schemas";
}

json load_json(const fs::path& path) {
  json document;
  REQUIRE_MESSAGE(valijson::utils::loadDocument(path.string(), document), "cannot load " << path.string());
  return document;
}

// A compiled schema; `$ref`s to sibling files are fetched from schemas/.
class SchemaValidator {
 public:
  explicit SchemaValidator(const std::string& file) {
    json document = load_json(schema_dir() / file);
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(document);
    auto fetch = [this](const std::string& uri) -> const json* {
      fetched.push_back(uri);
      // Relative references name a file next to the referring schema.
      fs::path name = fs::path(uri).filename();
      if (!fs::exists(schema_dir() / name)) {
        return nullptr;
      }
      return new json(load_json(schema_dir() / name));
    };
    auto free_document = [](const json* document) { delete document; };
    parser.populateSchema(adapter, m_schema, fetch, free_document);
  }

  // Returns the validation errors; empty means valid.
  std::vector<std::string> errors(const json& value) const {
    valijson::Validator validator;
    valijson::ValidationResults results;
    valijson::adapters::NlohmannJsonAdapter target(value);
    std::vector<std::string> out;
    if (!validator.validate(m_schema, target, &results)) {
      valijson::ValidationResults::Error error;
      while (results.popError(error)) {
        std::string where;
        for (const auto& part : error.context) {
          where += part;
        }
        out.push_back(where + ": " + error.description);
      }
      if (out.empty()) {
        out.push_back("invalid (no details)");
      }
    }
    return out;
  }

  bool valid(const json& value) const { return errors(value).empty(); }

  std::vector<std::string> fetched;

 private:
  valijson::Schema m_schema;
};

struct RealManifest {
  json from_bytes;   // the manifest text inside the bundle, parsed
  json from_reader;  // BundleReader::read_manifest() -> manifest_to_json()
};

// Writes a bundle over a real compiled kernel and reads its manifest back.
RealManifest real_manifest(const fs::path& dir, const std::string& op, int length, const std::string& spec) {
  auto kernel = opcache::test::make_kernel(dir, op, length);
  opcache::store::BundleInput input;
  input.descriptor = json::parse(kernel.descriptor_json);
  input.scenario = scenario_json(spec);
  for (const auto& file : kernel.files()) {
    input.members.push_back({file.filename().string(), file, ""});
  }
  input.build_ms = 812;
  opcache::base::StringSink sink;
  auto written = opcache::store::write_bundle(input, sink);
  REQUIRE_MESSAGE(written.ok(), (written.ok() ? "" : written.error().message()));

  const std::string& bytes = sink.data();
  opcache::base::MemorySource source(bytes);
  opcache::store::BundleReader reader(source);
  auto manifest = reader.read_manifest();
  REQUIRE_MESSAGE(manifest.ok(), (manifest.ok() ? "" : manifest.error().message()));
  std::uint32_t length_field = static_cast<unsigned char>(bytes[12]) | (static_cast<unsigned char>(bytes[13]) << 8) |
                               (static_cast<unsigned char>(bytes[14]) << 16) |
                               (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[15])) << 24);
  return {json::parse(bytes.substr(opcache::store::k_bundle_header_size, length_field)),
          opcache::store::manifest_to_json(*manifest)};
}

}  // namespace

TEST_CASE("schemas/manifest.schema.json accepts real manifests written by write_bundle") {
  opcache::test::TempDir dir;
  SchemaValidator schema("manifest.schema.json");
  const std::vector<std::pair<std::string, std::string>> kernels = {
      {"square", opcache::test::k_test_scenario},
      {"relu", "device=multi,phase=infer,toolchain=7.0.0,soc=Ascend310P3,extra.python=3.9.7,extra.debug=0"},
  };
  int length = 8;
  for (const auto& [op, spec] : kernels) {
    CAPTURE(op);
    RealManifest manifest = real_manifest(dir.path() / op, op, length++, spec);
    CHECK(manifest.from_bytes == manifest.from_reader);
    auto errors = schema.errors(manifest.from_bytes);
    CHECK_MESSAGE(errors.empty(), joined_lines(errors));
    CHECK(manifest.from_bytes["members"].size() == 3);
  }
  // Both sibling schemas were fetched through the callback.
  CHECK(std::find(schema.fetched.begin(), schema.fetched.end(), "descriptor.schema.json") != schema.fetched.end());
  CHECK(std::find(schema.fetched.begin(), schema.fetched.end(), "scenario.schema.json") != schema.fetched.end());
}

TEST_CASE("schemas/manifest.schema.json rejects manifests that the reader rejects too") {
  opcache::test::TempDir dir;
  SchemaValidator schema("manifest.schema.json");
  const json good = real_manifest(dir.path(), "square", 16, opcache::test::k_test_scenario).from_bytes;
  REQUIRE(schema.valid(good));

  struct Case {
    std::string what;
    std::function<void(json&)> change;
  };
  const std::vector<Case> cases = {
      {"uppercase key", [](json& m) { m["key"] = std::string(64, 'A'); }},
      {"short key", [](json& m) { m["key"] = m["key"].get<std::string>().substr(1); }},
      {"member name with '/'", [](json& m) { m["members"][0]["name"] = "dir/k.o"; }},
      {"member name with '\\'", [](json& m) { m["members"][0]["name"] = "dir\\k.o"; }},
      {"member name '..'", [](json& m) { m["members"][0]["name"] = ".."; }},
      {"member name '../x'", [](json& m) { m["members"][0]["name"] = "../x"; }},
      {"member name '.'", [](json& m) { m["members"][0]["name"] = "."; }},
      {"member name with a newline", [](json& m) { m["members"][0]["name"] = "a\nb.o"; }},
      {"empty member name", [](json& m) { m["members"][0]["name"] = ""; }},
      {"unknown top-level field", [](json& m) { m["signature"] = "abc"; }},
      {"unknown member field", [](json& m) { m["members"][0]["mode"] = 493; }},
      {"unknown role", [](json& m) { m["members"][0]["role"] = "binary"; }},
      {"negative size", [](json& m) { m["members"][0]["size"] = -1; }},
      {"format_version 2", [](json& m) { m["format_version"] = 2; }},
      {"gzip compression", [](json& m) { m["compression"] = "gzip"; }},
      {"no members", [](json& m) { m["members"] = json::array(); }},
      {"descriptor without op_type", [](json& m) { m["descriptor"].erase("op_type"); }},
      {"scenario with an empty extra", [](json& m) { m["scenario"]["extra"] = json::object(); }},
      {"scenario without device_mode", [](json& m) { m["scenario"].erase("device_mode"); }},
      {"negative build_ms", [](json& m) { m["build_ms"] = -5; }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    json bad = good;
    c.change(bad);
    CHECK_FALSE(schema.valid(bad));
    // The code agrees: a manifest the schema refuses never loads.
    auto parsed = opcache::store::manifest_from_json(bad, {});
    CHECK_FALSE(parsed.ok());
    if (!parsed.ok()) {
      CHECK(parsed.error().code() == opcache::ErrorCode::corrupt);
    }
  }
}

TEST_CASE("schemas/manifest.schema.json requires created to be RFC 3339 UTC") {
  opcache::test::TempDir dir;
  SchemaValidator schema("manifest.schema.json");
  json manifest = real_manifest(dir.path(), "square", 16, opcache::test::k_test_scenario).from_bytes;
  for (const std::string created : {"yesterday", "2026-11-22 00:51:54", "2026-11-22T00:51:54+01:00", ""}) {
    CAPTURE(created);
    manifest["created"] = created;
    CHECK_FALSE(schema.valid(manifest));
  }
  manifest["created"] = "2026-11-22T00:51:54Z";
  CHECK(schema.valid(manifest));
}

TEST_CASE("schemas/scenario.schema.json accepts what store::scenario_to_json produces") {
  SchemaValidator schema("scenario.schema.json");
  const std::vector<std::string> specs = {
      opcache::test::k_test_scenario,
      "device=multi,phase=infer,toolchain=7.0.0,soc=Ascend310P3",
      "device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1,extra.python=3.9.7,extra.torch_npu-ver=2.1.0",
      "device=multi,phase=train,toolchain=" + std::string(256, 't') + ",soc=S,extra." + std::string(64, 'k') + "=" +
          std::string(256, 'v'),
  };
  for (const auto& spec : specs) {
    CAPTURE(spec);
    json value = scenario_json(spec);
    auto errors = schema.errors(value);
    CHECK_MESSAGE(errors.empty(), joined_lines(errors));
  }

  const std::vector<json> invalid = {
      json::parse(R"({"device_mode":"multi","phase":"train","toolchain":"8","soc":"A","extra":{}})"),
      json::parse(R"({"device_mode":"both","phase":"train","toolchain":"8","soc":"A"})"),
      json::parse(R"({"device_mode":"multi","phase":"bad","toolchain":"8","soc":"A"})"),
      json::parse(R"({"device_mode":"multi","phase":"train","toolchain":"","soc":"A"})"),
      json::parse(R"({"device_mode":"multi","phase":"train","toolchain":"8","soc":"A","foo":"1"})"),
      json::parse(R"({"device_mode":"multi","phase":"train","toolchain":"8","soc":"A","extra":{"a b":"1"}})"),
      json::parse(R"({"device_mode":"multi","phase":"train","toolchain":"8","soc":"A","extra":{"k":1}})"),
      json::parse(R"({"device_mode":"multi","phase":"train","soc":"A"})"),
  };
  auto no_env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
  for (const auto& value : invalid) {
    CAPTURE(value.dump());
    CHECK_FALSE(schema.valid(value));
    // Every document the schema refuses is either refused by the code or, for
    // the empty extra, not the canonical form the code would write.
    auto parsed = opcache::store::scenario_from_json(value, "s", no_env);
    CHECK((!parsed.ok() || opcache::store::scenario_to_json(*parsed) != value));
  }
}

TEST_CASE("schemas/descriptor.schema.json accepts the test kernels' descriptors and requires op_type") {
  opcache::test::TempDir dir;
  SchemaValidator schema("descriptor.schema.json");
  auto kernel = opcache::test::make_kernel(dir.path(), "neg", 4);
  json descriptor = json::parse(kernel.descriptor_json);
  auto errors = schema.errors(descriptor);
  CHECK_MESSAGE(errors.empty(), joined_lines(errors));
  CHECK_FALSE(schema.valid(json::parse(R"({"inputs":[]})")));
  CHECK_FALSE(schema.valid(json::parse(R"({"op_type":""})")));
  CHECK_FALSE(schema.valid(json::parse(R"({"op_type":"Add","inputs":[{"shape":["3"]}]})")));
}
