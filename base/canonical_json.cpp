#include "base/canonical_json.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "base/json_parse.hpp"
#include "base/try.hpp"
#include "base/utf8.hpp"

namespace opcache::base {

namespace {

using json = nlohmann::json;

std::u16string to_utf16(std::string_view text) {
  std::u16string out;
  for (std::size_t i = 0; i < text.size();) {
    long cp = decode_utf8(text, i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out.push_back(static_cast<char16_t>(0xd800 + (cp >> 10)));
      out.push_back(static_cast<char16_t>(0xdc00 + (cp & 0x3ff)));
    } else {
      out.push_back(static_cast<char16_t>(cp));
    }
  }
  return out;
}

void append_string(std::string& out, const std::string& text) {
  static constexpr char k_hex[] = "0123456789abcdef";
  out.push_back('"');
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out.push_back(k_hex[byte >> 4]);
          out.push_back(k_hex[byte & 0xf]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

class Canonicalizer {
 public:
  Status write(const json& value, int depth) {
    if (depth > k_max_json_depth) {
      return Error::usage("JSON nesting deeper than " + std::to_string(k_max_json_depth) + " levels");
    }
    switch (value.type()) {
      case json::value_t::null: m_out += "null"; return {};
      case json::value_t::boolean: m_out += value.get<bool>() ? "true" : "false"; return {};
      case json::value_t::number_integer: m_out += std::to_string(value.get<std::int64_t>()); return {};
      case json::value_t::number_unsigned: m_out += std::to_string(value.get<std::uint64_t>()); return {};
      case json::value_t::number_float: return write_double(value.get<double>());
      case json::value_t::string: return write_string(value.get_ref<const std::string&>());
      case json::value_t::array: return write_array(value, depth);
      case json::value_t::object: return write_object(value, depth);
      case json::value_t::binary:
      case json::value_t::discarded:
        break;
    }
    return Error::usage("JSON value of a type that has no canonical form");
  }

  std::string take() { return std::move(m_out); }

 private:
  Status write_double(double value) {
    if (!std::isfinite(value)) {
      return Error::usage("JSON number is NaN or infinite, which has no canonical form");
    }
    m_out += format_es_double(value);
    return {};
  }

  Status write_string(const std::string& text) {
    if (!is_valid_utf8(text)) {
      return Error::usage("JSON string is not valid UTF-8");
    }
    append_string(m_out, text);
    return {};
  }

  Status write_array(const json& value, int depth) {
    m_out.push_back('[');
    bool first = true;
    for (const auto& element : value) {
      if (!first) {
        m_out.push_back(',');
      }
      first = false;
      OPCACHE_TRY(write(element, depth + 1));
    }
    m_out.push_back(']');
    return {};
  }

  Status write_object(const json& value, int depth) {
    std::vector<std::pair<std::u16string, const json::object_t::value_type*>> members;
    members.reserve(value.size());
    for (const auto& member : value.get_ref<const json::object_t&>()) {
      if (!is_valid_utf8(member.first)) {
        return Error::usage("JSON object key is not valid UTF-8");
      }
      members.emplace_back(to_utf16(member.first), &member);
    }
    // RFC 8785 3.2.3: sort by UTF-16 code units, not by UTF-8 bytes.
    std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    m_out.push_back('{');
    bool first = true;
    for (const auto& [sort_key, member] : members) {
      if (!first) {
        m_out.push_back(',');
      }
      first = false;
      append_string(m_out, member->first);
      m_out.push_back(':');
      OPCACHE_TRY(write(member->second, depth + 1));
    }
    m_out.push_back('}');
    return {};
  }

  std::string m_out;
};

}  // namespace

std::string format_es_double(double value) {
  if (value == 0) {
    return "0";  // also for -0, as ECMAScript does
  }
  char buffer[64];
  // Shortest round-trip digits, as "d.ddde±x".
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string scientific(buffer, result.ptr);

  std::string out;
  std::size_t pos = 0;
  if (scientific[0] == '-') {
    out.push_back('-');
    pos = 1;
  }
  std::size_t e_pos = scientific.find('e');
  std::string digits;
  for (std::size_t i = pos; i < e_pos; ++i) {
    if (scientific[i] != '.') {
      digits.push_back(scientific[i]);
    }
  }
  const int exponent = std::atoi(scientific.c_str() + e_pos + 1);
  const int k = static_cast<int>(digits.size());
  const int n = exponent + 1;  // ECMAScript's n: value = digits × 10^(n−k)

  if (k <= n && n <= 21) {
    out += digits;
    out.append(static_cast<std::size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, static_cast<std::size_t>(n));
    out.push_back('.');
    out += digits.substr(static_cast<std::size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out += digits;
  } else {
    out.push_back(digits[0]);
    if (k > 1) {
      out.push_back('.');
      out += digits.substr(1);
    }
    out.push_back('e');
    out.push_back(n - 1 >= 0 ? '+' : '-');
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

Result<std::string> canonical_json(const json& value) {
  Canonicalizer canonicalizer;
  OPCACHE_TRY(canonicalizer.write(value, 0));
  return canonicalizer.take();
}

}  // namespace opcache::base
