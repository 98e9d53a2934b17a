// Small text helpers shared by the S3 files (URL parsing, listings, the client).
#pragma once

#include <string>
#include <string_view>

namespace opcache::remote {

/// True when `text` holds a byte below 0x20 or DEL.
bool has_control_character(std::string_view text);

/// `text` in single quotes, for messages.
std::string single_quoted(std::string_view text);

/// An ETag without its surrounding double quotes (unchanged when unquoted).
std::string strip_quotes(std::string_view etag);

}  // namespace opcache::remote
