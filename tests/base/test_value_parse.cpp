// base/value_parse: the one boolean and the one integer grammar.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "base/value_parse.hpp"

using opcache::base::parse_bool;
using opcache::base::parse_integer;

TEST_CASE("base::parse_bool accepts true/false, 1/0, on/off, yes/no and nothing else") {
  for (const char* text : {"true", "1", "on", "yes"}) {
    CAPTURE(text);
    REQUIRE(parse_bool(text).ok());
    CHECK(*parse_bool(text));
  }
  for (const char* text : {"false", "0", "off", "no"}) {
    CAPTURE(text);
    REQUIRE(parse_bool(text).ok());
    CHECK_FALSE(*parse_bool(text));
  }
  for (const char* text : {"", "maybe", "TRUE", "On", " yes", "yes ", "2", "y", "enable"}) {
    CAPTURE(text);
    auto parsed = parse_bool(text);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().code() == opcache::ErrorCode::usage);
    CHECK(parsed.error().message() == "must be true or false (or 1/0, on/off, yes/no)");
  }
}

TEST_CASE(
    "base::parse_integer takes a signed decimal within the range and refuses junk, overflow and the range's outside") {
  CHECK(*parse_integer("42") == 42);
  CHECK(*parse_integer("+42") == 42);
  CHECK(*parse_integer("-42") == -42);
  CHECK(*parse_integer("007") == 7);
  CHECK(*parse_integer("9223372036854775807") == std::numeric_limits<std::int64_t>::max());
  CHECK(*parse_integer("-9223372036854775808") == std::numeric_limits<std::int64_t>::min());
  for (const char* text : {"", "+", "-", "+-1", "12x", " 12", "12 ", "0x10", "1e3", "1.5", "9223372036854775808",
                           "-9223372036854775809"}) {
    CAPTURE(text);
    auto parsed = parse_integer(text);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().message() == "must be an integer");
  }
  CHECK(*parse_integer("1", 1, 256) == 1);
  CHECK(*parse_integer("256", 1, 256) == 256);
  auto below = parse_integer("0", 1, 256);
  REQUIRE_FALSE(below.ok());
  CHECK(below.error().code() == opcache::ErrorCode::usage);
  CHECK(below.error().message() == "must be an integer from 1 to 256");
  CHECK_FALSE(parse_integer("257", 1, 256).ok());
  CHECK(parse_integer("many", 1, 256).error().message() == "must be an integer from 1 to 256");
  CHECK(*parse_integer("9223372036854775807", 0) == std::numeric_limits<std::int64_t>::max());
  CHECK(parse_integer("-1", 0).error().message() == "must be an integer of 0 or more");
}

TEST_CASE("base::integer_refusal is empty for an integer in range, else the value and parse_integer's problem") {
  using opcache::base::integer_refusal;
  CHECK(integer_refusal("8", 1, 256).empty());
  CHECK(integer_refusal("+8", 1, 256).empty());
  CHECK(integer_refusal("0", 1, 256) == "\"0\" must be an integer from 1 to 256");
  CHECK(integer_refusal("8 ", 1, 256) == "\"8 \" must be an integer from 1 to 256");
  CHECK(integer_refusal("-1", 0, std::numeric_limits<std::int64_t>::max()) == "\"-1\" must be an integer of 0 or more");
}

TEST_CASE("base::value_error names the place and quotes the value before the problem") {
  const auto error = opcache::base::value_error("--threads", "0", parse_integer("0", 1, 256).error());
  CHECK(error.code() == opcache::ErrorCode::usage);
  CHECK(error.message() == "--threads \"0\" must be an integer from 1 to 256");
}
