// The bundle manifest (format v1): what a bundle holds and for which key.
// JSON shape: schemas/manifest.schema.json; byte layout: docs/formats.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::store {

/// The bundle format version this code writes and the only one it reads.
inline constexpr std::uint32_t k_bundle_format_version = 1;

/// Limits a reader enforces before it trusts a bundle (no decompression
/// bombs, no path tricks). Writers enforce the same limits.
struct BundleLimits {
  std::uint32_t max_manifest_bytes = 4u << 20;
  std::size_t max_members = 128;
  std::uint64_t max_member_bytes = 1ull << 30;
  std::uint64_t max_total_bytes = 2ull << 30;
};

/// One file inside a bundle.
struct MemberEntry {
  std::string name;    ///< base name, checked by check_member_name()
  std::uint64_t size;  ///< uncompressed bytes
  std::string sha256;  ///< lowercase hex of the uncompressed bytes
  std::string role;    ///< "object", "metadata", "info", "package" or "other"

  bool operator==(const MemberEntry&) const = default;
};

/// Who wrote a bundle.
struct Producer {
  std::string tool = "opcache";
  std::string version;
  std::string host;
};

/// Everything a bundle says about itself.
struct Manifest {
  std::string key;                  ///< derive_key(descriptor, scenario)
  nlohmann::json descriptor;        ///< normalized descriptor (what was hashed)
  nlohmann::json scenario;          ///< scenario object (what was hashed)
  std::vector<MemberEntry> members; ///< in payload order
  Producer producer;
  std::string created;              ///< RFC 3339 UTC, e.g. "2026-11-22T00:51:54Z"
  std::int64_t build_ms = 0;        ///< how long the build took, for "compile time saved"

  std::string op_type() const;
  std::uint64_t total_size() const;
};

/// `usage` error unless `name` is a safe member file name: 1–255 bytes of
/// valid UTF-8, no control characters, no '/' or '\\', not containing "..",
/// not "." (so it can never leave the directory it is written to).
Status check_member_name(std::string_view name);

/// Whether `members` pass manifest_from_json's member checks: safe unique
/// names, sizes within `limits` (each and in total), well-formed SHA-256,
/// known roles, 1..max_members of them.
bool check_member_entries(const std::vector<MemberEntry>& members, const BundleLimits& limits);

/// The role implied by a file name's extension (.o → object, .json →
/// metadata, .info → info, .run → package, else other).
std::string role_for_member_name(std::string_view name);

/// The manifest as JSON (serialize with canonical_json for the bundle bytes).
nlohmann::json manifest_to_json(const Manifest& manifest);

/// Whether reading a manifest recomputes its key from descriptor and scenario.
enum class KeyCheck {
  recompute,     ///< always, for bundles from outside (uploads, downloads, imports)
  trust_digest,  ///< skip: the caller checks the bundle's digest against an index
                 ///< written only after the bundle was fully verified (local hits)
};

/// Parses and validates a manifest: every field present and of the right type,
/// no unknown fields, members within `limits` and safely named and unique, and
/// (with KeyCheck::recompute) the key equal to the key recomputed from
/// descriptor and scenario. Errors are `corrupt` (a bundle that lies about itself).
Result<Manifest> manifest_from_json(const nlohmann::json& value, const BundleLimits& limits,
                                    KeyCheck key_check = KeyCheck::recompute);

/// Now as RFC 3339 UTC with seconds precision.
std::string rfc3339_now();

}  // namespace opcache::store
