#include "base/percent_coding.hpp"

namespace opcache::base {

namespace {

// The value of one hexadecimal digit (either case), or -1.
int hex_digit_value(char c) noexcept {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view text, PlusSign plus) {
  // Most text (every key path) has nothing to decode: copy it whole.
  const bool no_plus_to_decode = plus == PlusSign::literal || text.find('+') == std::string_view::npos;
  if (text.find('%') == std::string_view::npos && no_plus_to_decode) {
    return std::string(text);
  }
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && plus == PlusSign::space) {
      out.push_back(' ');
      continue;
    }
    if (c != '%') {
      out.push_back(c);
      continue;
    }
    const int high = i + 2 < text.size() ? hex_digit_value(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? hex_digit_value(text[i + 2]) : -1;
    if (high < 0 || low < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

std::string percent_encode(std::string_view text, std::string_view keep) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const bool alnum = (byte >= '0' && byte <= '9') || (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z');
    if (alnum || keep.find(c) != std::string_view::npos) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(k_hex[byte >> 4]);
      out.push_back(k_hex[byte & 0xf]);
    }
  }
  return out;
}

}  // namespace opcache::base
