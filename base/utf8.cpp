#include "base/utf8.hpp"

#include <cstdint>
#include <cstring>

namespace opcache::base {

long decode_utf8(std::string_view text, std::size_t& i) noexcept {
  auto byte = [&](std::size_t at) { return static_cast<unsigned char>(text[at]); };
  unsigned char lead = byte(i);
  if (lead < 0x80) {
    ++i;
    return lead;
  }
  std::size_t length = 0;
  long code_point = 0;
  long minimum = 0;
  if ((lead & 0xe0) == 0xc0) {
    length = 2, code_point = lead & 0x1f, minimum = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3, code_point = lead & 0x0f, minimum = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4, code_point = lead & 0x07, minimum = 0x10000;
  } else {
    return -1;
  }
  if (i + length > text.size()) {
    return -1;
  }
  for (std::size_t k = 1; k < length; ++k) {
    unsigned char next = byte(i + k);
    if ((next & 0xc0) != 0x80) {
      return -1;
    }
    code_point = (code_point << 6) | (next & 0x3f);
  }
  if (code_point < minimum || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff)) {
    return -1;
  }
  i += length;
  return code_point;
}

bool is_valid_utf8(std::string_view text) noexcept {
  for (std::size_t i = 0; i < text.size();) {
    std::uint64_t word = 0;
    if (i + 8 <= text.size() && (std::memcpy(&word, text.data() + i, 8), (word & 0x8080808080808080ull) == 0)) {
      i += 8;  // eight ASCII bytes
      continue;
    }
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;  // ASCII, most of every path and name: no decoding
      continue;
    }
    if (decode_utf8(text, i) < 0) {
      return false;
    }
  }
  return true;
}

void append_utf8(std::string& out, std::uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

}  // namespace opcache::base
