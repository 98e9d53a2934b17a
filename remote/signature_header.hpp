// The X-Opcache-Signature header of HTTP API v1 (docs/protocol.md
// "Signatures"), shared by the http remote (remote/http_remote.cpp) and the
// server (server/api_signatures.cpp).
#pragma once

#include <string_view>

#include "opcache/result.hpp"
#include "store/signature.hpp"

namespace opcache::remote {

/// The header's name, as sent.
inline constexpr const char* k_signature_header = "X-Opcache-Signature";

/// The signatures of one X-Opcache-Signature header value: one or more
/// comma-separated "<public key base64>:<signature base64>" (a proxy may
/// fold repeated headers into one), blanks around each and empty items
/// ignored, a signer given twice counted once. The first malformed item is
/// a `usage` error quoting it. Pure; thread-safe.
Result<store::Signatures> parse_signature_header(std::string_view value);

/// Parses `value` like parse_signature_header and appends its signatures to
/// `signatures`, skipping signers already there.
Status add_signature_header(std::string_view value, store::Signatures& signatures);

}  // namespace opcache::remote
