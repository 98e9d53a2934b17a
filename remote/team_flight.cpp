#include "remote/team_flight.hpp"

#include <algorithm>
#include <thread>

#include "base/mutex.hpp"
#include "base/try.hpp"

namespace opcache::remote {

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t ms_since(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

// Renews a lease every third of its TTL on its own thread until stopped. A
// renewal the server refuses means the lease was lost (this process stalled
// longer than the TTL and another took over): it stops renewing; the build
// goes on, and its upload is harmless (the server keeps the first entry).
class LeaseRenewer {
 public:
  LeaseRenewer(BuildLeases& leases, std::string key, std::string id, std::chrono::milliseconds ttl)
      : m_thread([this, &leases, key = std::move(key), id = std::move(id), ttl] {
          renew(leases, key, id, std::max(ttl / 3, std::chrono::milliseconds(100)));
        }) {}
  ~LeaseRenewer() {
    {
      base::MutexLock lock(m_mutex);
      m_stopping = true;
    }
    m_stop.notify_all();
    m_thread.join();
  }
  LeaseRenewer(const LeaseRenewer&) = delete;
  LeaseRenewer& operator=(const LeaseRenewer&) = delete;

 private:
  // The thread: renews every `every` until stopped or the lease is lost.
  void renew(BuildLeases& leases, const std::string& key, const std::string& id, std::chrono::milliseconds every)
      EXCLUDES(m_mutex) {
    for (;;) {
      {
        base::MutexLock lock(m_mutex);
        const auto until = Clock::now() + every;
        while (!m_stopping && m_stop.wait_until(m_mutex, until)) {
        }
        if (m_stopping) {
          return;
        }
      }
      auto renewed = leases.renew_lease(key, id);
      if (renewed && !*renewed) {
        return;  // lost: nothing left to renew
      }
    }
  }

  base::Mutex m_mutex;
  base::CondVar m_stop;
  bool m_stopping GUARDED_BY(m_mutex) = false;
  std::thread m_thread;  // last: starts after the members it uses
};

}  // namespace

TeamFlight::TeamFlight(Remote remote, store::LocalStore& local, TeamFlightOptions options)
    : m_remote(std::move(remote)), m_leases(*m_remote.store->leases()), m_local(local), m_options(std::move(options)) {}

Result<TeamOutcome> TeamFlight::run(const std::string& key, const LookupHint& hint,
                                    const std::function<Result<bool>()>& fetch, const std::function<Status()>& build,
                                    const std::function<Status()>& publish) {
  if (m_without_leases || !m_remote.breaker->allows()) {
    return build_alone(build);
  }
  const auto started = Clock::now();
  bool waited = false;
  auto record_wait = [&] {
    if (waited) {
      (void)m_local.record_counter("team_wait_ms", ms_since(started));
    }
  };
  for (;;) {
    auto grant = m_leases.acquire_lease(key, m_options.holder, hint);
    if (!grant && grant.error().code() == ErrorCode::not_found) {
      if (!m_without_leases.exchange(true)) {
        m_local.options().warn(grant.error().message() + ": team single flight is off for this process; "
                               "each machine builds its own misses");
      }
      return build_alone(build);
    }
    if (!grant) {
      server_failed("asking for the build lease on " + key, grant.error());
      record_wait();
      return build_alone(build);
    }
    if (grant->kind == LeaseGrant::Kind::granted) {
      record_wait();
      if (waited) {
        // The holder may have published under other keys than `key` (exec) and released the lease.
        auto fetched = fetch();
        if (fetched && *fetched) {
          (void)m_leases.release_lease(key, grant->id);
          (void)m_local.record_counter("team_waits", 1);
          return TeamOutcome::fetched;
        }
      }
      return build_holding(key, *grant, waited, build, publish);
    }
    if (grant->kind == LeaseGrant::Kind::held) {
      const auto left = m_options.max_wait - std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started);
      if (left.count() <= 0) {
        m_local.options().warn("waited " + std::to_string(ms_since(started) / 1000) + " s for " + grant->holder +
                               " to build " + key + "; building it here");
        record_wait();
        return build_alone(build);
      }
      waited = true;
      // Until the holder's lease would run out (then ask again: take it over
      // or learn of the renewal), in steps of at most wait_step.
      const auto until_expiry = std::chrono::duration_cast<std::chrono::seconds>(grant->expires_in) + std::chrono::seconds(1);
      const auto step = std::max(std::chrono::seconds(1), std::min({m_options.wait_step, until_expiry, left}));
      auto arrived = m_leases.wait_for_entry(key, step, hint);
      if (!arrived) {
        server_failed("waiting for " + grant->holder + " to build " + key, arrived.error());
        record_wait();
        return build_alone(build);
      }
      if (!*arrived) {
        continue;  // the wait ended or the holder's lease did: ask again
      }
    }
    // The entry is on the server (present, or it arrived while we waited).
    auto fetched = fetch();
    record_wait();
    if (fetched && *fetched) {
      if (waited) {
        (void)m_local.record_counter("team_waits", 1);
      }
      return TeamOutcome::fetched;
    }
    return build_alone(build);
  }
}

Result<TeamOutcome> TeamFlight::build_holding(const std::string& key, const LeaseGrant& grant, bool takeover,
                                              const std::function<Status()>& build,
                                              const std::function<Status()>& publish) {
  Status built;
  {
    LeaseRenewer renewer(m_leases, key, grant.id, grant.ttl);
    built = build();
  }
  if (!built) {
    (void)m_leases.release_lease(key, grant.id);  // the waiters try themselves
    return built.error();
  }
  (void)m_local.record_counter("team_builds", 1);
  if (takeover) {
    (void)m_local.record_counter("team_takeovers", 1);
  }
  if (auto uploaded = publish ? publish() : upload_entry(key); !uploaded) {
    server_failed("uploading " + key, uploaded.error(), "it is queued for upload like any new entry");
    (void)m_leases.release_lease(key, grant.id);
    return TeamOutcome::built;
  }
  if (publish) {
    (void)m_leases.release_lease(key, grant.id);  // what was uploaded is not `key`: its upload released nothing
  }
  return TeamOutcome::built_and_uploaded;  // the upload released the lease
}

Result<TeamOutcome> TeamFlight::build_alone(const std::function<Status()>& build) {
  OPCACHE_TRY(build());
  return TeamOutcome::built;
}

void TeamFlight::server_failed(const std::string& doing, const Error& error, const std::string& then) {
  if (error.code() == ErrorCode::remote || error.code() == ErrorCode::timeout) {
    m_remote.breaker->record_failure(error.message());
  }
  m_local.options().warn("team single flight through " + server() + " failed " + doing + ": " + error.message() +
                         "; " + then);
}

Status TeamFlight::upload_entry(const std::string& key) {
  OPCACHE_TRY_ASSIGN(auto entry, m_local.find(key));
  if (!entry) {
    return Error::not_found("the entry " + key + " just built is not in the local store");
  }
  return m_remote.store->upload(key, m_local.layout().object_path(entry->digest), entry->signatures);
}

}  // namespace opcache::remote
