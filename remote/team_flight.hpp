// Single flight across machines (docs/remotes.md "Team single flight"): after
// a miss everywhere, a process asks the team server for the build lease on
// the key. With it, it builds, uploads at once and so releases it; without
// it, it waits for the entry the holder is building (GET ?wait=, no tight
// polling) and takes it as a remote hit, or takes the lease over when the
// holder's runs out. Whatever goes wrong with the server, it builds at once:
// a dead or slow server never stops a compile.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "opcache/result.hpp"
#include "remote/remote_set.hpp"
#include "store/local_store.hpp"

namespace opcache::remote {

/// How one key went.
enum class TeamOutcome {
  fetched,             ///< another machine built it; it is in the local store now
  built_and_uploaded,  ///< this process held the lease, built, stored and uploaded it
  built,               ///< built here without the lease's upload (no server, an error, waited too long)
};

struct TeamFlightOptions {
  std::string holder;                                    ///< "host:pid", shown to the machines that wait
  std::chrono::seconds max_wait{3600};                   ///< the longest this process waits for others (wait_timeout)
  std::chrono::seconds wait_step{20};                    ///< one GET ?wait= request at most
};

/// One process's side of team single flight through `remote` (an http(s)
/// remote with build leases). Counts in the local store's counters:
/// team_builds (built holding the lease), team_takeovers (of those, after
/// another holder's lease ended), team_waits (entries received from another
/// machine's build) and team_wait_ms. Thread-safe for distinct keys.
class TeamFlight {
 public:
  TeamFlight(Remote remote, store::LocalStore& local, TeamFlightOptions options);

  /// The server (display URL) this flight goes through.
  std::string server() const { return m_remote.store->name(); }
  /// The remote this flight goes through.
  const Remote& remote() const noexcept { return m_remote; }

  /// Runs under the local single-flight lock of `key`, after the local store
  /// and every remote missed. `fetch` takes the entry from the remotes into
  /// the local store (true when it did); `build` builds the key and stores it
  /// locally (only). Errors are `build`'s; a failing server is reported as a
  /// warning and the key built here. The lease requests and waits carry
  /// `hint` (what the key is, for the server's statistics). `publish`, when
  /// given, replaces the upload of `key` after a build holding the lease
  /// (exec leases its command key and uploads the entry of what the command
  /// read, and its manifest); the lease is then released explicitly. A
  /// process that waited and is then granted the lease (the holder released
  /// it without uploading `key`) tries `fetch` once more before it builds.
  Result<TeamOutcome> run(const std::string& key, const LookupHint& hint, const std::function<Result<bool>()>& fetch,
                          const std::function<Status()>& build, const std::function<Status()>& publish = {});

  /// Uploads the local entry of `key` (its object and signatures) to this
  /// flight's server. `not_found` when the local store lacks it.
  Status upload_entry(const std::string& key);

 private:
  Result<TeamOutcome> build_holding(const std::string& key, const LeaseGrant& grant, bool takeover,
                                    const std::function<Status()>& build, const std::function<Status()>& publish);
  Result<TeamOutcome> build_alone(const std::function<Status()>& build);
  // Reports a server failure, opens the breaker for every process of this cache.
  // `then` says what happens instead ("building here").
  void server_failed(const std::string& doing, const Error& error, const std::string& then = "building here");

  Remote m_remote;
  BuildLeases& m_leases;
  store::LocalStore& m_local;
  TeamFlightOptions m_options;
  std::atomic<bool> m_without_leases{false};  // the server has none (said once, then every key builds here)
};

}  // namespace opcache::remote
