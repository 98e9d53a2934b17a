// base/json_scanner: JsonScanner::plain_string, which finds a string's end
// eight bytes a step, against a byte-by-byte reading of the same rule.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/json_scanner.hpp"

namespace json_scanner_test {

// The rule, one byte at a time: a plain string ends at the first '"' and holds
// no '\\' and no byte below 0x20 before it.
bool plain_by_bytes(std::string_view body, std::string& out) {
  for (std::size_t i = 0; i < body.size(); ++i) {
    const auto byte = static_cast<unsigned char>(body[i]);
    if (byte == '"') {
      out.assign(body.substr(0, i));
      return true;
    }
    if (byte == '\\' || byte < 0x20) {
      return false;
    }
  }
  return false;
}

// `body` after an opening quote, read by plain_string; what it read, if anything.
bool plain_by_scanner(std::string_view body, std::string& out) {
  const std::string text = "\"" + std::string(body);
  opcache::base::JsonScanner in(text);
  return in.plain_string(out);
}

}  // namespace json_scanner_test

TEST_CASE("base::JsonScanner::plain_string stops where the byte-by-byte rule does, at every offset") {
  using json_scanner_test::plain_by_bytes;
  using json_scanner_test::plain_by_scanner;
  // Every special byte (and a few ordinary ones either side of the limits) at
  // every position of strings up to 40 bytes, with and without a closing quote after.
  const std::string specials = std::string("\"\\\x1f\x7f\x20\x80\xff", 7) + std::string(1, '\0') + "\n\t";
  for (std::size_t length = 0; length <= 40; ++length) {
    for (std::size_t at = 0; at <= length; ++at) {
      for (const char special : specials) {
        for (const bool closed : {false, true}) {
          std::string body(length, 'a');
          if (at < length) {
            body[at] = special;
          }
          if (closed) {
            body += "\"tail";
          }
          std::string expected, got;
          const bool by_bytes = plain_by_bytes(body, expected);
          INFO("length " << length << ", byte " << static_cast<int>(static_cast<unsigned char>(special)) << " at "
                         << at << (closed ? ", closed" : ""));
          REQUIRE(plain_by_scanner(body, got) == by_bytes);
          if (by_bytes) {
            CHECK(got == expected);
          }
        }
      }
    }
  }
}

TEST_CASE("base::JsonScanner::plain_string reads UTF-8 whole and goes on after the string") {
  const std::string text = "\"/home/\xc3\xa9t\xc3\xa9/k.h\" , \"sha256:00\"";
  opcache::base::JsonScanner in(text);
  std::string first, second;
  REQUIRE(in.plain_string(first));
  CHECK(first == "/home/\xc3\xa9t\xc3\xa9/k.h");
  REQUIRE(in.consume(','));
  REQUIRE(in.plain_string(second));
  CHECK(second == "sha256:00");
  CHECK(in.at_end());
}

namespace json_scanner_test {

TEST_CASE("base::JsonScanner::string reads the short escapes as nlohmann does, and gives up on \\u") {
  for (const std::string& value : {std::string("plain"), std::string(R"({"device_mode":"single","phase":"train"})"),
                                  std::string("tab\tnew\nline\rback\\slash/quote\"\bf\f"), std::string(),
                                  std::string(40, '"')}) {
    CAPTURE(value);
    const std::string text = nlohmann::json(value).dump();  // nlohmann escapes only what it must
    opcache::base::JsonScanner in(text);
    std::string out = "stale";
    REQUIRE(in.string(out));
    CHECK(out == value);
    CHECK(in.at_end());
  }
  std::string out;
  CHECK_FALSE(opcache::base::JsonScanner(R"("\u0001")").string(out));
  CHECK_FALSE(opcache::base::JsonScanner(R"("\x")").string(out));
  CHECK_FALSE(opcache::base::JsonScanner("\"unterminated\\").string(out));
  CHECK_FALSE(opcache::base::JsonScanner("\"control\x01\"").string(out));
}

TEST_CASE("base::JsonScanner::boolean reads true and false, nothing else") {
  bool value = false;
  CHECK((opcache::base::JsonScanner(" true").boolean(value) && value));
  CHECK((opcache::base::JsonScanner("false").boolean(value) && !value));
  CHECK_FALSE(opcache::base::JsonScanner("tru").boolean(value));
  CHECK_FALSE(opcache::base::JsonScanner("1").boolean(value));
}

}  // namespace json_scanner_test
