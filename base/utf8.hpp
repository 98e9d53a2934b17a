// UTF-8: validation, decoding one code point, encoding one code point.
// The one implementation used by JSON canonicalization, manifests, scenarios
// and the S3 XML reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace opcache::base {

/// Decodes the UTF-8 sequence starting at `text[i]`: returns its code point
/// and advances `i` past it, or returns -1 (leaving `i` unchanged) on a
/// malformed, overlong, surrogate or out-of-range sequence.
long decode_utf8(std::string_view text, std::size_t& i) noexcept;

/// True when `text` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view text) noexcept;

/// Appends the UTF-8 encoding of `code_point` (which must be <= U+10FFFF) to `out`.
void append_utf8(std::string& out, std::uint32_t code_point);

}  // namespace opcache::base
