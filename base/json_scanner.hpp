// A forward-only cursor over JSON text that our own writers produced, for the
// hot paths that must not build a JSON tree (a hit reads a bundle manifest
// and an exec manifest). It accepts only the simple shapes those writers use
// (strings without escapes, non-negative integers, any value skipped by its
// brackets) and says false on anything else; its callers then fall back to
// the strict parser (base/json_parse.hpp), which decides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace opcache::base {

/// A cursor over `text` (which must outlive it). Each method skips JSON white
/// space first, then either consumes what it names and returns true, or
/// returns false (the position is then unspecified: give up). Not thread-safe.
class JsonScanner {
 public:
  explicit JsonScanner(std::string_view text) : m_text(text) {}

  /// Whether only white space is left.
  bool at_end();
  /// Consumes `c` when it comes next.
  bool consume(char c);
  /// Whether `c` comes next (consumes nothing but white space).
  bool peek(char c);
  /// A string without escapes or control bytes into `out`; false on an escape.
  bool plain_string(std::string& out);
  /// A string into `out` whose escapes, if any, are the short ones (\" \\ \/
  /// \b \f \n \r \t); false on \u or a control byte.
  bool string(std::string& out);
  /// `true` or `false`.
  bool boolean(bool& out);
  /// A non-negative integer without sign, fraction, exponent or leading zero
  /// that fits in 64 bits.
  bool unsigned_integer(std::uint64_t& out);
  /// Skips one value of any kind, checking only its bracket structure and its
  /// strings' ends (the text was checked strictly when it was written).
  bool skip_value();

 private:
  void skip_space();
  bool skip_string();

  std::string_view m_text;
  std::size_t m_pos = 0;
};

}  // namespace opcache::base
