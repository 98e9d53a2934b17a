// A remote store: somewhere bundles can be fetched from and uploaded to. One
// small interface, one file pair per backend (http_remote, s3_remote,
// file_remote), picked by URL scheme. Callers verify everything they fetch.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_io.hpp"
#include "opcache/result.hpp"
#include "opcache/types.hpp"
#include "remote/build_leases.hpp"
#include "remote/entry_explainer.hpp"
#include "remote/lookup_headers.hpp"
#include "remote/remote_config.hpp"
#include "remote/server_statistics.hpp"
#include "store/exec_manifest.hpp"
#include "store/revocation.hpp"
#include "store/scenario.hpp"
#include "store/signature.hpp"

namespace opcache::remote {

/// What a fetch found: the entry, nothing, or a revoked key (a tombstone:
/// the remote refuses it, docs/remotes.md "Revocation"). A revoked key is a
/// miss, never a failure of the remote.
enum class Fetched { miss, hit, revoked };

/// One answer of a remote's revocation list (GET /v1/revocations).
struct RevocationPage {
  std::vector<store::Tombstone> tombstones;  ///< oldest first
  std::int64_t now_s = 0;                    ///< the remote's clock: `since` of the next call
  bool truncated = false;                    ///< more matched: ask again from the last one's time
};

/// Receives the entries of RemoteStore::fetch_batch one at a time, as they
/// arrive (from the thread that calls fetch_batch).
class BatchReceiver {
 public:
  virtual ~BatchReceiver() = default;
  /// A fresh empty file for the next bundle; an error stops the batch.
  virtual Result<base::AtomicFile> create_file() = 0;
  /// The bundle of `key` is complete in `file`, with `signatures`. Neither is
  /// trusted: verify both (LocalStore::adopt).
  virtual void received(const std::string& key, base::AtomicFile file, store::Signatures signatures) = 0;
  /// The remote has no entry for `key` (Fetched::miss) or refuses it (Fetched::revoked).
  virtual void absent(const std::string& key, Fetched why) = 0;
  /// True when the batch should stop (the transfer was cancelled).
  virtual bool stopping() const { return false; }
};

/// A remote. Implementations are thread-safe (push/pull call them from many
/// threads) and reuse connections. Transport failures are `remote` or
/// `timeout` errors; absence is not an error.
///
/// A remote opened `read-only` refuses every write here, in this class, and
/// nowhere else: upload, add_signatures, revoke, unrevoke and
/// store_exec_manifest answer a `usage` error ("remote NAME is read-only")
/// without calling the backend, and leases() is null (a read-only remote
/// would never upload what it leased). A backend implements the writes as
/// the private do_* functions, which run only on a writable remote.
class RemoteStore {
 public:
  virtual ~RemoteStore() = default;

  /// Ok when the remote takes writes; the `usage` error "remote NAME is
  /// read-only" that every write answers when it was opened read-only
  /// (RemoteOptions::read_only).
  Status writable() const;

  /// The URL without credentials, for messages.
  virtual std::string name() const = 0;

  /// Writes the bundle of `key` to `fd` (an empty regular file, written from
  /// its start) and, when `signatures` is not null, replaces its contents
  /// with the signatures stored with the entry (docs/formats.md
  /// "Signatures"); Fetched::miss on a miss, Fetched::revoked (nothing
  /// written) when the remote holds a tombstone for the key. Neither the bytes nor the signatures
  /// are trusted: the caller verifies both (LocalStore::adopt). `hint` says
  /// what the lookup is for, when the caller knows it; an opcache server is
  /// told (remote/lookup_headers.hpp), other backends ignore it.
  virtual Result<Fetched> fetch(const std::string& key, int fd, store::Signatures* signatures,
                                const LookupHint& hint) = 0;

  /// Fetches the entries of `keys` in as few requests as the remote allows
  /// (an opcache server's POST /v1/entries/fetch: a stream of bundles),
  /// handing each to `receiver` as it arrives: a cut-short response keeps
  /// what was complete. Returns the keys it did not answer — all of them for
  /// a remote without batches (the default) or a server older than API v1
  /// revision 6, the rest of a response that failed, a bundle too large for
  /// a batch — which the caller fetches one at a time with fetch().
  virtual std::vector<std::string> fetch_batch(const std::vector<std::string>& keys, BatchReceiver& receiver) {
    (void)receiver;
    return keys;
  }

  /// Uploads the bundle file of `key` (verified locally) with its
  /// signatures. Idempotent: an existing entry is kept. Refused when read-only.
  Status upload(const std::string& key, const std::filesystem::path& bundle, const store::Signatures& signatures);

  /// Adds `signatures` to the stored entry of `key` (an entry that was
  /// uploaded before it was signed). `not_found` when the remote lacks the
  /// key; a server that refuses a signature answers `untrusted`. Refused when
  /// read-only.
  Status add_signatures(const std::string& key, const store::Signatures& signatures);

  /// Whether each key is present, in order, in as few round trips as the
  /// backend allows.
  virtual Result<std::vector<bool>> query(const std::vector<std::string>& keys) = 0;

  /// Every key whose entry matches `filter` (scenario fields, op type).
  virtual Result<std::vector<std::string>> list_keys(const ListFilter& filter) = 0;

  /// Whether list_keys() can filter by scenario (device mode, phase,
  /// toolchain, soc); prefetching needs it.
  virtual bool lists_by_scenario() const { return true; }

  /// Aborts this remote's transfers in progress and refuses later ones (the
  /// process is ending: RemoteSet's destructor, so that the background
  /// uploader can be joined before exit). Thread-safe; not undone.
  virtual void cancel_transfers() noexcept {}

  /// The build leases of this remote (a team server), or null when the
  /// backend has none (file://, s3://) or the remote is read-only. Owned by
  /// the remote.
  BuildLeases* leases();

  /// The statistics of this remote's server (an opcache server), or null
  /// when the backend has no server (file://, s3://). Owned by the remote.
  virtual ServerStatistics* statistics() { return nullptr; }

  /// How this remote's server compares its entries with a lookup (an opcache
  /// server), or null when the backend has no server. Owned by the remote.
  virtual EntryExplainer* explainer() { return nullptr; }

  /// The tombstones revoked at Unix second `since_s` or later (docs/remotes.md
  /// "Revocation"); std::nullopt when the remote keeps none (a server older
  /// than API v1 revision 5).
  virtual Result<std::optional<RevocationPage>> revocations(std::int64_t since_s) {
    (void)since_s;
    return std::optional<RevocationPage>();
  }

  /// Revokes `keys` with `reason` for everyone using the remote (a tombstone
  /// each; the entries are deleted), signed by `signer` when not null. For
  /// each key, whether the remote held an entry. An opcache server needs an
  /// admin token (`remote` error naming the scope otherwise). Refused when
  /// read-only.
  Result<std::vector<bool>> revoke(const std::vector<std::string>& keys, const std::string& reason,
                                   const base::Ed25519PrivateKey* signer);

  /// Removes the tombstone of `key`; false when the key was not revoked.
  /// Refused when read-only.
  Result<bool> unrevoke(const std::string& key);

  /// The exec manifest the remote keeps for `command_key` (store/exec_manifest.hpp),
  /// as the JSON text it sent: not parsed, not trusted (RemoteSet parses it;
  /// a lookup never trusts what it points at). std::nullopt when the remote
  /// has none, or keeps no manifests: the default, and a server older than
  /// API v1 revision 7 (it answers 404). A transport failure is a `remote` or
  /// `timeout` error; a stored manifest larger than store::k_max_manifest_bytes
  /// is `corrupt`.
  virtual Result<std::optional<std::string>> fetch_exec_manifest(const std::string& command_key) {
    (void)command_key;
    return std::optional<std::string>();
  }

  /// Receives one exec manifest of fetch_exec_manifest_batch: its command
  /// key and its JSON text as the remote sent it (not parsed, not trusted).
  using ManifestReceiver = std::function<void(const std::string& command_key, std::string text)>;

  /// The exec manifests of `command_keys` in as few requests as the remote
  /// allows (an opcache server of API v1 revision 10: one POST
  /// /v1/manifests/fetch per 1,000 keys), each handed to `receive` as it
  /// arrives, on the calling thread. A key the remote answered it has no
  /// manifest for is not received. Returns the keys not answered (the
  /// default: all; an older server; a failed request), for the caller to
  /// ask one at a time with fetch_exec_manifest. Never fails.
  virtual std::vector<std::string> fetch_exec_manifest_batch(const std::vector<std::string>& command_keys,
                                                             const ManifestReceiver& receive) {
    (void)receive;
    return command_keys;
  }

  /// Merges `manifest` into the one the remote keeps for its command key
  /// (its builds first, docs/remotes.md "Exec manifests"): a server merges
  /// under its own lock; file:// and s3:// read, merge and write, so of two
  /// writers racing on one key the last one wins (a lost build costs a miss,
  /// never a wrong hit). A server older than API v1 revision 7 keeps nothing
  /// (ok). A read-only remote is a `usage` error.
  Status store_exec_manifest(const store::ExecManifest& manifest);

 protected:
  /// `read_only`: the remote refuses writes (RemoteOptions::read_only).
  explicit RemoteStore(bool read_only) noexcept : m_read_only(read_only) {}

 private:
  // The backend's writes, called by the public functions above only when
  // the remote is writable; each has the contract of its public namesake.
  virtual Status do_upload(const std::string& key, const std::filesystem::path& bundle,
                           const store::Signatures& signatures) = 0;
  virtual Status do_add_signatures(const std::string& key, const store::Signatures& signatures) = 0;
  virtual Result<std::vector<bool>> do_revoke(const std::vector<std::string>& keys, const std::string& reason,
                                              const base::Ed25519PrivateKey* signer) = 0;
  virtual Result<bool> do_unrevoke(const std::string& key) = 0;
  virtual Status do_store_exec_manifest(const store::ExecManifest& manifest) = 0;
  // Default: no build leases (null).
  virtual BuildLeases* do_leases() { return nullptr; }

  bool m_read_only;
};

/// What a remote URL names: a team server (`opcache serve`, which also has
/// build leases and statistics), an S3 bucket, or a directory.
enum class RemoteKind { server, s3, file };

/// One row of the scheme table (remote_store.cpp): a URL prefix and what it
/// names. Adding a kind of remote means a row there, a case in open_remote
/// (a switch with no default: -Wswitch names it) and a backend file pair.
struct RemoteScheme {
  std::string_view prefix;  ///< "http://", "https://", "s3://", "file://"
  RemoteKind kind;
};

/// The row whose prefix `url` starts with, with something after it; nullptr
/// when none does. Pure; thread-safe.
const RemoteScheme* find_remote_scheme(std::string_view url) noexcept;

/// The prefixes of the table for messages: "http://, https://, s3:// or file://".
std::string remote_scheme_names();

/// Opens the backend for `options.url` (scheme → factory). Performs no I/O
/// beyond what the backend needs to be usable (none for http and file).
Result<std::unique_ptr<RemoteStore>> open_remote(const RemoteOptions& options, const base::EnvLookup& env);

/// Backend factories (one per file).
Result<std::unique_ptr<RemoteStore>> make_http_remote(const RemoteOptions& options);
Result<std::unique_ptr<RemoteStore>> make_s3_remote(const RemoteOptions& options, const base::EnvLookup& env);
Result<std::unique_ptr<RemoteStore>> make_file_remote(const RemoteOptions& options);

}  // namespace opcache::remote
