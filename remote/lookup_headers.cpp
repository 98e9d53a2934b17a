#include "remote/lookup_headers.hpp"

#include <algorithm>

#include "base/base64.hpp"
#include "base/canonical_json.hpp"

namespace opcache::remote {

namespace {

bool printable_ascii(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

}  // namespace

LookupHint make_lookup_hint(std::string op_type, const nlohmann::json& scenario) {
  auto canonical = base::canonical_json(scenario);
  return LookupHint{std::move(op_type), canonical ? std::move(*canonical) : std::string()};
}

std::string base64url_unpadded(const std::string& bytes) {
  std::string text = base::base64_encode(bytes);
  while (!text.empty() && text.back() == '=') {
    text.pop_back();
  }
  std::replace(text.begin(), text.end(), '+', '-');
  std::replace(text.begin(), text.end(), '/', '_');
  return text;
}

LookupHeaderValues lookup_header_values(const LookupHint& hint) {
  LookupHeaderValues values;
  if (hint.op_type.size() <= k_max_op_type_header && printable_ascii(hint.op_type)) {
    values.op_type = hint.op_type;
  }
  if (!hint.scenario_json.empty()) {
    values.scenario = base64url_unpadded(hint.scenario_json);
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
