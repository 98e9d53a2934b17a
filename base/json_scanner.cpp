#include "base/json_scanner.hpp"

#include <bit>
#include <cstring>

namespace opcache::base {

namespace {

constexpr std::uint64_t k_ones = 0x0101010101010101ull;
constexpr std::uint64_t k_highs = 0x8080808080808080ull;

// The high bit of each byte of `word` that is below `limit` (at most 0x80);
// the lowest such bit is exact, higher ones may be borrow noise.
constexpr std::uint64_t bytes_below(std::uint64_t word, std::uint8_t limit) {
  return (word - k_ones * limit) & ~word & k_highs;
}

constexpr std::uint64_t bytes_equal(std::uint64_t word, char c) {
  return bytes_below(word ^ (k_ones * static_cast<std::uint8_t>(c)), 1);
}

// The index of the first byte at or after `from` that ends a plain string or
// breaks it: '"', '\\' or a control byte; npos when there is none. Eight
// bytes a step: paths and digests are most of what a hit scans.
std::size_t find_string_stop(std::string_view text, std::size_t from) {
  std::size_t i = from;
  if constexpr (std::endian::native == std::endian::little) {
    for (; i + 8 <= text.size(); i += 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, text.data() + i, 8);
      const std::uint64_t stops = bytes_below(word, 0x20) | bytes_equal(word, '"') | bytes_equal(word, '\\');
      if (stops != 0) {
        return i + static_cast<std::size_t>(std::countr_zero(stops) / 8);
      }
    }
  }
  for (; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == '"' || byte == '\\' || byte < 0x20) {
      return i;
    }
  }
  return std::string_view::npos;
}

}  // namespace

bool JsonScanner::at_end() {
  skip_space();
  return m_pos == m_text.size();
}

bool JsonScanner::consume(char c) {
  skip_space();
  if (m_pos < m_text.size() && m_text[m_pos] == c) {
    ++m_pos;
    return true;
  }
  return false;
}

bool JsonScanner::peek(char c) {
  skip_space();
  return m_pos < m_text.size() && m_text[m_pos] == c;
}

bool JsonScanner::plain_string(std::string& out) {
  if (!consume('"')) {
    return false;
  }
  const std::size_t end = find_string_stop(m_text, m_pos);
  if (end == std::string_view::npos || m_text[end] != '"') {
    return false;
  }
  const std::size_t length = end - m_pos;
  if (out.capacity() < length) {
    out = std::string(m_text.data() + m_pos, length);  // a new buffer: constructing is cheaper than growing
  } else {
    out.assign(m_text.data() + m_pos, length);  // fits in what `out` already has
  }
  m_pos = end + 1;
  return true;
}

bool JsonScanner::string(std::string& out) {
  if (!consume('"')) {
    return false;
  }
  out.clear();
  while (true) {
    const std::size_t stop = find_string_stop(m_text, m_pos);
    if (stop == std::string_view::npos || static_cast<unsigned char>(m_text[stop]) < 0x20) {
      return false;
    }
    out.append(m_text.data() + m_pos, stop - m_pos);
    m_pos = stop + 1;
    if (m_text[stop] == '"') {
      return true;
    }
    if (m_pos == m_text.size()) {
      return false;
    }
    switch (m_text[m_pos++]) {
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '/': out.push_back('/'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      default: return false;  // \u: the strict parser decides
    }
  }
}

bool JsonScanner::boolean(bool& out) {
  skip_space();
  const std::string_view rest = m_text.substr(m_pos);
  for (const bool value : {true, false}) {
    const std::string_view word = value ? "true" : "false";
    if (rest.substr(0, word.size()) == word) {
      m_pos += word.size();
      out = value;
      return true;
    }
  }
  return false;
}

bool JsonScanner::unsigned_integer(std::uint64_t& out) {
  skip_space();
  const std::size_t start = m_pos;
  out = 0;
  for (; m_pos < m_text.size() && m_text[m_pos] >= '0' && m_text[m_pos] <= '9'; ++m_pos) {
    if (out > (UINT64_MAX - 9) / 10) {
      return false;
    }
    out = out * 10 + static_cast<std::uint64_t>(m_text[m_pos] - '0');
  }
  const std::size_t digits = m_pos - start;
  if (digits == 0 || (digits > 1 && m_text[start] == '0')) {
    return false;
  }
  return m_pos == m_text.size() || (m_text[m_pos] != '.' && m_text[m_pos] != 'e' && m_text[m_pos] != 'E');
}

bool JsonScanner::skip_value() {
  skip_space();
  int depth = 0;
  do {
    if (m_pos >= m_text.size()) {
      return false;
    }
    const char c = m_text[m_pos];
    if (c == '"') {
      if (!skip_string()) {
        return false;
      }
      continue;
    }
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth < 0) {
        return false;
      }
    } else if (depth == 0 && (c == ',' || c == ':')) {
      return false;
    }
    ++m_pos;
    if (depth == 0) {
      // A scalar ends at the next delimiter.
      while (m_pos < m_text.size() && m_text[m_pos] != ',' && m_text[m_pos] != '}' && m_text[m_pos] != ']' &&
             c != '}' && c != ']') {
        ++m_pos;
      }
    }
  } while (depth > 0);
  return true;
}

void JsonScanner::skip_space() {
  while (m_pos < m_text.size() &&
         (m_text[m_pos] == ' ' || m_text[m_pos] == '\n' || m_text[m_pos] == '\r' || m_text[m_pos] == '\t')) {
    ++m_pos;
  }
}

bool JsonScanner::skip_string() {
  for (++m_pos; m_pos < m_text.size(); ++m_pos) {
    if (m_text[m_pos] == '\\') {
      ++m_pos;
    } else if (m_text[m_pos] == '"') {
      ++m_pos;
      return true;
    }
  }
  return false;
}

}  // namespace opcache::base
