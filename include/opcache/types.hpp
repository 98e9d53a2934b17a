// opcache — plain data types returned by the store (C++ API).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace opcache {

/// What a put does when the key is already stored.
enum class ReplacePolicy {
  keep_existing,  ///< keep the stored entry (it is verified on every read anyway)
  replace,        ///< store the new bundle and retire the old one (force mode)
};

/// One stored entry, as the index describes it.
/// A detached Ed25519 signature of an entry (docs/formats.md "Signatures"):
/// made by `public_key` over "opcache-sig-v1\n" + key + "\n" + bundle digest.
/// Carried beside the bundle, never inside it. Whether it verifies, and
/// whether its key is trusted, is for the reader to decide.
struct Signature {
  std::string public_key;  ///< the signer's raw 32-byte Ed25519 public key
  std::string signature;   ///< the raw 64-byte signature
  bool operator==(const Signature&) const = default;
};

struct Entry {
  std::string key;
  std::string digest;            ///< SHA-256 of the bundle = its object name
  std::int64_t bundle_size = 0;  ///< bytes on disk (compressed)
  std::int64_t raw_size = 0;     ///< uncompressed member bytes
  std::string op_type;
  std::string device_mode;
  std::string phase;
  std::string toolchain;
  std::string soc;
  std::string scenario;          ///< canonical JSON of the scenario
  std::int64_t created_ms = 0;   ///< Unix time in ms when stored here
  std::int64_t last_access_ms = 0;
  std::int64_t build_ms = 0;     ///< recorded build duration
  std::int64_t hits = 0;
  bool pinned = false;
  std::vector<Signature> signatures;  ///< as stored, one per signer, verified or not
};

/// Filters for listing; empty strings match everything.
struct ListFilter {
  std::string op_type;
  std::string device_mode;
  std::string phase;
  std::string toolchain;
  std::string soc;
  std::string after_key;    ///< only keys strictly greater (pagination)
  std::int64_t limit = -1;  ///< -1: no limit
};

/// Totals over all entries.
struct StoreTotals {
  std::int64_t entries = 0;
  std::int64_t bundle_bytes = 0;
  std::int64_t raw_bytes = 0;
  std::int64_t pinned = 0;
};

/// Totals plus the store's counters (hits, misses, stores, evictions,
/// bytes_stored, bytes_served, corrupt_entries, missing_objects,
/// compile_ms_saved, ...). Counters never set are absent.
struct StoreStats {
  StoreTotals totals;
  std::map<std::string, std::int64_t> counters;
};

/// The outcome of a put.
struct PutResult {
  std::string key;
  std::string digest;
  std::int64_t bundle_bytes = 0;
  std::int64_t raw_bytes = 0;
  bool stored = false;  ///< false: the key was already present and kept
};

/// The outcome of Store::sign.
struct SignReport {
  std::int64_t signed_entries = 0;   ///< entries that got the signing key's signature
  std::int64_t already_signed = 0;   ///< entries that already had it
  std::vector<std::string> missing;  ///< keys asked for that are not stored
  std::vector<std::string> corrupt;  ///< entries whose object did not match its digest (left unsigned)
};

/// An entry that no valid signature by a trusted key vouches for.
struct UntrustedEntry {
  std::string key;
  std::string op_type;
  std::string reason;      ///< "unsigned", "untrusted signer <base64 prefix>…" or "bad signature"
  std::string error_code;  ///< signature_required, untrusted_signature or bad_signature
};

/// The outcome of a hit.
struct GetResult {
  Entry entry;
  std::vector<std::filesystem::path> files;  ///< written members, in bundle order
};

/// One finding of a verification.
struct VerifyProblem {
  std::string kind;     ///< corrupt_entry, missing_object, stale_key_record, orphan_object, stale_temp, unexpected_file
  std::string subject;  ///< key, digest or file name
  std::string detail;
  bool repaired = false;
};

struct VerifyReport {
  std::int64_t entries_checked = 0;
  std::int64_t objects_checked = 0;
  std::int64_t bytes_checked = 0;
  std::vector<VerifyProblem> problems;
};

/// What aging did (or, in a dry run, would do).
struct GcReport {
  bool aging_enabled = true;
  bool dry_run = false;
  std::int64_t limit_bytes = 0;   ///< max_op_cache_size in bytes (-1: aging disabled)
  std::int64_t target_bytes = 0;  ///< limit × remain ratio: aging stops at or below this
  std::int64_t min_idle_ms = 0;
  std::int64_t entries_before = 0;
  std::int64_t bytes_before = 0;
  std::int64_t entries_removed = 0;
  std::int64_t bytes_removed = 0;
  std::int64_t bytes_after = 0;
  std::vector<Entry> removed;   ///< least recently used first
  std::string stopped_because;  ///< why aging stopped where it did
};

/// What `clear` removed.
struct ClearReport {
  std::int64_t entries_removed = 0;
  std::int64_t bytes_removed = 0;
};

/// Progress of a push or pull, reported while it runs.
struct TransferProgress {
  std::int64_t total = 0;        ///< items to transfer (after the batch query)
  std::int64_t done = 0;         ///< transferred or failed so far
  std::int64_t bytes = 0;        ///< bundle bytes transferred so far
  double seconds = 0;            ///< since the transfers began
};

/// The outcome of a push or pull.
struct TransferSummary {
  std::string remote;
  std::int64_t requested = 0;    ///< keys considered
  std::int64_t transferred = 0;
  std::int64_t skipped = 0;      ///< already on the other side (or absent from the source)
  std::int64_t failed = 0;
  std::int64_t refused = 0;      ///< pulled entries the signature requirement refused (not stored)
  std::int64_t signatures_sent = 0;  ///< push --add-signatures: entries whose signatures were sent
  std::int64_t manifests = 0;    ///< exec manifests sent (push) or merged into the local ones (pull)
  std::int64_t bytes = 0;
  double seconds = 0;
  bool interrupted = false;
  std::vector<std::pair<std::string, std::string>> failures;  ///< key, reason (first 100)
};

/// A team server's statistics (docs/protocol.md "Statistics"), each
/// document as the server sent it (JSON text of an object).
struct ServerStats {
  std::string remote;        ///< the server's URL without credentials
  std::string summary_json;  ///< GET /v1/stats/summary?window=…
  std::string misses_json;   ///< GET /v1/stats/misses?limit=…
};

}  // namespace opcache
