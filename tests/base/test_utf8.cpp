// base/utf8: is_valid_utf8, which skips ASCII eight bytes a step, at every
// offset of a sequence, valid or not.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "base/utf8.hpp"

TEST_CASE("base::is_valid_utf8 judges a sequence the same at every offset and length of ASCII around it") {
  struct Case {
    std::string_view bytes;
    bool valid;
  };
  const Case cases[] = {
      {"\xc3\xa9", true},           // é
      {"\xe2\x82\xac", true},       // €
      {"\xf0\x9f\x98\x80", true},   // U+1F600
      {"\x80", false},              // a continuation byte alone
      {"\xc3", false},              // a lead byte without its continuation
      {"\xc0\xaf", false},          // overlong '/'
      {"\xed\xa0\x80", false},      // a UTF-16 surrogate
      {"\xf4\x90\x80\x80", false},  // above U+10FFFF
      {"\xff", false},
  };
  for (const auto& sample : cases) {
    for (std::size_t before = 0; before <= 17; ++before) {
      for (std::size_t after = 0; after <= 9; after += 3) {
        const std::string text = std::string(before, 'a') + std::string(sample.bytes) + std::string(after, 'z');
        INFO("sequence of " << sample.bytes.size() << " bytes after " << before << " ASCII, before " << after);
        CHECK(opcache::base::is_valid_utf8(text) == sample.valid);
      }
    }
  }
  CHECK(opcache::base::is_valid_utf8(""));
  CHECK(opcache::base::is_valid_utf8(std::string(64, 'a')));
  CHECK(opcache::base::is_valid_utf8(std::string_view("a\0b", 3)));  // NUL is ASCII; callers refuse it themselves
}
