// Standard base64 (RFC 4648 section 4, with padding), for public keys and
// signatures in text files, JSON and HTTP headers; and base64url (section 5,
// without padding), for values in HTTP headers and URLs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace opcache::base {

/// The padded standard base64 of `bytes`.
std::string base64_encode(std::string_view bytes);

/// The bytes of padded standard base64 `text`, or std::nullopt when `text`
/// is not exactly that (wrong length, a character outside the alphabet,
/// misplaced padding, non-zero bits after the last byte). Strict, so one
/// value has one spelling.
std::optional<std::string> base64_decode(std::string_view text);

/// The unpadded base64url of `bytes` ('-' and '_' for '+' and '/', no '=').
std::string base64url_encode(std::string_view bytes);

/// The bytes of unpadded base64url `text`, or std::nullopt when `text` is
/// not exactly that (a '=', '+' or '/', a length of 4n+1, non-zero bits
/// after the last byte). Strict, like base64_decode.
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace opcache::base
