// Op descriptors: the JSON object that says what was compiled.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"
#include "store/volatile_fields.hpp"

namespace opcache::store {

/// A descriptor ready for hashing: volatile fields removed.
struct Descriptor {
  nlohmann::json normalized;  ///< the exact value that is hashed and stored in the manifest
  std::string op_type;        ///< the "op_type" member, used for listing and debug bypass
};

/// Checks that `raw` is an object with a non-empty string "op_type", then
/// removes volatile fields. Errors are `usage` and start with `origin`.
/// Takes `raw` by value: a caller done with it moves it in and nothing is copied.
Result<Descriptor> normalize_descriptor(nlohmann::json raw, const VolatileFieldFilter& filter,
                                        const std::string& origin);

/// Checks a descriptor that is already normalized (as stored in a manifest):
/// same rules, no stripping, so the hash is computed over exactly these bytes.
Result<Descriptor> stored_descriptor(const nlohmann::json& normalized, const std::string& origin);

}  // namespace opcache::store
