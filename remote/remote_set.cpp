#include "remote/remote_set.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/file_io.hpp"
#include "base/mutex.hpp"
#include "base/try.hpp"
#include "base/sha256.hpp"
#include "remote/prefetch.hpp"
#include "store/exec_manifest_file.hpp"
#include "store/key.hpp"

namespace opcache::remote {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t k_max_queued = 10000;
// UploaderBounds: after last_pass the transfer in flight is cancelled; it
// ends within about a second (libcurl's progress callback), and the thread
// with it. The uploader sleeps idle_poll between looks at the outboxes when
// nobody queues anything (other processes may have left markers there).

fs::path outbox_of(const store::StoreLayout& layout, const Remote& remote) {
  return layout.root() / "outbox" / remote_id(remote.store->name());
}

// An outbox marker: the object's path on the first line, then the entry's
// signatures (store/signature.hpp), one per line.
struct QueuedUpload {
  fs::path object;
  store::Signatures signatures;
};

std::string marker_text(const fs::path& object, const store::Signatures& signatures) {
  return signatures.empty() ? object.string() : object.string() + "\n" + store::format_signatures(signatures);
}

// The marker of an exec manifest: "<command key>.manifest", empty (the
// uploader reads the local manifest when it sends it). Processes from before
// manifests skip these names (not a key) and leave them for newer ones.
constexpr std::string_view k_manifest_marker_suffix = ".manifest";

std::string manifest_marker_name(const std::string& command_key) {
  return command_key + std::string(k_manifest_marker_suffix);
}

// The command key a manifest marker's name holds, or "" when it is not one.
std::string manifest_marker_key(const std::string& name) {
  const auto size = name.size() - std::min(name.size(), k_manifest_marker_suffix.size());
  const auto key = name.substr(0, size);
  return name.ends_with(k_manifest_marker_suffix) && base::is_sha256_hex(key) ? key : std::string();
}

// The markers of an outbox, as one listing saw them.
struct OutboxListing {
  std::vector<fs::path> entries;               // <key>
  std::set<std::string> manifests;             // command keys of <command key>.manifest
};

OutboxListing list_outbox(const fs::path& outbox) {
  OutboxListing listing;
  std::error_code ec;
  for (const auto& marker : fs::directory_iterator(outbox, ec)) {
    const auto name = marker.path().filename().string();
    if (base::is_sha256_hex(name)) {
      listing.entries.push_back(marker.path());
    } else if (auto key = manifest_marker_key(name); !key.empty()) {
      listing.manifests.insert(std::move(key));
    }
  }
  return listing;
}

// The inode of a marker (0 when it is gone): a marker written again while
// its manifest was being sent is a new file, and is kept for the next pass.
ino_t marker_identity(const fs::path& marker) {
  struct stat info {};
  return ::lstat(marker.c_str(), &info) == 0 ? info.st_ino : 0;
}

// A marker that cannot be read names no object: it is dropped.
QueuedUpload parse_marker(const std::string& text) {
  const auto end = text.find('\n');
  QueuedUpload queued{text.substr(0, end), {}};
  if (end != std::string::npos) {
    auto signatures = store::parse_signatures(std::string_view(text).substr(end + 1));
    if (!signatures) {
      return {};
    }
    queued.signatures = std::move(*signatures);
  }
  return queued;
}

}  // namespace

// The background upload loop, run by one worker thread. Shared with that
// thread, so a thread still finishing an upload after the RemoteSet is gone
// (one that ignored cancellation, see ~RemoteSet) touches nothing freed.
struct RemoteSet::Uploader {
  // Set before the thread starts, read-only after.
  std::vector<Remote> remotes;  // those with upload=true
  std::vector<fs::path> outboxes;
  store::WarningSink warn;
  std::optional<store::StoreLayout> layout;  // of the local store: where its exec manifests are
  UploaderBounds bounds;

  base::Mutex mutex;
  base::CondVar wake;                  // `work` or `closing` became true
  base::CondVar stopped;               // `finished` became true
  bool work GUARDED_BY(mutex) = true;  // check the outboxes (there may be leftovers from earlier processes)
  // The RemoteSet is going away: one last pass over the outboxes, starting no
  // upload after `give_up`. A short-lived process (one `opcache exec` per
  // compile) queues its key just before it exits; without this pass the key
  // would wait for some later, longer-lived process.
  bool closing GUARDED_BY(mutex) = false;
  std::chrono::steady_clock::time_point give_up GUARDED_BY(mutex) = std::chrono::steady_clock::time_point::max();
  bool finished GUARDED_BY(mutex) = false;  // run() has made its last pass

  void run() EXCLUDES(mutex) {
    for (;;) {
      const bool last_pass = wait_for_work();
      for (std::size_t i = 0; i < remotes.size() && !out_of_time(); ++i) {
        drain(remotes[i], outboxes[i]);
      }
      if (last_pass) {
        break;
      }
    }
    base::MutexLock lock(mutex);
    finished = true;
    stopped.notify_all();
  }

  // Sleeps until something is queued, the set closes or bounds.idle_poll
  // passes. True when this is the last pass (closing).
  bool wait_for_work() EXCLUDES(mutex) {
    const auto until = std::chrono::steady_clock::now() + bounds.idle_poll;
    base::MutexLock lock(mutex);
    while (!work && !closing && wake.wait_until(mutex, until)) {
    }
    work = false;
    return closing;
  }

  // Wakes the worker for its last pass, which starts no upload after `deadline`.
  void close(std::chrono::steady_clock::time_point deadline) EXCLUDES(mutex) {
    {
      base::MutexLock lock(mutex);
      closing = true;
      give_up = deadline;
    }
    wake.notify_all();
  }

  // Waits until run() has finished or `deadline` passed; whether it has finished.
  bool wait_finished(std::chrono::steady_clock::time_point deadline) EXCLUDES(mutex) {
    base::MutexLock lock(mutex);
    while (!finished && stopped.wait_until(mutex, deadline)) {
    }
    return finished;
  }

  bool out_of_time() EXCLUDES(mutex) {
    base::MutexLock lock(mutex);
    return std::chrono::steady_clock::now() >= give_up;
  }

  // Uploads what is queued for one remote; one process at a time per outbox.
  // The entries first, then the manifests: a manifest is sent only once a
  // second listing, begun after the first one saw its marker, has had its
  // entries uploaded, so every entry queued before a manifest (its marker
  // written first) reaches the remote before it. A manifest marker the
  // first listing missed waits for the next pass.
  void drain(const Remote& remote, const fs::path& outbox) {
    int lock_fd = ::open((outbox / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (lock_fd < 0) {
      return;
    }
    base::FileDescriptor lock(lock_fd);
    if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
      return;  // another process is draining it
    }
    const OutboxListing first = list_outbox(outbox);
    if (!upload_entries(remote, first.entries) || first.manifests.empty()) {
      return;
    }
    const OutboxListing second = list_outbox(outbox);
    if (!upload_entries(remote, second.entries)) {
      return;
    }
    for (const auto& command_key : first.manifests) {
      if (second.manifests.count(command_key) != 0 &&
          !upload_manifest(remote, outbox / manifest_marker_name(command_key), command_key)) {
        return;
      }
    }
  }

  // Uploads the entries of `markers`; false when the pass must stop (out of
  // time, the remote failing or its breaker open): what is left stays queued.
  bool upload_entries(const Remote& remote, const std::vector<fs::path>& markers) {
    std::error_code ec;
    for (const auto& marker : markers) {
      const auto key = marker.filename().string();
      if (out_of_time() || !remote.breaker->allows()) {
        return false;  // what is left stays queued for the next process
      }
      auto text = base::read_file(marker);
      if (!text && text.error().code() == ErrorCode::not_found) {
        continue;  // gone since the listing: nothing to upload
      }
      const auto queued = text ? parse_marker(*text) : QueuedUpload{};
      if (queued.object.empty() || !fs::exists(queued.object, ec)) {
        ::unlink(marker.c_str());  // the entry is gone locally: nothing to upload
        continue;
      }
      auto uploaded = remote.store->upload(key, queued.object, queued.signatures);
      if (!uploaded && !keep_going(remote, uploaded.error(), key)) {
        return false;
      }
      ::unlink(marker.c_str());
    }
    return true;
  }

  // Sends the local exec manifest of `command_key`, read now; false when the
  // pass must stop, as for an entry.
  bool upload_manifest(const Remote& remote, const fs::path& marker, const std::string& command_key) {
    if (out_of_time() || !remote.breaker->allows()) {
      return false;
    }
    const ino_t queued_as = marker_identity(marker);
    auto manifest = store::read_exec_manifest(*layout, command_key);
    if (!manifest) {
      warn("exec manifest " + command_key + " not uploaded to " + remote.store->name() + ": " +
           manifest.error().message());
    } else if (*manifest) {
      auto sent = remote.store->store_exec_manifest(**manifest);
      if (!sent && !keep_going(remote, sent.error(), "the exec manifest " + command_key)) {
        return false;
      }
    }
    if (marker_identity(marker) == queued_as) {
      ::unlink(marker.c_str());
    }
    return true;
  }

  // After a failed upload of `what`: a remote that fails pauses the queue
  // (false; the breaker records it); anything else drops the upload (true).
  bool keep_going(const Remote& remote, const Error& error, const std::string& what) {
    if (out_of_time()) {
      return false;  // cancelled as the process ends: not the remote's fault, and still queued
    }
    if (error.code() == ErrorCode::remote || error.code() == ErrorCode::timeout) {
      remote.breaker->record_failure(error.message());
      warn("upload to " + remote.store->name() + " paused: " + error.message());
      return false;
    }
    warn("upload of " + what + " to " + remote.store->name() + " dropped: " + error.message());
    return true;
  }
};

Result<std::unique_ptr<RemoteSet>> RemoteSet::open(const std::vector<RemoteOptions>& options,
                                                   store::LocalStore& local, const base::EnvLookup& env,
                                                   const UploaderBounds& bounds) {
  std::vector<Remote> remotes;
  for (const auto& option : options) {
    auto opened = open_remote(option, env);
    if (!opened) {
      return opened.error().with_context("remote " + display_url(option.url) + " (" + option.source + ")");
    }
    Remote remote;
    remote.options = option;
    remote.store = std::move(*opened);
    remote.breaker = std::make_shared<CircuitBreaker>(local.layout().root() / "remotes", remote.store->name(),
                                                      option.cooldown_s, local.options().clock);
    remotes.push_back(std::move(remote));
  }
  std::unique_ptr<RemoteSet> set(new RemoteSet(std::move(remotes), local));
  set->start_uploader(bounds);
  return set;
}

RemoteSet::RemoteSet(std::vector<Remote> remotes, store::LocalStore& local)
    : m_remotes(std::move(remotes)), m_local(local) {}

void RemoteSet::start_uploader(const UploaderBounds& bounds) {
  auto uploader = std::make_shared<Uploader>();
  uploader->bounds = bounds;
  uploader->warn = m_local.options().warn;
  uploader->layout = m_local.layout();
  for (const auto& remote : m_remotes) {
    if (remote.options.upload && !remote.options.read_only) {
      const auto outbox = outbox_of(m_local.layout(), remote);
      if (m_local.layout().ensure_directory(outbox)) {
        uploader->remotes.push_back(remote);
        uploader->outboxes.push_back(outbox);
      }
    }
  }
  if (uploader->remotes.empty()) {
    return;
  }
  m_uploader = uploader;
  m_uploader_thread = std::thread([uploader] { uploader->run(); });
}

RemoteSet::~RemoteSet() { (void)close(); }

Closing RemoteSet::close() {
  if (m_closed) {
    return *m_closed;
  }
  if (!m_uploader) {
    m_closed = Closing::no_uploader;
    return *m_closed;
  }
  const auto deadline = std::chrono::steady_clock::now() + m_uploader->bounds.last_pass;
  m_uploader->close(deadline);
  bool finished = m_uploader->wait_finished(deadline);
  Closing closing = Closing::finished;
  if (!finished) {
    // An upload still hangs: abort it, so that the thread has ended before the
    // process exits (a thread still inside libcurl and OpenSSL while exit()
    // runs their cleanup is a race). What it did not send stays queued.
    for (const auto& remote : m_uploader->remotes) {
      remote.store->cancel_transfers();
    }
    finished = m_uploader->wait_finished(std::chrono::steady_clock::now() + m_uploader->bounds.cancel);
    closing = Closing::cancelled;
  }
  if (finished) {
    m_uploader_thread.join();  // it has returned from run(): no wait
  } else {
    // An upload ignored its cancellation: exit is not delayed past the bound
    // for it. The thread keeps the Uploader (its shared_ptr) and ends on its own.
    m_uploader_thread.detach();
    closing = Closing::abandoned;
  }
  m_closed = closing;
  return closing;
}

bool RemoteSet::prefetch(const ListFilter& scenario) {
  bool pulled = false;
  for (const auto& remote : m_remotes) {
    if (remote.breaker->allows()) {
      pulled = prefetch_scenario(m_local, remote, scenario) || pulled;
    }
  }
  return pulled;
}

Result<bool> RemoteSet::fetch_into_local(const std::string& key, const LookupHint& hint, const ListFilter* scenario) {
  // Revoked here (`opcache revoke --local`): no remote may bring it back.
  if (auto tombstone = m_local.revocation(key); tombstone && *tombstone) {
    return false;
  }
  for (const auto& remote : m_remotes) {
    if (!remote.breaker->allows()) {
      continue;
    }
    if (scenario != nullptr) {
      prefetch_scenario(m_local, remote, *scenario);
      OPCACHE_TRY_ASSIGN(bool prefetched, m_local.contains(key));
      if (prefetched) {
        (void)m_local.record_counter("remote_hits", 1);
        return true;
      }
    }
    OPCACHE_TRY_ASSIGN(auto file, m_local.create_temp());
    store::Provenance provenance{true, remote.store->name(), {}};
    auto fetched = remote.store->fetch(key, file.fd(), &provenance.signatures, hint);
    if (!fetched) {
      if (fetched.error().code() == ErrorCode::io) {
        return fetched.error();  // our own disk, not the remote
      }
      remote.breaker->record_failure(fetched.error().message());
      m_local.options().warn("remote " + remote.store->name() + " failed, skipping it for " +
                             std::to_string(remote.options.cooldown_s) + " s: " + fetched.error().message());
      (void)m_local.record_counter("remote_errors", 1);
      continue;
    }
    remote.breaker->record_success();
    if (*fetched == Fetched::revoked) {
      // The team took the kernel back: a miss everywhere, whatever other
      // remotes may still hold; what this store holds goes too.
      purge_revoked(key, "remote " + remote.store->name() + " revoked it");
      return false;
    }
    if (*fetched == Fetched::miss) {
      continue;
    }
    auto adopted = m_local.adopt(std::move(file), key, ReplacePolicy::keep_existing, base::Durability::deferred,
                                 provenance);
    if (!adopted) {
      if (adopted.error().code() == ErrorCode::untrusted) {
        continue;  // reported and counted by adopt: a miss for this remote
      }
      if (adopted.error().code() != ErrorCode::corrupt) {
        return adopted.error();
      }
      m_local.options().warn("remote " + remote.store->name() + " answered " + key +
                             " with a bundle that failed verification; not stored: " + adopted.error().message());
      (void)m_local.record_counter("remote_corrupt", 1);
      continue;
    }
    (void)m_local.record_counter("remote_hits", 1);
    return true;
  }
  return false;
}

bool RemoteSet::purge_revoked(const std::string& key, const std::string& why, std::int64_t revoked_ms) {
  auto entry = m_local.find(key);
  if (!entry || !*entry || (*entry)->created_ms > revoked_ms) {
    return false;  // absent, or stored after the revocation (built here again)
  }
  auto removed = m_local.remove(key);
  if (!removed || !*removed) {
    return false;
  }
  (void)m_local.record_counter("revoked", 1);
  m_local.options().warn("deleted " + key + " from the local store: " + why);
  return true;
}

namespace {

// <cache>/remotes/<id>.revocations: {"checked_ms": when a process last
// asked the remote (or claimed to), "since": the remote's clock then}.
struct RevocationCursor {
  std::int64_t checked_ms = 0;
  std::int64_t since_s = 0;
};

RevocationCursor read_cursor(const fs::path& path) {
  RevocationCursor cursor;
  auto text = base::read_small_file(path, 4096);
  if (!text) {
    return cursor;
  }
  auto parsed = nlohmann::json::parse(*text, nullptr, false);
  if (parsed.is_object() && parsed.contains("checked_ms") && parsed["checked_ms"].is_number_integer() &&
      parsed.contains("since") && parsed["since"].is_number_integer()) {
    cursor.checked_ms = parsed["checked_ms"].get<std::int64_t>();
    cursor.since_s = parsed["since"].get<std::int64_t>();
  }
  return cursor;
}

// Not fsynced (a hit syncs nothing): a cursor a power cut loses or empties
// reads as the directory's first use, so the list is read from the start an
// interval later.
void write_cursor(const fs::path& path, const RevocationCursor& cursor) {
  const auto text = nlohmann::json{{"checked_ms", cursor.checked_ms}, {"since", cursor.since_s}}.dump();
  (void)base::write_file_atomic(path, text, base::Durability::deferred);
}

// Most pages one check reads (10,000 tombstones each).
constexpr int k_max_revocation_pages = 100;

}  // namespace

fs::path RemoteSet::revocation_cursor_path(const Remote& remote) const {
  return m_local.layout().root() / "remotes" / (remote_id(remote.store->name()) + ".revocations");
}

std::int64_t RemoteSet::check_revocations(std::int64_t interval_s, RevocationCheck when) {
  std::int64_t purged = 0;
  for (const auto& remote : m_remotes) {
    const auto path = revocation_cursor_path(remote);
    RevocationCursor cursor = read_cursor(path);
    const std::int64_t now_ms = m_local.options().clock();
    if (when == RevocationCheck::when_due && cursor.checked_ms <= now_ms &&
        now_ms - cursor.checked_ms < interval_s * 1000) {
      continue;  // checked recently, by this process or another of the cache directory
    }
    if (when == RevocationCheck::when_due && cursor.checked_ms == 0) {
      // The directory's first use with this remote: start the clock without
      // a request (a local hit stays local, and never loads libcurl); the
      // first read, an interval later, lists everything from the start.
      if (m_local.layout().ensure_directory(path.parent_path())) {
        write_cursor(path, RevocationCursor{now_ms, 0});
      }
      continue;
    }
    if (when == RevocationCheck::when_due && !remote.breaker->allows()) {
      continue;
    }
    // Claim the check first, so the other processes of the directory do not
    // all ask at once; the cursor moves only when the answer is applied.
    if (!m_local.layout().ensure_directory(path.parent_path())) {
      continue;
    }
    write_cursor(path, RevocationCursor{now_ms, cursor.since_s});
    std::int64_t since = cursor.since_s;
    std::int64_t next_since = since;
    bool failed = false;
    for (int page_number = 0; page_number < k_max_revocation_pages; ++page_number) {
      auto page = remote.store->revocations(since);
      if (!page) {
        // A lookup's failure opens the breaker, as the lookup itself would;
        // an explicit pull reports its own failure and leaves the breaker be.
        if (when == RevocationCheck::when_due &&
            (page.error().code() == ErrorCode::remote || page.error().code() == ErrorCode::timeout)) {
          remote.breaker->record_failure(page.error().message());
        }
        m_local.options().warn("revocation list of remote " + remote.store->name() +
                               " not read: " + page.error().message());
        failed = true;
        break;
      }
      remote.breaker->record_success();
      if (!*page) {
        break;  // the remote keeps no revocations (an older server)
      }
      for (const auto& tombstone : (*page)->tombstones) {
        if (purge_revoked(tombstone.key,
                          "remote " + remote.store->name() + " revoked it: " + tombstone.reason, tombstone.time_ms)) {
          ++purged;
        }
      }
      if (page_number == 0) {
        next_since = (*page)->now_s;
      }
      if (!(*page)->truncated || (*page)->tombstones.empty()) {
        break;
      }
      const std::int64_t last = (*page)->tombstones.back().time_s();
      if (last <= since) {
        break;  // more than a page within one second: the rest comes next time
      }
      since = last;
    }
    if (!failed) {
      write_cursor(path, RevocationCursor{now_ms, next_since});
    }
  }
  return purged;
}

const Remote* RemoteSet::team_remote() const {
  for (const auto& remote : m_remotes) {
    // leases() is null on a read-only remote (RemoteStore refuses its writes in one place).
    if (remote.options.upload && remote.store->leases() != nullptr) {
      return &remote;
    }
  }
  return nullptr;
}

void RemoteSet::enqueue_upload(const std::string& key, const Remote* except) {
  if (!m_uploader) {
    return;
  }
  auto entry = m_local.find(key);
  if (!entry || !*entry) {
    return;
  }
  const auto marker = marker_text(m_local.layout().object_path((*entry)->digest), (*entry)->signatures);
  for (std::size_t i = 0; i < m_uploader->outboxes.size(); ++i) {
    if (except != nullptr && m_uploader->remotes[i].store == except->store) {
      continue;
    }
    write_marker(m_uploader->outboxes[i], key, marker, key);
  }
  wake_uploader();
}

void RemoteSet::enqueue_exec_manifest_upload(const std::string& command_key) {
  if (!m_uploader || !base::is_sha256_hex(command_key)) {
    return;
  }
  for (const auto& outbox : m_uploader->outboxes) {
    write_marker(outbox, manifest_marker_name(command_key), "", "the exec manifest " + command_key);
  }
  wake_uploader();
}

void RemoteSet::write_marker(const fs::path& outbox, const std::string& name, const std::string& text,
                             const std::string& what) {
  std::error_code ec;
  std::size_t queued = 0;
  for (auto it = fs::directory_iterator(outbox, ec); it != fs::directory_iterator() && queued <= k_max_queued; ++it) {
    ++queued;
  }
  if (queued > k_max_queued) {
    m_local.options().warn("upload queue " + outbox.string() + " is full; " + what + " not queued (run opcache push)");
    return;
  }
  (void)base::write_file_atomic(outbox / name, text);
}

void RemoteSet::wake_uploader() {
  {
    base::MutexLock lock(m_uploader->mutex);
    m_uploader->work = true;
  }
  m_uploader->wake.notify_all();
}

Result<std::optional<store::ExecManifest>> RemoteSet::fetch_exec_manifests(const std::string& command_key) {
  OPCACHE_TRY(store::check_key(command_key));
  std::optional<store::ExecManifest> merged;
  for (const auto& remote : m_remotes) {
    if (!remote.breaker->allows()) {
      continue;
    }
    auto found = fetch_exec_manifest(remote, command_key);
    if (!found) {
      continue;
    }
    if (!merged) {
      merged = std::move(*found);
      continue;
    }
    // Same command key (checked): cannot fail.
    if (auto both = store::merge_exec_manifests(*merged, *found)) {
      merged = std::move(*both);
    }
  }
  return merged;
}

std::optional<store::ExecManifest> RemoteSet::fetch_exec_manifest(const Remote& remote,
                                                                   const std::string& command_key) {
  auto text = remote.store->fetch_exec_manifest(command_key);
  const std::string origin = "the exec manifest of " + command_key + " from remote " + remote.store->name();
  if (!text && text.error().code() != ErrorCode::corrupt) {
    if (text.error().code() == ErrorCode::remote || text.error().code() == ErrorCode::timeout) {
      remote.breaker->record_failure(text.error().message());
      (void)m_local.record_counter("remote_errors", 1);
      m_local.options().warn("remote " + remote.store->name() + " failed, skipping it for " +
                             std::to_string(remote.options.cooldown_s) + " s: " + text.error().message());
    } else {
      m_local.options().warn(origin + " not read: " + text.error().message());
    }
    return std::nullopt;
  }
  if (text) {
    remote.breaker->record_success();
    if (!*text) {
      return std::nullopt;
    }
  }
  auto parsed = text ? store::parse_exec_manifest(**text, origin) : Result<store::ExecManifest>(text.error());
  if (parsed && parsed->command_key != command_key) {
    parsed = Error::corrupt(origin + " is the manifest of " + parsed->command_key);
  }
  if (!parsed) {
    (void)m_local.record_counter("remote_corrupt", 1);
    m_local.options().warn("ignored " + origin + ": " + parsed.error().message());
    return std::nullopt;
  }
  return std::optional<store::ExecManifest>(std::move(*parsed));
}

Result<const Remote*> RemoteSet::select(const std::string& name_or_url) const {
  if (m_remotes.empty()) {
    return Error::usage("no remote configured: pass --remote URL, set OPCACHE_REMOTE, or add a [remote \"NAME\"] "
                        "section to the config file");
  }
  if (name_or_url.empty()) {
    return &m_remotes.front();
  }
  for (std::size_t i = 0; i < m_remotes.size(); ++i) {
    if (m_remotes[i].options.url == name_or_url || std::to_string(i + 1) == name_or_url ||
        m_remotes[i].store->name() == name_or_url) {
      return &m_remotes[i];
    }
  }
  return Error::usage("no configured remote named \"" + name_or_url + "\"");
}

}  // namespace opcache::remote
