// Revocation: tombstones that take a bad kernel back out of every cache
// (docs/formats.md "Tombstones"). A tombstone names a key, why it was
// revoked and when; it is one small JSON file, <dir>/<key>.json, written
// atomically, in the same form wherever it lives: a server's local storage
// (<root>/revocations/), a local store (<cache>/revocations/, `opcache
// revoke --local`), a file:// remote (<dir>/revocations/) and, as objects,
// an S3 bucket (<prefix>/revocations/<key>.json).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ed25519.hpp"
#include "opcache/result.hpp"
#include "opcache/types.hpp"

namespace opcache::store {

/// Longest reason a tombstone keeps, in bytes of UTF-8.
inline constexpr std::size_t k_max_revocation_reason = 1024;

/// One revoked key.
struct Tombstone {
  std::string key;
  std::string reason;        ///< non-empty UTF-8, at most k_max_revocation_reason bytes
  std::int64_t time_ms = 0;  ///< Unix milliseconds of the revocation

  /// Unix seconds of the revocation (rounded down).
  std::int64_t time_s() const noexcept { return time_ms / 1000; }
};

/// `usage` error unless `reason` is non-empty UTF-8 of at most
/// k_max_revocation_reason bytes without control characters other than tab.
Status check_revocation_reason(std::string_view reason);

/// The file form: {"key","reason","time","time_ms"} (time in Unix seconds),
/// one line. Pure.
std::string tombstone_json(const Tombstone& tombstone);

/// Parses the file form; `corrupt` error naming `what` when it is malformed
/// or when its key is not `expected_key` (a tombstone filed under another
/// key). Pure.
Result<Tombstone> parse_tombstone(std::string_view text, const std::string& expected_key, const std::string& what);

/// The bytes a revocation's signature covers: "opcache-revoke-v1\n" +
/// time_s + "\n" + reason + "\n" + the keys, one per line, in request
/// order (docs/security.md "Revocation").
std::string revocation_message(const std::vector<std::string>& keys, std::string_view reason, std::int64_t time_s);

/// `signing_key`'s signature of the revocation of `keys` for `reason` at `time_s`.
Result<Signature> sign_revocation(const base::Ed25519PrivateKey& signing_key, const std::vector<std::string>& keys,
                                  std::string_view reason, std::int64_t time_s);

/// Whether `signature` is a valid signature of that revocation by its
/// public key (says nothing about whether the key is trusted).
bool revocation_signature_verifies(const Signature& signature, const std::vector<std::string>& keys,
                                   std::string_view reason, std::int64_t time_s);

/// The tombstones kept in one directory, <dir>/<key>.json. Every operation
/// works on the files alone, so processes (and server replicas) sharing the
/// directory agree. A directory that does not exist holds no tombstone.
class TombstoneDirectory {
 public:
  explicit TombstoneDirectory(std::filesystem::path dir) : m_dir(std::move(dir)) {}

  const std::filesystem::path& dir() const noexcept { return m_dir; }
  /// <dir>/<key>.json
  std::filesystem::path path_of(const std::string& key) const { return m_dir / (key + ".json"); }

  /// Writes (or replaces) the tombstone of its key atomically (temp file,
  /// fsync, rename), creating the directory.
  Status add(const Tombstone& tombstone) const;
  /// The tombstone of `key`, or std::nullopt. A malformed file is `corrupt`.
  Result<std::optional<Tombstone>> find(const std::string& key) const;
  /// Removes the tombstone of `key`; false when there was none.
  Result<bool> remove(const std::string& key) const;
  /// The tombstones revoked at `since_ms` or later, oldest first (then by
  /// key), at most `limit`; `*truncated` (when given) says whether more
  /// matched. Files that are not tombstones are skipped.
  Result<std::vector<Tombstone>> list(std::int64_t since_ms, std::size_t limit, bool* truncated = nullptr) const;

 private:
  std::filesystem::path m_dir;
};

/// Sorts `tombstones` oldest first, then by key, and keeps those revoked at
/// `since_ms` or later, at most `limit` (`*truncated` says whether more
/// matched). Shared by every backend's listing.
std::vector<Tombstone> select_tombstones(std::vector<Tombstone> tombstones, std::int64_t since_ms, std::size_t limit,
                                         bool* truncated);

}  // namespace opcache::store
