// Encodes bundle format v1 (docs/formats.md): header, canonical manifest,
// one zstd frame holding the members in manifest order.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"
#include "base/byte_stream.hpp"
#include "store/manifest.hpp"

namespace opcache::store {

/// A file to put into a bundle under `name` (callers usually pass its base name).
struct MemberSource {
  std::string name;
  std::filesystem::path path;
  std::string role;  ///< empty: derived from the name's extension
};

/// What a bundle is made of. The key is derived from descriptor and scenario.
struct BundleInput {
  nlohmann::json descriptor;  ///< normalized (volatile fields already removed)
  nlohmann::json scenario;    ///< scenario_to_json()
  std::vector<MemberSource> members;
  std::int64_t build_ms = 0;
  std::string created;        ///< RFC 3339; empty means now
};

struct BundleWriteOptions {
  int compression_level = 3;  ///< zstd level, 1..19
  BundleLimits limits;
};

/// The result of encoding: the manifest written and the bundle's own digest.
struct WrittenBundle {
  Manifest manifest;
  std::string digest;        ///< SHA-256 of all bundle bytes, lowercase hex
  std::uint64_t bytes = 0;   ///< bundle size
};

/// Reads each member file twice (hash, then compress) and fails with `io` if
/// a file changed in between, so the manifest always matches the payload.
/// Member names are checked (`usage`); limits are enforced (`usage`).
/// Streams to `out`; memory use is independent of member sizes.
Result<WrittenBundle> write_bundle(const BundleInput& input, base::ByteSink& out, const BundleWriteOptions& options = {});

/// The 16-byte header: magic "OPCBUNDL", u32 LE format version, u32 LE manifest length.
std::string encode_bundle_header(std::uint32_t manifest_length);

inline constexpr char k_bundle_magic[] = "OPCBUNDL";  // 8 bytes, no terminator on disk
inline constexpr std::size_t k_bundle_header_size = 16;

}  // namespace opcache::store
