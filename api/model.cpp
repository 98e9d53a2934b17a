#include "opcache/model.hpp"

#include "base/json_parse.hpp"
#include "base/try.hpp"

namespace opcache {

namespace {

using json = nlohmann::json;

Status check_top_level(const json& value, const std::string& origin) {
  if (!value.is_object() || !value.contains("ops") || !value["ops"].is_array()) {
    return Error::usage(origin + ": a model is an object {\"name\": ..., \"ops\": [descriptor, ...]}");
  }
  for (const auto& [member, item] : value.items()) {
    if (member != "name" && member != "description" && member != "ops" && member != "source") {
      return Error::usage(origin + ": unknown model member \"" + member +
                          "\" (allowed: name, description, source, ops)");
    }
    if (member != "ops" && !item.is_string()) {
      return Error::usage(origin + ": model member \"" + member + "\" must be a string");
    }
  }
  if (value["ops"].empty()) {
    return Error::usage(origin + ": the model has no ops");
  }
  return {};
}

Result<ModelOp> parse_op(json op, const std::string& origin) {
  if (!op.is_object()) {
    return Error::usage(origin + ": an op is a descriptor object, not " + std::string(op.type_name()));
  }
  ModelOp parsed;
  if (op.contains("name")) {
    if (!op["name"].is_string()) {
      return Error::usage(origin + ": \"name\" must be a string");
    }
    parsed.name = op["name"].get<std::string>();
    op.erase("name");
  }
  parsed.descriptor_json = op.dump();
  return parsed;
}

}  // namespace

Result<ModelOpList> parse_model_op_list(std::string_view json_text, const std::string& origin) {
  OPCACHE_TRY_ASSIGN(json value, base::parse_json(json_text, origin));
  OPCACHE_TRY(check_top_level(value, origin));
  ModelOpList model;
  model.name = value.value("name", std::string());
  model.description = value.value("description", std::string());
  const json& ops = value["ops"];
  for (std::size_t i = 0; i < ops.size(); ++i) {
    OPCACHE_TRY_ASSIGN(auto op, parse_op(ops[i], origin + ": ops[" + std::to_string(i) + "]"));
    model.ops.push_back(std::move(op));
  }
  return model;
}

}  // namespace opcache
