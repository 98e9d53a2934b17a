#include "base/json_scanner.hpp"

namespace opcache::base {

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
  const std::size_t start = m_pos;
  const std::size_t end = m_text.find('"', start);  // memchr: fast over long paths and digests
  if (end == std::string_view::npos) {
    return false;
  }
  for (std::size_t i = start; i < end; ++i) {
    const auto byte = static_cast<unsigned char>(m_text[i]);
    if (byte == '\\' || byte < 0x20) {
      return false;
    }
  }
  out.assign(m_text.data() + start, end - start);
  m_pos = end + 1;
  return true;
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
