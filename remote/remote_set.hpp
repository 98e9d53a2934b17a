// The remotes of one client, in lookup order, with their circuit breakers,
// the layered lookup (local first, then each remote; a remote hit is
// verified like a local one, then stored locally), the exec manifests of
// the remotes, and the background upload queue. The queue is a directory of
// markers (<cache>/outbox/<remote id>/<key> for an entry,
// <cache>/outbox/<remote id>/<command key>.manifest for an exec manifest) so
// uploads survive the process: whichever process next opens the store with
// that remote continues them.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "opcache/result.hpp"
#include "remote/circuit_breaker.hpp"
#include "remote/remote_store.hpp"
#include "store/exec_manifest.hpp"
#include "store/local_store.hpp"

namespace opcache::remote {

/// One configured remote, opened.
struct Remote {
  RemoteOptions options;
  std::shared_ptr<RemoteStore> store;
  std::shared_ptr<CircuitBreaker> breaker;
};

/// When check_revocations asks a remote.
enum class RevocationCheck {
  when_due,  ///< at most once per interval per cache directory (a lookup)
  now,       ///< whatever the interval says (opcache pull, prefetch)
};

/// How long the background uploader waits, and how long closing a RemoteSet
/// waits for it. The defaults are the product's: closing never takes more
/// than last_pass + cancel (5 s). Tests pass others.
struct UploaderBounds {
  std::chrono::milliseconds last_pass{2000};  ///< the last pass over the queue as the set closes
  std::chrono::milliseconds cancel{3000};     ///< an upload cancelled after last_pass, to end
  std::chrono::milliseconds idle_poll{5000};  ///< between looks at the outboxes when nothing is queued
};

/// How RemoteSet::close ended.
enum class Closing {
  no_uploader,  ///< no remote takes uploads
  finished,     ///< the last pass ended within UploaderBounds::last_pass
  cancelled,    ///< the upload still running then was cancelled, and the thread ended
  abandoned,    ///< that upload ignored its cancellation: the thread was left to end on its own
};

class RemoteSet {
 public:
  /// Opens every remote. A remote that cannot even be opened (bad URL, no S3
  /// credentials) is a `usage` error: configuration mistakes are loud.
  static Result<std::unique_ptr<RemoteSet>> open(const std::vector<RemoteOptions>& options, store::LocalStore& local,
                                                 const base::EnvLookup& env, const UploaderBounds& bounds = {});
  /// close().
  ~RemoteSet();
  /// Gives the uploader one last pass over the queue, woken at once, waiting
  /// at most `last_pass` (2 s; the upload in flight included); what is left
  /// stays queued on disk for the next process that opens the store with the
  /// remote. An upload still running then is cancelled and given `cancel`
  /// (3 s) more to end; the worker thread is then joined, or, if the upload
  /// ignored its cancellation, left to end on its own: closing never takes
  /// more than about 5 s. Uploads stop for good; a second call returns the
  /// first one's answer at once.
  Closing close();
  RemoteSet(const RemoteSet&) = delete;
  RemoteSet& operator=(const RemoteSet&) = delete;

  bool empty() const noexcept { return m_remotes.empty(); }
  const std::vector<Remote>& remotes() const noexcept { return m_remotes; }

  /// Tries each remote whose breaker allows it, in order. A bundle that is
  /// found is verified and adopted into the local store (true). A corrupt or
  /// mis-keyed answer is reported, counted and never stored; a failing remote
  /// opens its breaker. Never fails for remote reasons: false then. `hint`
  /// (what the key is, when the caller knows it) goes with each request to an
  /// opcache server (remote/lookup_headers.hpp). With `scenario` (the
  /// lookup's scenario), each remote first gets the chance to prefetch the
  /// whole scenario (remote/prefetch.hpp).
  Result<bool> fetch_into_local(const std::string& key, const LookupHint& hint, const ListFilter* scenario = nullptr);

  /// Gives each remote whose breaker allows it the chance to prefetch
  /// `scenario` into the local store, entries and exec manifests
  /// (remote/prefetch.hpp), as fetch_into_local does before it fetches a
  /// key: for a lookup that starts from the local store's exec manifests.
  /// Never fails; never waits for another process's prefetch. Returns
  /// whether this call pulled anything (else the local store is as it was).
  bool prefetch(const ListFilter& scenario);

  /// Reads each remote's revocation list (RemoteStore::revocations) and
  /// deletes the revoked keys from the local store (counted as `revoked`,
  /// each reported through the warning sink); an entry stored after its
  /// revocation (built here again) stays. With RevocationCheck::when_due, a
  /// remote is asked only when no process of this cache directory asked it
  /// in the last `interval_s` seconds: the time and the `since` cursor are
  /// shared through <cache>/remotes/<id>.revocations, so a lookup between
  /// checks reads one small file and nothing else. A failing remote opens
  /// its breaker; never fails. Returns how many entries were deleted.
  std::int64_t check_revocations(std::int64_t interval_s, RevocationCheck when);

  /// Deletes `key` from the local store when it was stored at or before
  /// `revoked_ms` (the revocation's time), counting it as `revoked` and
  /// reporting `why`; whether it was deleted.
  bool purge_revoked(const std::string& key, const std::string& why,
                     std::int64_t revoked_ms = std::numeric_limits<std::int64_t>::max());

  /// Queues `key` (stored locally) for upload to every remote with `upload`
  /// but `except` (one it was just uploaded to). Never blocks on the
  /// network. At most 10,000 queued per remote.
  void enqueue_upload(const std::string& key, const Remote* except = nullptr);

  /// The exec manifests the remotes keep for `command_key`, merged: each
  /// remote whose breaker allows it is asked, in order, and the builds of an
  /// earlier remote come first. An answer that is not a valid manifest of
  /// that key is reported through the warning sink, counted as
  /// `remote_corrupt` and ignored; a failing remote opens its breaker. Never
  /// fails for remote reasons: std::nullopt when no remote has one. Nothing
  /// in it is trusted: a lookup recomputes the entry key from the inputs.
  Result<std::optional<store::ExecManifest>> fetch_exec_manifests(const std::string& command_key);

  /// Queues the local exec manifest of `command_key` (store/exec_manifest_file.hpp)
  /// for upload to every remote with `upload`, like enqueue_upload: the
  /// uploader sends it after the entries queued before it, and reads the
  /// manifest when it sends it (so one upload carries every build merged
  /// locally by then). Never blocks on the network; a key that is not 64
  /// lowercase hex is ignored.
  void enqueue_exec_manifest_upload(const std::string& command_key);

  /// The remote that coordinates builds across machines (team single
  /// flight): the first http(s) remote with `upload` that is not read-only;
  /// null when there is none.
  const Remote* team_remote() const;

  /// The remote named by `name_or_url` (its URL, or its position "1", "2"…), or
  /// the first one when empty.
  Result<const Remote*> select(const std::string& name_or_url) const;

 private:
  struct Uploader;
  RemoteSet(std::vector<Remote> remotes, store::LocalStore& local);
  void start_uploader(const UploaderBounds& bounds);
  std::filesystem::path revocation_cursor_path(const Remote& remote) const;
  // Writes the marker `name` with `text` into `outbox` unless the queue is
  // full (then warns that `what` was not queued).
  void write_marker(const std::filesystem::path& outbox, const std::string& name, const std::string& text,
                    const std::string& what);
  // Tells the uploader there is work.
  void wake_uploader();
  // The exec manifest of `command_key` from `remote`, parsed and checked;
  // std::nullopt when it has none, failed (its breaker records it) or
  // answered something else (reported).
  std::optional<store::ExecManifest> fetch_exec_manifest(const Remote& remote, const std::string& command_key);

  std::vector<Remote> m_remotes;
  store::LocalStore& m_local;
  std::shared_ptr<Uploader> m_uploader;  // null when no remote takes uploads
  std::thread m_uploader_thread;         // runs m_uploader->run(); joined by close()
  std::optional<Closing> m_closed;       // how close() ended, once it has run
};

}  // namespace opcache::remote
