// Percent-encoding (RFC 3986 section 2.1): one decoder and one encoder for
// URLs, query strings and object names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace opcache::base {

/// What a '+' stands for: itself (paths, RFC 3986), or a space
/// (application/x-www-form-urlencoded query strings).
enum class PlusSign { literal, space };

/// Decodes %XX escapes (either case). std::nullopt when a '%' is not followed
/// by two hexadecimal digits.
std::optional<std::string> percent_decode(std::string_view text, PlusSign plus = PlusSign::literal);

/// Encodes every byte except ASCII letters, digits and the characters in
/// `keep` as %XX with uppercase hex (the form SigV4 and S3 expect).
std::string percent_encode(std::string_view text, std::string_view keep = "-._~");

}  // namespace opcache::base
