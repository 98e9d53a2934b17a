#include "store/volatile_fields.hpp"

#include <algorithm>

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

// Marks states already in the set being built: a state is in it when its
// mark equals the current generation, so no set is cleared or searched.
struct VolatileFieldFilter::Scratch {
  std::vector<std::uint32_t> marks;
  std::uint32_t generation = 0;
};

Result<VolatileFieldFilter> VolatileFieldFilter::compile(const std::vector<std::string>& patterns) {
  VolatileFieldFilter filter;
  for (const auto& pattern : patterns) {
    const auto segments = base::split_on(pattern, '.');
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
    filter.m_initial.push_back(static_cast<std::uint32_t>(filter.m_states.size()));
    for (std::size_t i = 0; i < segments.size(); ++i) {
      const auto kind = segments[i] == "**" ? SegmentKind::any_levels
                        : segments[i] == "*" ? SegmentKind::any_one
                                             : SegmentKind::literal;
      filter.m_states.push_back({kind, i + 1 == segments.size(),
                                 kind == SegmentKind::literal ? std::string(segments[i]) : std::string()});
    }
  }
  // Close the first states over "**" (a pattern's "**" may match no level).
  Scratch scratch;
  scratch.marks.assign(filter.m_states.size(), 0);
  ++scratch.generation;
  StateSet closed;
  for (const auto state : filter.m_initial) {
    filter.add_state(state, closed, scratch);
  }
  filter.m_initial = std::move(closed);
  filter.m_initial_is_stable = true;
  for (const auto state : filter.m_initial) {
    const SegmentState& at = filter.m_states[state];
    const bool after_any_levels = state > 0 && filter.m_states[state - 1].kind == SegmentKind::any_levels &&
                                  scratch.marks[state - 1] == scratch.generation;  // that "**" is in m_initial
    if (at.kind == SegmentKind::any_one || (at.kind == SegmentKind::literal && !after_any_levels)) {
      filter.m_initial_is_stable = false;
    }
    if (at.kind == SegmentKind::literal) {
      filter.m_initial_names.push_back(at.name);
    }
  }
  std::sort(filter.m_initial_names.begin(), filter.m_initial_names.end());
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

void VolatileFieldFilter::add_state(std::uint32_t state, StateSet& set, Scratch& scratch) const {
  while (scratch.marks[state] != scratch.generation) {
    scratch.marks[state] = scratch.generation;
    set.push_back(state);
    if (m_states[state].kind != SegmentKind::any_levels) {
      return;
    }
    ++state;  // "**" may match no level: the next segment applies here too
  }
}

bool VolatileFieldFilter::advance(const StateSet& states, std::string_view segment, StateSet& next,
                                  Scratch& scratch) const {
  ++scratch.generation;
  next.clear();
  bool matched = false;
  for (const auto state : states) {
    const SegmentState& at = m_states[state];
    if (at.kind == SegmentKind::any_levels) {
      add_state(state, next, scratch);  // consume this level, stay on "**"
    } else if (at.kind == SegmentKind::any_one || at.name == segment) {
      if (at.last) {
        matched = true;
      } else {
        add_state(state + 1, next, scratch);
      }
    }
  }
  return matched;
}

bool VolatileFieldFilter::names_indices(const StateSet& states) const {
  return std::any_of(states.begin(), states.end(),
                     [this](std::uint32_t state) { return m_states[state].kind == SegmentKind::literal; });
}

bool VolatileFieldFilter::step(const StateSet& states, std::string_view segment, StateSet& storage,
                               const StateSet*& next, Scratch& scratch) const {
  if (&states == &m_initial && m_initial_is_stable &&
      !std::binary_search(m_initial_names.begin(), m_initial_names.end(), segment)) {
    next = &m_initial;
    return false;
  }
  next = &storage;
  return advance(states, segment, storage, scratch);
}

void VolatileFieldFilter::strip_node(nlohmann::json& value, const StateSet& states, Scratch& scratch) const {
  if (states.empty() || !value.is_structured()) {
    return;
  }
  StateSet storage;
  const StateSet* next = nullptr;
  if (value.is_object()) {
    for (auto member = value.begin(); member != value.end();) {
      if (step(states, member.key(), storage, next, scratch)) {
        member = value.erase(member);
        continue;
      }
      strip_node(member.value(), *next, scratch);
      ++member;
    }
    return;
  }
  const bool by_index = names_indices(states);
  nlohmann::json::array_t& elements = value.get_ref<nlohmann::json::array_t&>();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (step(states, by_index ? std::to_string(i) : std::string(), storage, next, scratch)) {
      continue;  // removed: later elements shift down
    }
    strip_node(elements[i], *next, scratch);
    if (kept != i) {
      elements[kept] = std::move(elements[i]);
    }
    ++kept;
  }
  elements.resize(kept);
}

void VolatileFieldFilter::strip_in_place(nlohmann::json& value) const {
  Scratch scratch;
  scratch.marks.assign(m_states.size(), 0);
  strip_node(value, m_initial, scratch);
}

nlohmann::json VolatileFieldFilter::strip(const nlohmann::json& value) const {
  nlohmann::json copy = value;
  strip_in_place(copy);
  return copy;
}

}  // namespace opcache::store
