#include "remote/lookup_headers.hpp"

#include <algorithm>

#include "base/base64.hpp"
#include "base/canonical_json.hpp"

namespace opcache::remote {

bool is_op_type_header_value(std::string_view value) {
  return !value.empty() && value.size() <= k_max_op_type_header &&
         std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

LookupHint make_lookup_hint(std::string op_type, const nlohmann::json& scenario) {
  auto canonical = base::canonical_json(scenario);
  return LookupHint{std::move(op_type), canonical ? std::move(*canonical) : std::string()};
}

LookupHeaderValues lookup_header_values(const LookupHint& hint) {
  LookupHeaderValues values;
  if (is_op_type_header_value(hint.op_type)) {
    values.op_type = hint.op_type;
  }
  if (!hint.scenario_json.empty()) {
    values.scenario = base::base64url_encode(hint.scenario_json);
    if (values.scenario.size() > k_max_scenario_header) {
      values.scenario.clear();
    }
  }
  return values;
}

std::vector<std::string> lookup_header_lines(const LookupHint& hint) {
  const auto values = lookup_header_values(hint);
  std::vector<std::string> lines;
  if (!values.op_type.empty()) {
    lines.push_back(std::string(k_op_type_header) + ": " + values.op_type);
  }
  if (!values.scenario.empty()) {
    lines.push_back(std::string(k_scenario_header) + ": " + values.scenario);
  }
  return lines;
}

}  // namespace opcache::remote
