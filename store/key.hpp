// Key derivation (fixed; see docs/formats.md "Key derivation"):
//   key = hex(SHA-256("opcache-key-v1\n" + JCS(descriptor) + "\n" + JCS(scenario)))
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::store {

/// The version prefix of the key preimage. Changing it invalidates every cache.
inline constexpr std::string_view k_key_prefix = "opcache-key-v1\n";

/// The exact bytes that are hashed. `descriptor` must already be normalized.
Result<std::string> key_preimage(const nlohmann::json& descriptor, const nlohmann::json& scenario);

/// The key: lowercase hex SHA-256 of key_preimage().
Result<std::string> derive_key(const nlohmann::json& descriptor, const nlohmann::json& scenario);

/// `usage` error unless `key` is 64 lowercase hex characters.
Status check_key(std::string_view key);

}  // namespace opcache::store
