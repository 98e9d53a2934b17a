// Volatile descriptor fields: values that differ between two compiles of the
// same kernel (paths, pids, job ids, generated names) and are removed before
// the descriptor is hashed. The default list and the pattern syntax are
// documented in docs/formats.md ("Volatile fields").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::store {

/// A set of field patterns. A pattern is a dot-separated path of object keys
/// or array indices; `*` matches any one key or index, `**` matches any number
/// of levels (including none). `**.job_id` drops `job_id` at any depth.
/// Immutable after construction; safe to share between threads.
class VolatileFieldFilter {
 public:
  /// The built-in list (MindSpore/CANN volatile fields, see ascend-formats).
  static const std::vector<std::string>& default_patterns();

  /// Validates and compiles patterns; `usage` error naming the bad pattern.
  static Result<VolatileFieldFilter> compile(const std::vector<std::string>& patterns);

  /// Builds the filter from a setting: empty/absent = defaults; "none" = no
  /// patterns; "+a,b" = defaults plus a and b; "a,b" = exactly a and b.
  static Result<VolatileFieldFilter> from_setting(const std::optional<std::string>& setting);

  /// A copy of `value` with every matching member/element removed. Matching
  /// array elements are removed too, shifting later elements.
  nlohmann::json strip(const nlohmann::json& value) const;

  const std::vector<std::string>& patterns() const noexcept { return m_patterns; }

 private:
  struct State {
    std::size_t pattern;
    std::size_t position;
  };
  nlohmann::json strip_node(const nlohmann::json& value, const std::vector<State>& states) const;
  // Advances `states` over one path segment; returns true if any pattern ends there.
  bool advance(const std::vector<State>& states, std::string_view segment, std::vector<State>& next) const;

  std::vector<std::string> m_patterns;
  std::vector<std::vector<std::string>> m_segments;
};

}  // namespace opcache::store
