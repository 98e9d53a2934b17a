// One parser per kind of value read from a flag, an environment variable, a
// config file, a remote attribute or a query parameter: booleans and decimal
// integers. Every surface uses these, so a value means the same thing
// wherever it is written (docs/configuration.md, "Values").
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "opcache/result.hpp"

namespace opcache::base {

/// Parses a boolean: exactly "true", "1", "on", "yes" (true) or "false",
/// "0", "off", "no" (false), lower case, no surrounding spaces. Otherwise a
/// `usage` error whose message names neither the setting nor the value
/// ("must be true or false (or 1/0, on/off, yes/no)"); callers add both with
/// value_error. Pure; thread-safe.
Result<bool> parse_bool(std::string_view text);

/// Parses a decimal integer from `min` to `max`: an optional '+' or '-'
/// sign, then digits only (no spaces, no trailing characters). Otherwise a
/// `usage` error naming neither the setting nor the value ("must be an
/// integer from MIN to MAX"; "must be an integer of MIN or more" when MAX is
/// int64's largest, "must be an integer" when the range is the whole of
/// int64); callers add both with value_error. Pure; thread-safe.
Result<std::int64_t> parse_integer(std::string_view text, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                                   std::int64_t max = std::numeric_limits<std::int64_t>::max());

/// For a command-line parser that names the option itself (CLI11 writes
/// "--jobs: " before it): "" when `text` is an integer from `min` to `max`
/// as parse_integer reads it, else `"<text>" must be an integer from MIN to
/// MAX` (parse_integer's message after the value). Pure; thread-safe.
std::string integer_refusal(std::string_view text, std::int64_t min, std::int64_t max);

/// The standard message for a refused value: a `usage` error
/// "<where> \"<value>\" <problem>", e.g. `--threads "0" must be an integer
/// from 1 to 256`. `problem` is the message of a parse_* error. Pure.
Error value_error(std::string_view where, std::string_view value, const Error& problem);

}  // namespace opcache::base
