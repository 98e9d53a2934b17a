#include "refcc/attrs.hpp"

namespace opcache::refcc {

using json = nlohmann::json;

AttrReader::AttrReader(json given, std::string op_type) : m_given(std::move(given)), m_op_type(std::move(op_type)) {}

std::string AttrReader::where(const std::string& name) const {
  return m_op_type + " attribute \"" + name + "\"";
}

Status AttrReader::alias(const std::string& alias, const std::string& canonical) {
  if (!m_given.contains(alias)) {
    return {};
  }
  if (m_given.contains(canonical)) {
    return Error::usage(m_op_type + ": attributes \"" + alias + "\" and \"" + canonical +
                        "\" mean the same; give only one");
  }
  m_given[canonical] = m_given[alias];
  m_given.erase(alias);
  return {};
}

Result<bool> AttrReader::boolean(const std::string& name, bool fallback) {
  m_known.insert(name);
  bool value = fallback;
  if (m_given.contains(name)) {
    if (!m_given[name].is_boolean()) {
      return Error::usage(where(name) + " must be true or false, got " + m_given[name].dump());
    }
    value = m_given[name].get<bool>();
  }
  set(name, value);
  return value;
}

Result<std::int64_t> AttrReader::integer(const std::string& name, std::int64_t fallback) {
  m_known.insert(name);
  std::int64_t value = fallback;
  if (m_given.contains(name)) {
    const json& given = m_given[name];
    // MindSpore writes some scalar attributes as one-element lists.
    const json& scalar = given.is_array() && given.size() == 1 ? given[0] : given;
    if (!scalar.is_number_integer()) {
      return Error::usage(where(name) + " must be an integer, got " + given.dump());
    }
    value = scalar.get<std::int64_t>();
  }
  set(name, value);
  return value;
}

Result<double> AttrReader::number(const std::string& name, double fallback) {
  m_known.insert(name);
  double value = fallback;
  if (m_given.contains(name)) {
    if (!m_given[name].is_number()) {
      return Error::usage(where(name) + " must be a number, got " + m_given[name].dump());
    }
    value = m_given[name].get<double>();
  }
  set(name, value);
  return value;
}

Result<std::string> AttrReader::text(const std::string& name, const std::string& fallback,
                                     std::initializer_list<std::string_view> allowed) {
  m_known.insert(name);
  std::string value = fallback;
  if (m_given.contains(name)) {
    if (!m_given[name].is_string()) {
      return Error::usage(where(name) + " must be a string, got " + m_given[name].dump());
    }
    value = m_given[name].get<std::string>();
  }
  bool ok = false;
  std::string list;
  for (auto a : allowed) {
    ok = ok || a == value;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  if (!ok) {
    return Error::usage(where(name) + " is \"" + value + "\"; supported: " + list);
  }
  set(name, value);
  return value;
}

Result<std::vector<std::int64_t>> AttrReader::int_list(const std::string& name, std::vector<std::int64_t> fallback) {
  m_known.insert(name);
  if (!m_given.contains(name)) {
    return fallback;
  }
  const json& given = m_given[name];
  if (given.is_number_integer()) {
    return std::vector<std::int64_t>{given.get<std::int64_t>()};
  }
  if (!given.is_array()) {
    return Error::usage(where(name) + " must be an integer or a list of integers, got " + given.dump());
  }
  std::vector<std::int64_t> values;
  for (const auto& item : given) {
    if (!item.is_number_integer()) {
      return Error::usage(where(name) + " must contain integers only, got " + given.dump());
    }
    values.push_back(item.get<std::int64_t>());
  }
  return values;
}

void AttrReader::set(const std::string& name, json value) {
  m_known.insert(name);
  m_normalized[name] = std::move(value);
}

Status AttrReader::finish() const {
  for (const auto& [name, value] : m_given.items()) {
    if (m_known.count(name) == 0) {
      std::string list;
      for (const auto& known : m_known) {
        list += (list.empty() ? "" : ", ") + known;
      }
      return Error::usage(m_op_type + " has no attribute \"" + name + "\" (" +
                          (list.empty() ? std::string("it takes no attributes") : "known: " + list) + ")");
    }
  }
  return {};
}

Result<std::int64_t> normalize_axis(std::int64_t axis, std::size_t rank, const std::string& what) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) {
    return Error::usage(what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank) +
                        " (allowed: " + std::to_string(-r) + " .. " + std::to_string(r - 1) + ")");
  }
  return axis < 0 ? axis + r : axis;
}

}  // namespace opcache::refcc
