// base/text: trimming and splitting shared by the settings, trust and
// scenario parsers.
#include <doctest/doctest.h>

#include <string_view>
#include <vector>

#include "base/text.hpp"

TEST_CASE("base::trim_space drops ASCII white space at both ends only") {
  CHECK(opcache::base::trim_space("  a b\t\r\n") == "a b");
  CHECK(opcache::base::trim_space("\v\fkey: value \f") == "key: value");
  CHECK(opcache::base::trim_space(" \t\r\n") == "");
  CHECK(opcache::base::trim_space("") == "");
  CHECK(opcache::base::trim_space("x") == "x");
  // Not white space in ASCII: kept (UTF-8 bytes, NUL).
  CHECK(opcache::base::trim_space("\xc2\xa0x") == "\xc2\xa0x");
  CHECK(opcache::base::trim_space(std::string_view("\0x", 2)) == std::string_view("\0x", 2));
}

TEST_CASE("base::split_on keeps empty fields and points into the text") {
  using Fields = std::vector<std::string_view>;
  CHECK(opcache::base::split_on("a,,b", ',') == Fields{"a", "", "b"});
  CHECK(opcache::base::split_on("", ',') == Fields{""});
  CHECK(opcache::base::split_on(",", ',') == Fields{"", ""});
  CHECK(opcache::base::split_on("8.0.RC2", '.') == Fields{"8", "0", "RC2"});
  const std::string_view text = "x|y";
  const auto fields = opcache::base::split_on(text, '|');
  REQUIRE(fields.size() == 2);
  CHECK(fields[1].data() == text.data() + 2);
}
