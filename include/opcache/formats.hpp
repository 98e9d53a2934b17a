// opcache — the versions of the formats this build reads and writes.
#pragma once

#include <cstdint>
#include <string>

namespace opcache {

/// The key derivation version, e.g. "opcache-key-v1": the first line of the
/// text that is hashed into every key. Pure; thread-safe.
std::string key_derivation_version();

/// The bundle (object file) format version written into every manifest.
/// Pure; thread-safe.
std::uint32_t bundle_format_version() noexcept;

/// The index (SQLite) schema version this build creates and opens. Pure;
/// thread-safe.
int index_schema_version() noexcept;

}  // namespace opcache
