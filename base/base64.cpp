#include "base/base64.hpp"

#include <array>
#include <cstdint>

namespace opcache::base {

namespace {

constexpr char k_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The 6-bit value of each character, or -1 for characters outside the alphabet.
constexpr std::array<std::int8_t, 256> make_decoding_table() {
  std::array<std::int8_t, 256> table{};
  for (auto& value : table) {
    value = -1;
  }
  for (int i = 0; i < 64; ++i) {
    table[static_cast<unsigned char>(k_alphabet[i])] = static_cast<std::int8_t>(i);
  }
  return table;
}
constexpr auto k_decoding = make_decoding_table();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t group = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16 |
                                static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8 |
                                static_cast<unsigned char>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) {
      out += k_alphabet[(group >> shift) & 0x3f];
    }
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t group = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (rest == 2) {
      group |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    }
    out += k_alphabet[(group >> 18) & 0x3f];
    out += k_alphabet[(group >> 12) & 0x3f];
    out += rest == 2 ? k_alphabet[(group >> 6) & 0x3f] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return std::nullopt;
  }
  std::size_t padding = 0;
  if (!text.empty() && text.back() == '=') {
    padding = text[text.size() - 2] == '=' ? 2 : 1;
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const bool is_padding = last && j >= 4 - padding;
      const int value = is_padding ? 0 : k_decoding[static_cast<unsigned char>(text[i + j])];
      if (value < 0) {
        return std::nullopt;
      }
      group = group << 6 | static_cast<std::uint32_t>(value);
    }
    const std::size_t keep = last ? 3 - padding : 3;
    // The bits below the kept bytes must be zero (one spelling per value).
    if ((group & ((1u << (8 * (3 - keep))) - 1)) != 0) {
      return std::nullopt;
    }
    for (std::size_t j = 0; j < keep; ++j) {
      out += static_cast<char>((group >> (16 - 8 * j)) & 0xff);
    }
  }
  return out;
}

std::string base64url_encode(std::string_view bytes) {
  std::string out = base64_encode(bytes);
  while (!out.empty() && out.back() == '=') {
    out.pop_back();
  }
  for (char& c : out) {
    c = c == '+' ? '-' : c == '/' ? '_' : c;
  }
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  if (text.find_first_of("+/=") != std::string_view::npos || text.size() % 4 == 1) {
    return std::nullopt;
  }
  std::string standard(text);
  for (char& c : standard) {
    c = c == '-' ? '+' : c == '_' ? '/' : c;
  }
  standard.append((4 - standard.size() % 4) % 4, '=');
  return base64_decode(standard);
}

}  // namespace opcache::base
