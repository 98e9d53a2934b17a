// opcache — key derivation without a store.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "opcache/result.hpp"
#include "opcache/scenario.hpp"

namespace opcache {

/// The key of a descriptor (JSON text of an object with a non-empty string
/// "op_type") in `scenario`, after removing the volatile fields described by
/// `volatile_fields` (the OPCACHE_VOLATILE_FIELDS syntax: std::nullopt means
/// the built-in list, "none" disables it, "+a,b" adds, "a,b" replaces; see
/// docs/formats.md). The same key `Store::key` gives for a store opened with
/// that setting. Errors: `usage` for bad JSON, a bad descriptor or a bad
/// setting. Pure: touches no files; thread-safe.
Result<std::string> derive_key(std::string_view descriptor_json, const Scenario& scenario,
                               const std::optional<std::string>& volatile_fields);

}  // namespace opcache
