// Where `opcache serve` keeps bundles: the local store (embedded default) or
// an S3-compatible bucket. Handlers (api.cpp) only talk to this interface.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"
#include "server/metrics.hpp"
#include "base/file_io.hpp"
#include "store/exec_manifest.hpp"
#include "store/manifest.hpp"
#include "store/revocation.hpp"
#include "store/signature.hpp"

namespace opcache::remote {
class S3Bucket;
}

namespace opcache::server {

/// What the usage statistics need of an entry that is served
/// (server/usage_stats): read from the index or the bundle's manifest.
struct EntryFacts {
  std::string op_type;
  std::string scenario;       ///< canonical JSON of the scenario
  std::int64_t build_ms = 0;  ///< the build time its producer recorded
};

/// Bundles from this size up that a storage holds in memory come with their
/// stored file kept open (StoredBundle::memory_file), so a plain-HTTP
/// response sends them with sendfile(2): copying 64 KiB into the socket was
/// 15 % of the server's time for such GETs, opening the file per request
/// another 12 % (`perf record`).
inline constexpr std::size_t k_zero_copy_bytes = 32 * 1024;

/// An open bundle, ready to stream: a file, or the whole bundle in memory.
struct StoredBundle {
  base::FileDescriptor fd;  ///< positioned at the start; not valid when `memory` holds the bundle
  std::shared_ptr<const std::string> memory;  ///< the whole bundle (small bundles of a local store), or null
  /// With `memory`: the stored file holding the same bytes (objects never
  /// change), open for reading at any offset (pread, sendfile with an
  /// offset: it is shared), for bundles of k_zero_copy_bytes or more while
  /// the storage's budget of open files lasts; else null.
  std::shared_ptr<const base::FileDescriptor> memory_file;
  std::int64_t size = 0;
  std::string digest;        ///< SHA-256 of the bundle (the ETag)
  store::Signatures signatures;  ///< as stored with the entry (each verified when it was stored); may be empty
  std::shared_ptr<const EntryFacts> facts;  ///< null when the storage could not tell
};

/// Where a client may download a stored bundle itself, and what a 200 would
/// have said of it (GET /v1/entries/{key} answered 307 under `serve
/// --redirect-downloads`, docs/protocol.md).
struct LocatedBundle {
  /// A presigned GET of the bundle object, valid for the expiry asked; a
  /// bearer secret until then (never logged). Empty when this bundle cannot
  /// be handed out by URL (its object lacks the digest): serve it instead.
  std::string url;
  std::int64_t size = 0;
  std::string digest;            ///< SHA-256 of the bundle (the ETag)
  store::Signatures signatures;  ///< as stored with the entry (each verified when it was stored); may be empty
  std::shared_ptr<const EntryFacts> facts;  ///< null when not known without reading the bundle
};

/// The outcome of storing an upload.
struct UploadOutcome {
  bool stored = false;  ///< false: the key was already present (idempotent PUT)
  std::string digest;
  std::int64_t bytes = 0;
};

/// One entry in a listing.
struct ListedEntry {
  std::string key;
  std::string op_type;
  nlohmann::json scenario;
  std::int64_t bundle_bytes = -1;  ///< -1 when the storage cannot tell cheaply (S3)
  std::int64_t created_ms = 0;     ///< 0 when unknown
};

/// Filters and cursor of a listing; empty strings match everything.
struct ListQuery {
  std::string device_mode, phase, toolchain, soc, op_type;
  std::string after;  ///< opaque cursor from a previous page's `next`
  int limit = 100;
};

struct ListPage {
  std::vector<ListedEntry> entries;
  std::string next;  ///< cursor for the next page; empty when this is the last
};

/// A storage backend. Implementations are thread-safe: handlers call them
/// concurrently from the worker pool and the I/O threads.
class Storage {
 public:
  virtual ~Storage() = default;

  /// "local /path" or "s3 bucket/prefix at endpoint", for logs.
  virtual std::string describe() const = 0;
  /// What API answers may say of the storage: "local", or "s3 bucket/prefix"
  /// (no file-system path, no endpoint).
  virtual std::string public_description() const = 0;
  /// Where the server may keep its own state (the usage history,
  /// server/usage_stats) across restarts: the local store's root; null for
  /// storage shared by stateless replicas (S3).
  virtual std::optional<std::filesystem::path> state_dir() const = 0;
  /// The bucket every server over this storage shares, where replicas keep
  /// what they must agree on (build leases, usage counters; presigned
  /// downloads point into it); null for storage that belongs to one server
  /// (a local store). Thread-safe like the storage.
  virtual remote::S3Bucket* shared_bucket() { return nullptr; }
  /// True when open() only reads local files (an index lookup and a file
  /// open), cheap enough to run on an I/O thread; false when it may wait on
  /// the network (then reads go to the worker pool).
  virtual bool reads_are_local() const = 0;
  /// The bundle of `key`, or std::nullopt.
  virtual Result<std::optional<StoredBundle>> open(const std::string& key) = 0;
  /// Whether locate() can hand out bundles by URL: a storage whose objects
  /// clients can reach themselves (S3); false for a local store.
  virtual bool locates_bundles() const { return false; }
  /// The bundle of `key` as a presigned URL valid for `expiry` from now, with
  /// its size, digest and signatures, found without reading the bundle (a
  /// HEAD of its object and a read of its signatures); std::nullopt when the
  /// key is absent. Only when locates_bundles(): else an `internal` error.
  virtual Result<std::optional<LocatedBundle>> locate(const std::string& key, std::chrono::seconds expiry) {
    (void)key;
    (void)expiry;
    return Error::internal("this storage cannot hand out bundles by URL");
  }
  /// A fresh temp file for an upload; discarded unless handed to store_verified.
  virtual Result<base::AtomicFile> create_upload() = 0;
  /// Makes a bundle visible under its key with `signatures`. The caller
  /// verified the bundle completely (verify_bundle), checked the key and
  /// checked that every signature verifies for the key and `digest`;
  /// `bytes` is the file's size. The signatures are stored before the entry
  /// becomes visible. An existing entry is kept as it is (signatures too).
  virtual Result<UploadOutcome> store_verified(base::AtomicFile upload, const store::Manifest& manifest,
                                               const std::string& digest, std::int64_t bytes,
                                               const store::Signatures& signatures) = 0;
  /// Adds `signatures` to the stored entry of `key`, skipping signers that
  /// already signed it. Every one must verify for the key and the stored
  /// bundle's digest, else an `untrusted` error naming the signer and
  /// nothing is added. std::nullopt when the key is absent; else how many
  /// were new. Later open() calls return the new signatures.
  virtual Result<std::optional<int>> add_signatures(const std::string& key, const store::Signatures& signatures) = 0;
  /// Deletes an entry; false when absent.
  virtual Result<bool> remove(const std::string& key) = 0;
  /// For each key, whether it is present (same order).
  virtual Result<std::vector<bool>> present(const std::vector<std::string>& keys) = 0;
  virtual Result<ListPage> list(const ListQuery& query) = 0;
  /// Entries, bytes and evictions where cheap to know.
  virtual StorageGauges gauges() = 0;

  // Revocation (docs/formats.md "Tombstones"): the tombstones live in the
  // storage itself, so a restarted server and every replica over the same
  // storage agree on them.

  /// The tombstone of `key`, or std::nullopt when it is not revoked.
  virtual Result<std::optional<store::Tombstone>> revocation(const std::string& key) = 0;
  /// Writes the tombstone (replacing an earlier one of its key), then
  /// deletes the entry of its key; true when there was an entry to delete.
  virtual Result<bool> revoke(const store::Tombstone& tombstone) = 0;
  /// Removes the tombstone of `key`; false when there was none.
  virtual Result<bool> unrevoke(const std::string& key) = 0;
  /// The tombstones revoked at `since_ms` or later, oldest first, at most
  /// `limit`; `*truncated` says whether more matched.
  virtual Result<std::vector<store::Tombstone>> revocations(std::int64_t since_ms, std::size_t limit,
                                                           bool* truncated) = 0;

  // Exec manifests (docs/formats.md "Exec manifests"; PUT and GET
  // /v1/manifests/{key}): one per command key, in the storage itself.

  /// The stored exec manifest of `command_key`, or std::nullopt. One that is
  /// not a valid manifest of the key is a `corrupt` error naming it.
  virtual Result<std::optional<store::ExecManifest>> exec_manifest(const std::string& command_key) = 0;
  /// Merges `manifest` into the stored manifest of its command key (its
  /// builds first; a missing or invalid stored one counts as none), stores
  /// the result and returns it. Reads, then writes: the caller serializes
  /// the merges of one key (Api does).
  virtual Result<store::ExecManifest> merge_exec_manifest(const store::ExecManifest& manifest) = 0;
};

}  // namespace opcache::server
