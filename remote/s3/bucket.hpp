// One opcache bucket: the layout of remote/s3/layout.hpp over an S3Client,
// shared by the s3:// remote (remote/s3_remote.cpp) and the server's S3
// storage (server/s3_storage.cpp), so both write, find, list and delete
// entries the same way.
//
// Writes put the signatures object first (when there are signatures), the
// bundle second and its listing marker last. When the marker
// upload fails, the bundle is deleted again and the write fails: a bucket
// never holds a listed entry without its bundle (the marker comes last), nor
// a bundle that no listing will ever show (an existing bundle makes later
// writes of the key no-ops, so it must not stay unlisted). docs/remotes.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "opcache/result.hpp"
#include "remote/s3/client.hpp"
#include "remote/s3/layout.hpp"
#include "store/exec_manifest.hpp"
#include "store/manifest.hpp"
#include "store/revocation.hpp"
#include "store/signature.hpp"

namespace opcache::remote {

/// The index fields of an entry from its manifest (scenario fields that are
/// not strings read as "").
S3IndexFields index_fields_of(const store::Manifest& manifest);

/// True when every non-empty field of `filter` equals the field of `fields`.
bool matches_filter(const S3IndexFields& fields, const S3IndexFields& filter);

/// The string member `name` of a JSON object, or "" when absent or not a string.
std::string json_text(const nlohmann::json& object, const char* name);

/// A marker met while listing: its object name, fields and entry key.
struct S3Marker {
  std::string name;
  S3IndexFields fields;
  std::string key;
};

/// Thread-safe like S3Client: calls may run concurrently.
class S3Bucket {
 public:
  /// A bucket reached through `client`.
  explicit S3Bucket(S3Client client);

  /// The underlying client.
  S3Client& client() noexcept { return m_client; }
  const S3Client& client() const noexcept { return m_client; }

  /// The bundle object of `key` (size, metadata), or nullopt when absent.
  Result<std::optional<S3Object>> head_bundle(const std::string& key);

  /// Streams the bundle of `key` to `fd` (S3Client::get_to_fd); false when absent.
  Result<bool> get_bundle(const std::string& key, int fd, std::int64_t max_bytes);

  /// Stores the verified bundle file of `key` with its `digest` (metadata),
  /// its `signatures` (the signatures object, written first and only when
  /// there are any, so the entry is never visible without them) and its
  /// listing marker for `fields`: the bundle next, the marker last; a
  /// failed marker upload deletes the bundle again and returns the marker's
  /// error (with a note when the deletion failed too). The empty marker file
  /// and the signatures file are made next to `bundle`, in its directory.
  /// Does not check whether the key exists: callers HEAD first (head_bundle).
  Status put_entry(const std::string& key, const std::filesystem::path& bundle, const S3IndexFields& fields,
                   const std::string& digest, const store::Signatures& signatures = {});

  /// The signatures stored with `key` (parsed from its signatures object);
  /// empty when there is no such object (an unsigned or older entry). The
  /// object is downloaded through a temp file in `temp_dir`. A malformed
  /// object is a `remote` error naming it. Signatures are not verified here.
  Result<store::Signatures> get_signatures(const std::string& key, const std::filesystem::path& temp_dir);

  /// Replaces the signatures object of `key` with `signatures` (written
  /// through a temp file in `temp_dir`); the caller merged and verified them.
  Status put_signatures(const std::string& key, const store::Signatures& signatures,
                        const std::filesystem::path& temp_dir);

  /// Deletes the bundle of `key`, then its marker (named in the bundle's
  /// metadata) and its signatures object; false when there was no bundle.
  Result<bool> remove_entry(const std::string& key);

  /// For each key, whether its bundle exists (same order): a HEAD per key for
  /// up to 32 keys, else one listing of all bundles.
  Result<std::vector<bool>> present(const std::vector<std::string>& keys);

  /// Writes the tombstone of its key (s3_tombstone_name) through a temp file
  /// in `temp_dir`, replacing any earlier one.
  Status put_tombstone(const store::Tombstone& tombstone, const std::filesystem::path& temp_dir);

  /// The tombstone of `key`, or std::nullopt; a malformed object is a
  /// `remote` error naming it.
  Result<std::optional<store::Tombstone>> get_tombstone(const std::string& key, const std::filesystem::path& temp_dir);

  /// Deletes the tombstone of `key`; false when there was none.
  Result<bool> remove_tombstone(const std::string& key);

  /// Every tombstone (a listing of v1/revocations/, then a GET of each),
  /// selected as store::select_tombstones does.
  Result<std::vector<store::Tombstone>> list_tombstones(std::int64_t since_ms, std::size_t limit, bool* truncated,
                                                       const std::filesystem::path& temp_dir);

  /// The exec manifest text of `command_key` (s3_exec_manifest_name),
  /// downloaded through a temp file in `temp_dir`, not parsed; std::nullopt
  /// when there is none. An object larger than store::k_max_manifest_bytes
  /// is a `remote` error.
  Result<std::optional<std::string>> get_exec_manifest(const std::string& command_key,
                                                       const std::filesystem::path& temp_dir);

  /// Replaces the exec manifest of its command key with `manifest` (written
  /// through a temp file in `temp_dir`).
  Status put_exec_manifest(const store::ExecManifest& manifest, const std::filesystem::path& temp_dir);

  /// Reads the stored manifest of `manifest`'s command key, merges `manifest`
  /// into it (its builds first; a stored object that is not a valid manifest
  /// of the key counts as none) and writes the result, which it returns.
  /// Read, merge, write: S3 has no compare-and-swap here, so of two merges
  /// racing on one key the last one wins; callers that can (the server)
  /// serialize them per key.
  Result<store::ExecManifest> merge_exec_manifest(const store::ExecManifest& manifest,
                                                  const std::filesystem::path& temp_dir);

  /// Calls `visit` for every marker matching `filter`, in name order, starting
  /// after the marker name `start_after` (may be empty), until `visit`
  /// returns false. Names that are not markers are skipped.
  Status for_each_marker(const S3IndexFields& filter, const std::string& start_after,
                         const std::function<bool(const S3Marker&)>& visit);

 private:
  S3Client m_client;
};

}  // namespace opcache::remote
