// RFC 8785 JSON Canonicalization Scheme (JCS), with opcache's one deliberate
// deviation: integers that fit in 64 bits are written exactly (never rounded
// through a double). See docs/formats.md, "Key derivation".
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::base {

/// The canonical text of `value`: object members sorted by the UTF-16 code
/// units of their names, no whitespace, strings with the minimal JCS escapes,
/// doubles in ECMAScript shortest form, 64-bit integers exact.
/// Fails (`usage`) on invalid UTF-8, NaN/Infinity, or excessive nesting.
Result<std::string> canonical_json(const nlohmann::json& value);

/// ECMAScript Number::toString of a finite double (RFC 8785 section 3.2.2.3).
std::string format_es_double(double value);

}  // namespace opcache::base
