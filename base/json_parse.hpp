// Strict JSON input: parse errors and duplicate object keys are reported with
// their origin (a file name or "request body") and position.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::base {

/// Deepest nesting accepted in any JSON input (descriptors, manifests, bodies).
inline constexpr int k_max_json_depth = 128;

/// Parses `text` as one JSON document. Rejects syntax errors, duplicate keys in
/// an object, nesting deeper than `k_max_json_depth`, and numbers out of the
/// double range. Integers that fit in 64 bits are kept exactly.
/// Errors are `usage` and start with `origin`.
Result<nlohmann::json> parse_json(std::string_view text, const std::string& origin);

/// Reads and parses a JSON file with `parse_json`; a missing file is `not_found`.
Result<nlohmann::json> load_json_file(const std::filesystem::path& path);

}  // namespace opcache::base
