// refcc — typed access to an op's "attrs" object, with defaults, and the
// normalized attribute object that is hashed (every attribute the op knows,
// defaults filled in, aliases resolved, redundant ones dropped).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::refcc {

/// Reads attributes of one op. Each getter validates the type, records the
/// final value in normalized() and marks the name as known; finish() then
/// rejects any attribute nobody asked for. Errors are `usage` and name the op
/// and the attribute. Not thread-safe (one per prepare).
class AttrReader {
 public:
  AttrReader(nlohmann::json given, std::string op_type);

  /// Moves `alias` to `canonical` (e.g. "axis" → "axes"); both given is an error.
  Status alias(const std::string& alias, const std::string& canonical);

  /// True when the descriptor sets `name`.
  bool has(const std::string& name) const { return m_given.contains(name); }

  Result<bool> boolean(const std::string& name, bool fallback);
  Result<std::int64_t> integer(const std::string& name, std::int64_t fallback);
  Result<double> number(const std::string& name, double fallback);
  /// A string from `allowed`.
  Result<std::string> text(const std::string& name, const std::string& fallback,
                           std::initializer_list<std::string_view> allowed);
  /// An integer or a list of integers, returned as a list (an integer becomes a
  /// one-element list). Absent: `fallback`. Not recorded: call set() with the
  /// normalized value.
  Result<std::vector<std::int64_t>> int_list(const std::string& name, std::vector<std::int64_t> fallback);

  /// Accepts `name` and removes it from normalized(): for attributes that are
  /// redundant with the shapes (the caller has checked them).
  void drop(const std::string& name) {
    m_known.insert(name);
    m_normalized.erase(name);
  }

  /// Records the normalized value of `name`.
  void set(const std::string& name, nlohmann::json value);

  /// `usage` error for an attribute no getter asked for.
  Status finish() const;

  /// The normalized attributes.
  const nlohmann::json& normalized() const { return m_normalized; }

  /// "<op_type> attribute \"<name>\"" for messages.
  std::string where(const std::string& name) const;

 private:
  nlohmann::json m_given;
  std::string m_op_type;
  std::set<std::string> m_known;
  nlohmann::json m_normalized = nlohmann::json::object();
};

/// An axis in [-rank, rank) as a non-negative index; `usage` error otherwise.
Result<std::int64_t> normalize_axis(std::int64_t axis, std::size_t rank, const std::string& what);

}  // namespace opcache::refcc
