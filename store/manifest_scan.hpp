// The manifest of a local hit, read without building a JSON tree. A hit's
// bundle was fully verified when it was stored (strict parse, every field,
// the key recomputed), and the hit checks the bundle digest against the index
// before it publishes anything; so it needs only the fields it uses — key and
// members — read fast and checked for what decoding relies on (member names,
// sizes and limits). Parsing the whole manifest with nlohmann::json cost a hit
// about as much as copying its files.
#pragma once

#include <optional>
#include <string_view>

#include "store/manifest.hpp"

namespace opcache::store {

/// Reads `text` as a manifest of the simple shape our writer produces (one
/// JSON object; "descriptor", "scenario" and "producer" are skipped and left
/// empty in the result; "key", "members", "created", "build_ms", "format",
/// "format_version" and "compression" are read; the key, the members and
/// the format fields are checked as manifest_from_json checks them). Returns std::nullopt whenever it cannot
/// vouch for the result — any syntax it does not handle, an unknown or
/// repeated field, a check that fails — and the caller then parses strictly.
/// Use only where the bundle digest is checked against a verified index row
/// before anything is published. Thread-safe.
std::optional<Manifest> scan_manifest_for_hit(std::string_view text, const BundleLimits& limits);

}  // namespace opcache::store
