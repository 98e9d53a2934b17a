// Volatile descriptor fields: values that differ between two compiles of the
// same kernel (paths, pids, job ids, generated names) and are removed before
// the descriptor is hashed. The default list and the pattern syntax are
// documented in docs/formats.md ("Volatile fields").
#pragma once

#include <cstdint>
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

  /// The same, in place.
  void strip_in_place(nlohmann::json& value) const;

  const std::vector<std::string>& patterns() const noexcept { return m_patterns; }

 private:
  // The patterns as one automaton: a state is one segment of one pattern
  // (an index into m_states); a set of states holds every state a path can
  // be in, "**" states together with the state after them (it may match no
  // level). No JSON is copied and no state set is searched linearly: a hit
  // runs this on every descriptor.
  enum class SegmentKind : unsigned char { any_levels, any_one, literal };
  struct SegmentState {
    SegmentKind kind;
    bool last;         // the pattern ends after this segment
    std::string name;  // of a literal
  };
  using StateSet = std::vector<std::uint32_t>;
  struct Scratch;  // what one strip reuses between nodes

  void strip_node(nlohmann::json& value, const StateSet& states, Scratch& scratch) const;
  // advance() for one member or element: `next` points to its states.
  bool step(const StateSet& states, std::string_view segment, StateSet& storage, const StateSet*& next,
            Scratch& scratch) const;
  // Adds `state`, and the state after it when it is "**", to `set` once.
  void add_state(std::uint32_t state, StateSet& set, Scratch& scratch) const;
  // Advances `states` over one path segment into `next`; true if a pattern ends there.
  bool advance(const StateSet& states, std::string_view segment, StateSet& next, Scratch& scratch) const;
  // Whether some state of `states` needs an array element's index as text.
  bool names_indices(const StateSet& states) const;

  std::vector<std::string> m_patterns;
  std::vector<SegmentState> m_states;
  StateSet m_initial;  // every pattern's first state, closed over "**"
  // When every pattern starts with "**" (the defaults do), a path that meets
  // none of their next names stays in m_initial: the common case, taken
  // without advancing. m_initial_names holds those names, sorted.
  bool m_initial_is_stable = false;
  std::vector<std::string> m_initial_names;
};

}  // namespace opcache::store
