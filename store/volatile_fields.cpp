#include "store/volatile_fields.hpp"

#include "base/text.hpp"
#include "base/try.hpp"

namespace opcache::store {

const std::vector<std::string>& VolatileFieldFilter::default_patterns() {
  static const std::vector<std::string> k_defaults = {
      // Job bookkeeping and generated names (MindSpore .info, CANN op JSON).
      "**.job_id", "**.source_id", "**.full_name", "**.fusion_op_name", "**.scope_id", "**.graph_name",
      "**.kernel_name", "**.ori_name",
      // Where and when it ran.
      "**.deviceId", "**.device_id", "**.op_debug_dir", "**.py_module_path", "**.L1_addr_offset",
      "**.timestamp", "**.pid",
      // Per-node names inside an op list (renaming a tensor does not change the kernel).
      "**.op_list.*.name", "**.op_list.*.id", "**.op_list.*.input_desc.*.name",
      "**.op_list.*.output_desc.*.name"};
  return k_defaults;
}

Result<VolatileFieldFilter> VolatileFieldFilter::compile(const std::vector<std::string>& patterns) {
  VolatileFieldFilter filter;
  for (const auto& pattern : patterns) {
    std::vector<std::string> segments;
    for (auto segment : base::split_on(pattern, '.')) {
      segments.emplace_back(segment);
    }
    for (const auto& segment : segments) {
      if (segment.empty()) {
        return Error::usage("volatile field pattern \"" + pattern +
                            "\" has an empty segment (write paths like \"**.job_id\" or \"op_list.*.name\")");
      }
    }
    if (segments.back() == "**") {
      return Error::usage("volatile field pattern \"" + pattern + "\" must end with a field name or \"*\"");
    }
    filter.m_patterns.push_back(pattern);
    filter.m_segments.push_back(std::move(segments));
  }
  return filter;
}

Result<VolatileFieldFilter> VolatileFieldFilter::from_setting(const std::optional<std::string>& setting) {
  if (!setting || setting->empty()) {
    return compile(default_patterns());
  }
  if (*setting == "none") {
    return compile({});
  }
  std::vector<std::string> patterns;
  std::string_view list = *setting;
  if (list.front() == '+') {
    patterns = default_patterns();
    list.remove_prefix(1);
  }
  for (auto pattern : base::split_on(list, ',')) {
    patterns.emplace_back(pattern);
  }
  return compile(patterns);
}

bool VolatileFieldFilter::advance(const std::vector<State>& states, std::string_view segment,
                                  std::vector<State>& next) const {
  bool matched = false;
  auto push_unique = [&next](State state) {
    for (const auto& existing : next) {
      if (existing.pattern == state.pattern && existing.position == state.position) {
        return;
      }
    }
    next.push_back(state);
  };
  // Work list: a "**" may also match zero levels, which is an epsilon move.
  std::vector<State> pending(states.begin(), states.end());
  while (!pending.empty()) {
    State state = pending.back();
    pending.pop_back();
    const auto& segments = m_segments[state.pattern];
    const std::string& want = segments[state.position];
    if (want == "**") {
      push_unique(state);                                       // consume this level, stay on "**"
      pending.push_back({state.pattern, state.position + 1});  // or match nothing
      continue;
    }
    if (want == "*" || want == segment) {
      if (state.position + 1 == segments.size()) {
        matched = true;
      } else {
        push_unique({state.pattern, state.position + 1});
      }
    }
  }
  return matched;
}

nlohmann::json VolatileFieldFilter::strip_node(const nlohmann::json& value, const std::vector<State>& states) const {
  if (states.empty() || !value.is_structured()) {
    return value;
  }
  nlohmann::json out = value.is_object() ? nlohmann::json::object() : nlohmann::json::array();
  std::vector<State> next;
  if (value.is_object()) {
    for (const auto& [name, child] : value.items()) {
      next.clear();
      if (!advance(states, name, next)) {
        out[name] = strip_node(child, next);
      }
    }
  } else {
    for (std::size_t i = 0; i < value.size(); ++i) {
      next.clear();
      if (!advance(states, std::to_string(i), next)) {
        out.push_back(strip_node(value[i], next));
      }
    }
  }
  return out;
}

nlohmann::json VolatileFieldFilter::strip(const nlohmann::json& value) const {
  std::vector<State> initial;
  for (std::size_t i = 0; i < m_segments.size(); ++i) {
    initial.push_back({i, 0});
  }
  return strip_node(value, initial);
}

}  // namespace opcache::store
