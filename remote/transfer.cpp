#include "remote/transfer.hpp"

#include <chrono>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>

#include "base/mutex.hpp"
#include "base/try.hpp"
#include "store/exec_key.hpp"
#include "store/exec_manifest_file.hpp"
#include "store/key.hpp"

namespace opcache::remote {

namespace {

using Clock = std::chrono::steady_clock;

// Calls `work` with each index below `count` on up to `parallelism` threads;
// stops starting new ones once `cancel` is set. False when it was set.
bool run_parallel(std::size_t count, int parallelism, const std::atomic<bool>* cancel,
                  const std::function<void(std::size_t)>& work) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> cancelled{false};
  auto worker = [&] {
    for (;;) {
      if (cancel != nullptr && cancel->load()) {
        cancelled = true;
        return;
      }
      const std::size_t index = next.fetch_add(1);
      if (index >= count) {
        return;
      }
      work(index);
    }
  };
  std::vector<std::thread> threads;
  const int threads_wanted = std::max(1, std::min<int>(parallelism, static_cast<int>(count)));
  for (int i = 0; i < threads_wanted; ++i) {
    threads.emplace_back(worker);
  }
  for (auto& thread : threads) {
    thread.join();
  }
  return !cancelled;
}

// Runs `transfer` on every item with `parallelism` threads, collecting the
// summary and reporting progress.
class TransferRun {
 public:
  TransferRun(TransferSummary& summary, const TransferRequest& request, std::int64_t total)
      : m_summary(summary), m_request(request), m_total(total) {}

  void run(const std::vector<std::string>& items, int parallelism,
           const std::function<Result<std::int64_t>(const std::string&)>& transfer) {
    const bool finished = run_parallel(items.size(), parallelism, m_request.cancel, [&](std::size_t index) {
      finish(items[index], transfer(items[index]));
    });
    if (!finished) {
      base::MutexLock lock(m_mutex);
      m_summary.interrupted = true;
    }
  }

  /// The keys transferred so far, in the order they finished.
  std::vector<std::string> transferred_keys() {
    base::MutexLock lock(m_mutex);
    return m_transferred;
  }

  double seconds() const { return std::chrono::duration<double>(Clock::now() - m_start).count(); }

  /// Counts the transfer of `key`: its bytes, or why it failed; reports progress.
  void finish(const std::string& key, const Result<std::int64_t>& bytes) {
    TransferProgress progress;
    {
      base::MutexLock lock(m_mutex);
      if (bytes) {
        ++m_summary.transferred;
        m_summary.bytes += *bytes;
        m_transferred.push_back(key);
      } else if (bytes.error().code() == ErrorCode::untrusted) {
        ++m_summary.refused;  // reported by LocalStore::adopt
        record_failure(key, bytes.error());
      } else {
        ++m_summary.failed;
        record_failure(key, bytes.error());
      }
      progress.total = m_total;
      progress.done = m_summary.transferred + m_summary.failed + m_summary.refused;
      progress.bytes = m_summary.bytes;
      progress.seconds = seconds();
    }
    if (m_request.progress) {
      m_request.progress(progress);
    }
  }

 private:

  // Keeps the first 100 failures' reasons; call with m_mutex held.
  void record_failure(const std::string& key, const Error& error) REQUIRES(m_mutex) {
    if (m_summary.failures.size() < 100) {
      m_summary.failures.push_back({key, error.message()});
    }
  }

  base::Mutex m_mutex;
  TransferSummary& m_summary GUARDED_BY(m_mutex);
  std::vector<std::string> m_transferred GUARDED_BY(m_mutex);
  const TransferRequest& m_request;
  std::int64_t m_total;
  Clock::time_point m_start = Clock::now();
};

Result<std::vector<std::string>> local_keys(store::LocalStore& local, const TransferRequest& request) {
  if (!request.keys.empty()) {
    return request.keys;
  }
  OPCACHE_TRY_ASSIGN(auto entries, local.list(request.filter));
  std::vector<std::string> keys;
  for (const auto& entry : entries) {
    keys.push_back(entry.key);
  }
  return keys;
}

// Checks every key and drops repeats (a model's op list names one kernel
// many times), keeping the first occurrence's place: a key is requested,
// counted and transferred once.
Result<std::vector<std::string>> unique_keys(const std::vector<std::string>& keys) {
  std::vector<std::string> unique;
  std::unordered_set<std::string> seen;
  for (const auto& key : keys) {
    OPCACHE_TRY(store::check_key(key));
    if (seen.insert(key).second) {
      unique.push_back(key);
    }
  }
  return unique;
}

// push --add-signatures: the signatures of local entries that the remote
// already has. A failure is counted and reported like a failed upload.
Status send_signatures(store::LocalStore& local, const Remote& remote, const std::vector<std::string>& keys,
                       TransferSummary& summary) {
  for (const auto& key : keys) {
    OPCACHE_TRY_ASSIGN(auto entry, local.find(key));
    if (!entry || entry->signatures.empty()) {
      continue;
    }
    auto sent = remote.store->add_signatures(key, entry->signatures);
    if (sent) {
      ++summary.signatures_sent;
      continue;
    }
    ++summary.failed;
    if (summary.failures.size() < 100) {
      summary.failures.push_back({key, "signatures not added: " + sent.error().message()});
    }
  }
  return {};
}

// Why a key listed or queried on the remote could not be pulled after all.
Error absent_error(const std::string& key, Fetched found) {
  return Error::not_found(found == Fetched::revoked ? "the remote revoked " + key + " meanwhile"
                                                    : "the remote no longer has " + key);
}

// What a pulled bundle that failed verification or storing reports; a
// corrupt one is counted.
Error pulled_error(store::LocalStore& local, const Error& error) {
  if (error.code() == ErrorCode::corrupt) {
    (void)local.record_counter("remote_corrupt", 1);
    return Error::corrupt("failed verification, not stored: " + error.message());
  }
  return error;
}

// Verifies and stores a pulled bundle; its bytes.
Result<std::int64_t> adopt_pulled(store::LocalStore& local, const std::string& key, base::AtomicFile file,
                                  const store::Provenance& provenance) {
  // Not fsynced: a pulled entry is a copy of the remote's (docs/remotes.md).
  auto adopted =
      local.adopt(std::move(file), key, ReplacePolicy::keep_existing, base::Durability::deferred, provenance);
  if (!adopted) {
    return pulled_error(local, adopted.error());
  }
  return adopted->bundle_bytes;
}

// Stores the bundles of a batch fetch as they arrive, counting each in the
// run: each is verified at once, and stored with k_adopt_batch others in one
// index transaction (LocalStore::adopt_batch); flush() stores the rest.
class PullReceiver final : public BatchReceiver {
 public:
  static constexpr std::size_t k_adopt_batch = 64;

  PullReceiver(store::LocalStore& local, const Remote& remote, const TransferRequest& request, TransferRun& run)
      : m_local(local), m_remote(remote), m_request(request), m_run(run) {}

  Result<base::AtomicFile> create_file() override { return m_local.create_temp(); }

  void received(const std::string& key, base::AtomicFile file, store::Signatures signatures) override {
    // Not fsynced: a pulled entry is a copy of the remote's (docs/remotes.md).
    store::Provenance provenance{true, m_remote.store->name(), std::move(signatures)};
    auto verified =
        m_local.verify_for_adoption(std::move(file), key, base::Durability::deferred, std::move(provenance));
    if (!verified) {
      m_run.finish(key, pulled_error(m_local, verified.error()));
      return;
    }
    m_waiting.push_back(std::move(*verified));
    if (m_waiting.size() >= k_adopt_batch) {
      flush();
    }
  }

  void absent(const std::string& key, Fetched why) override { m_run.finish(key, absent_error(key, why)); }

  bool stopping() const override { return m_request.cancel != nullptr && m_request.cancel->load(); }

  /// Stores the verified bundles still waiting.
  void flush() {
    if (m_waiting.empty()) {
      return;
    }
    std::vector<std::string> keys;
    for (const auto& bundle : m_waiting) {
      keys.push_back(bundle.manifest.key);
    }
    auto outcomes = m_local.adopt_batch(std::exchange(m_waiting, {}), ReplacePolicy::keep_existing,
                                        base::Durability::deferred);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      m_run.finish(keys[i], outcomes[i] ? Result<std::int64_t>(outcomes[i]->bundle_bytes)
                                        : Result<std::int64_t>(pulled_error(m_local, outcomes[i].error())));
    }
  }

 private:
  store::LocalStore& m_local;
  const Remote& m_remote;
  const TransferRequest& m_request;
  TransferRun& m_run;
  std::vector<store::VerifiedBundle> m_waiting;  // verified, not yet stored
};

int parallelism_of(const Remote& remote, const TransferRequest& request) {
  return request.parallelism > 0 ? request.parallelism : remote.options.parallelism;
}

// The distinct command keys (store/exec_key.hpp) of the entries of `keys`
// that `opcache exec` stored, in the order of their first entry; read from
// each entry's bundle manifest (its header only). An entry that cannot be
// read names none.
std::vector<std::string> exec_command_keys(store::LocalStore& local, const std::vector<std::string>& keys,
                                           int parallelism, const std::atomic<bool>* cancel) {
  std::vector<std::optional<std::string>> of_entry(keys.size());
  run_parallel(keys.size(), parallelism, cancel, [&](std::size_t index) {
    auto manifest = local.read_manifest(keys[index]);
    if (manifest && *manifest) {
      of_entry[index] = store::exec_command_key_of((*manifest)->descriptor, (*manifest)->scenario);
    }
  });
  std::vector<std::string> command_keys;
  std::unordered_set<std::string> seen;
  for (auto& command_key : of_entry) {
    if (command_key && seen.insert(*command_key).second) {
      command_keys.push_back(std::move(*command_key));
    }
  }
  return command_keys;
}

// Counts the exec manifests of a push or a pull into its summary, from the
// threads that move them.
class ManifestTally {
 public:
  explicit ManifestTally(TransferSummary& summary) : m_summary(summary) {}

  /// Counts the manifest of `command_key` as moved, or as failed with `outcome`'s reason after `what`.
  void count(const std::string& command_key, const Status& outcome, const std::string& what) {
    base::MutexLock lock(m_mutex);
    if (outcome) {
      ++m_summary.manifests;
      return;
    }
    ++m_summary.failed;
    if (m_summary.failures.size() < 100) {
      m_summary.failures.push_back({command_key, what + ": " + outcome.error().message()});
    }
  }

 private:
  base::Mutex m_mutex;
  TransferSummary& m_summary GUARDED_BY(m_mutex);
};

// push: sends the local exec manifest of each command key to the remote,
// which merges it into its own. A local manifest that cannot be read is
// reported and skipped (the next build rewrites it).
void push_exec_manifests(store::LocalStore& local, const Remote& remote, const std::vector<std::string>& command_keys,
                         const TransferRequest& request, TransferSummary& summary) {
  ManifestTally tally(summary);
  run_parallel(command_keys.size(), parallelism_of(remote, request), request.cancel, [&](std::size_t index) {
    const auto& command_key = command_keys[index];
    auto manifest = store::read_exec_manifest(local.layout(), command_key);
    if (!manifest) {
      local.options().warn("exec manifest " + command_key + " not pushed: " + manifest.error().message());
      return;
    }
    if (*manifest) {
      tally.count(command_key, remote.store->store_exec_manifest(**manifest), "exec manifest not sent");
    }
  });
}

// `text`, the remote's answer for the exec manifest of `command_key`,
// merged into the local one; false when the remote has none, or sent one
// that is not valid (reported).
Result<bool> merge_pulled_manifest(store::LocalStore& local, const Remote& remote, const std::string& command_key,
                                   Result<std::optional<std::string>> text) {
  const std::string origin = "the exec manifest of " + command_key + " from remote " + remote.store->name();
  if (!text && text.error().code() != ErrorCode::corrupt) {
    return text.error();
  }
  if (text && !*text) {
    return false;
  }
  auto parsed = text ? store::parse_exec_manifest(**text, origin) : Result<store::ExecManifest>(text.error());
  if (parsed && parsed->command_key != command_key) {
    parsed = Error::corrupt(origin + " is the manifest of " + parsed->command_key);
  }
  if (!parsed) {
    local.options().warn("ignored " + origin + ": " + parsed.error().message());
    return false;
  }
  OPCACHE_TRY(store::merge_into_exec_manifest(local.layout(), *parsed));
  return true;
}

// pull: merges the remote's exec manifest of each command key into the local
// one: in batches where the remote has them, the rest one request each.
void pull_exec_manifests(store::LocalStore& local, const Remote& remote, const std::vector<std::string>& command_keys,
                         const TransferRequest& request, TransferSummary& summary) {
  ManifestTally tally(summary);
  auto count = [&](const std::string& command_key, const Result<bool>& pulled) {
    if (!pulled || *pulled) {
      tally.count(command_key, pulled ? Status{} : Status(pulled.error()), "exec manifest not pulled");
    }
  };
  const auto singles = remote.store->fetch_exec_manifest_batch(
      command_keys, [&](const std::string& command_key, std::string text) {
        count(command_key, merge_pulled_manifest(local, remote, command_key, std::optional<std::string>(std::move(text))));
      });
  run_parallel(singles.size(), parallelism_of(remote, request), request.cancel, [&](std::size_t index) {
    const auto& command_key = singles[index];
    count(command_key, merge_pulled_manifest(local, remote, command_key, remote.store->fetch_exec_manifest(command_key)));
  });
}

}  // namespace

Result<TransferSummary> push(store::LocalStore& local, const Remote& remote, const TransferRequest& request) {
  if (auto writable = remote.store->writable(); !writable) {
    return Error::usage(writable.error().message() + " (" + remote.options.source + ")");
  }
  const auto started = Clock::now();
  TransferSummary summary;
  summary.remote = remote.store->name();
  OPCACHE_TRY_ASSIGN(auto listed, local_keys(local, request));
  OPCACHE_TRY_ASSIGN(auto keys, unique_keys(listed));
  summary.requested = static_cast<std::int64_t>(keys.size());
  OPCACHE_TRY_ASSIGN(auto present, remote.store->query(keys));
  std::vector<std::string> missing;
  std::vector<std::string> present_keys;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (present[i]) {
      ++summary.skipped;
      present_keys.push_back(keys[i]);
    } else {
      missing.push_back(keys[i]);
    }
  }
  if (request.add_signatures) {
    OPCACHE_TRY(send_signatures(local, remote, present_keys, summary));
  }
  TransferRun run(summary, request, static_cast<std::int64_t>(missing.size()));
  run.run(missing, parallelism_of(remote, request), [&](const std::string& key) -> Result<std::int64_t> {
    OPCACHE_TRY_ASSIGN(auto entry, local.find(key));
    if (!entry) {
      return Error::not_found("no local entry for " + key);
    }
    OPCACHE_TRY(remote.store->upload(key, local.layout().object_path(entry->digest), entry->signatures));
    return entry->bundle_size;
  });
  // The manifests after the entries they list, so the remote never names
  // builds whose entries it lacks for longer than the push takes.
  auto sent = run.transferred_keys();
  sent.insert(sent.end(), present_keys.begin(), present_keys.end());
  const auto command_keys = exec_command_keys(local, sent, parallelism_of(remote, request), request.cancel);
  push_exec_manifests(local, remote, command_keys, request, summary);
  summary.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return summary;
}

Result<TransferSummary> pull(store::LocalStore& local, const Remote& remote, const TransferRequest& request) {
  const auto started = Clock::now();
  TransferSummary summary;
  summary.remote = remote.store->name();
  std::vector<std::string> listed = request.keys;
  const bool from_listing = listed.empty() || request.keys_from_listing;
  if (listed.empty()) {
    OPCACHE_TRY_ASSIGN(listed, remote.store->list_keys(request.filter));
  }
  OPCACHE_TRY_ASSIGN(auto keys, unique_keys(listed));
  summary.requested = static_cast<std::int64_t>(keys.size());
  std::vector<std::string> wanted;
  for (const auto& key : keys) {
    OPCACHE_TRY_ASSIGN(bool here, local.contains(key));
    OPCACHE_TRY_ASSIGN(auto revoked_here, local.revocation(key));
    if (here || revoked_here) {
      ++summary.skipped;  // present, or revoked in this store (`opcache revoke --local`)
    } else {
      wanted.push_back(key);
    }
  }
  // Listed keys are on the remote; explicit ones are asked about in one query.
  std::vector<std::string> fetchable = from_listing ? wanted : std::vector<std::string>{};
  if (!from_listing) {
    OPCACHE_TRY_ASSIGN(auto present, remote.store->query(wanted));
    for (std::size_t i = 0; i < wanted.size(); ++i) {
      if (present[i]) {
        fetchable.push_back(wanted[i]);
      } else {
        ++summary.skipped;  // the remote does not have it either
      }
    }
  }
  TransferRun run(summary, request, static_cast<std::int64_t>(fetchable.size()));
  // In as few requests as the remote allows; what it did not answer, one at a time.
  PullReceiver receiver(local, remote, request, run);
  const auto singles = remote.store->fetch_batch(fetchable, receiver);
  receiver.flush();
  run.run(singles, parallelism_of(remote, request), [&](const std::string& key) -> Result<std::int64_t> {
    OPCACHE_TRY_ASSIGN(auto file, local.create_temp());
    store::Provenance provenance{true, remote.store->name(), {}};
    OPCACHE_TRY_ASSIGN(auto found, remote.store->fetch(key, file.fd(), &provenance.signatures, LookupHint{}));
    if (found != Fetched::hit) {
      return absent_error(key, found);
    }
    return adopt_pulled(local, key, std::move(file), provenance);
  });
  const auto command_keys =
      exec_command_keys(local, run.transferred_keys(), parallelism_of(remote, request), request.cancel);
  pull_exec_manifests(local, remote, command_keys, request, summary);
  summary.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return summary;
}

}  // namespace opcache::remote
