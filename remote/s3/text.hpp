// Small text helpers shared by the S3 files (URL parsing, listings, the client).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace opcache::remote {

/// True when `text` holds a byte below 0x20 or DEL.
bool has_control_character(std::string_view text);

/// `text` in single quotes, for messages.
std::string single_quoted(std::string_view text);

/// A decimal integer ≥ 0 spanning all of `text`; nullopt otherwise.
std::optional<std::int64_t> parse_non_negative(std::string_view text);

/// An ETag without its surrounding double quotes (unchanged when unquoted).
std::string strip_quotes(std::string_view etag);

}  // namespace opcache::remote
