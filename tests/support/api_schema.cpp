#include "tests/support/api_schema.hpp"
#include "opcache_test_paths.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/utils/nlohmann_json_utils.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

namespace opcache::test {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path schema_root() { return fs::path(OPCACHE_SOURCE_DIR) / "schemas"; }

json load_json(const fs::path& path) {
  json document;
  REQUIRE_MESSAGE(valijson::utils::loadDocument(path.string(), document), "cannot load " << path.string());
  return document;
}

class ApiSchema {
 public:
  explicit ApiSchema(const std::string& file) {
    json document = load_json(schema_root() / "api" / file);
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(document);
    auto fetch = [](const std::string& uri) -> const json* {
      // "../scenario.schema.json" from schemas/api/, or a sibling in schemas/api/.
      const fs::path name = fs::path(uri).filename();
      for (const fs::path& dir : {schema_root() / "api", schema_root()}) {
        if (fs::exists(dir / name) && (uri.rfind("../", 0) != 0 || dir == schema_root())) {
          return new json(load_json(dir / name));
        }
      }
      return nullptr;
    };
    auto free_document = [](const json* document) { delete document; };
    parser.populateSchema(adapter, m_schema, fetch, free_document);
  }

  std::string errors(const json& value) const {
    valijson::Validator validator;
    valijson::ValidationResults results;
    valijson::adapters::NlohmannJsonAdapter target(value);
    if (validator.validate(m_schema, target, &results)) {
      return {};
    }
    std::string out;
    valijson::ValidationResults::Error error;
    while (results.popError(error)) {
      for (const auto& part : error.context) {
        out += part;
      }
      out += ": " + error.description + "\n";
    }
    return out.empty() ? "invalid" : out;
  }

 private:
  valijson::Schema m_schema;
};

}  // namespace

std::string schema_errors(const std::string& schema_file, const json& value) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<ApiSchema>> schemas;
  std::lock_guard lock(mutex);
  auto& schema = schemas[schema_file];
  if (!schema) {
    schema = std::make_unique<ApiSchema>(schema_file);
  }
  return schema->errors(value);
}

json checked_json(const HttpResponse& response, const std::string& schema_file) {
  INFO("body: " << response.body);
  CHECK(response.header("content-type").find("application/json") != std::string::npos);
  json body = json::parse(response.body, nullptr, false);
  REQUIRE_FALSE(body.is_discarded());
  const std::string errors = schema_errors(schema_file, body);
  CHECK_MESSAGE(errors.empty(), schema_file << ": " << errors);
  return body;
}

}  // namespace opcache::test
