#include "base/value_parse.hpp"

#include <charconv>
#include <optional>
#include <string>

namespace opcache::base {

Result<bool> parse_bool(std::string_view text) {
  if (text == "true" || text == "1" || text == "on" || text == "yes") {
    return true;
  }
  if (text == "false" || text == "0" || text == "off" || text == "no") {
    return false;
  }
  return Error::usage("must be true or false (or 1/0, on/off, yes/no)");
}

namespace {

// The digits and sign of a decimal integer as from_chars reads them: a
// leading '+' dropped, "+-1" and "" refused.
std::optional<std::int64_t> decimal(std::string_view text) {
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
    if (!text.empty() && text.front() == '-') {
      return std::nullopt;
    }
  }
  std::int64_t value = 0;
  const auto [end, failure] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
  if (text.empty() || failure != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;  // also out of int64's range (result_out_of_range)
  }
  return value;
}

}  // namespace

Result<std::int64_t> parse_integer(std::string_view text, std::int64_t min, std::int64_t max) {
  if (auto value = decimal(text); value && *value >= min && *value <= max) {
    return *value;
  }
  constexpr auto k_lowest = std::numeric_limits<std::int64_t>::min();
  constexpr auto k_highest = std::numeric_limits<std::int64_t>::max();
  if (min == k_lowest && max == k_highest) {
    return Error::usage("must be an integer");
  }
  if (max == k_highest) {
    return Error::usage("must be an integer of " + std::to_string(min) + " or more");
  }
  return Error::usage("must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
}

std::string integer_refusal(std::string_view text, std::int64_t min, std::int64_t max) {
  auto value = parse_integer(text, min, max);
  return value ? std::string() : "\"" + std::string(text) + "\" " + value.error().message();
}

Error value_error(std::string_view where, std::string_view value, const Error& problem) {
  return Error::usage(std::string(where) + " \"" + std::string(value) + "\" " + problem.message());
}

}  // namespace opcache::base
