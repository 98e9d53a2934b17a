#include "server/lease_table.hpp"

#include "base/random_token.hpp"

namespace opcache::server {

namespace {

// 128 random bits: a lease id names the right to renew and release, so it
// must not be guessable.
std::string new_lease_id() { return base::random_hex(16); }

}  // namespace

LeaseTable::LeaseTable(std::function<Clock::time_point()> now) : m_now(std::move(now)) {}

bool LeaseTable::live_locked(const std::string& key, Clock::time_point now) {
  auto it = m_leases.find(key);
  if (it == m_leases.end()) {
    return false;
  }
  if (it->second.expires > now) {
    return true;
  }
  m_leases.erase(it);
  ++m_counts.expired;
  return false;
}

void LeaseTable::expire_all_locked(Clock::time_point now) {
  for (auto it = m_leases.begin(); it != m_leases.end();) {
    if (it->second.expires > now) {
      ++it;
      continue;
    }
    it = m_leases.erase(it);
    ++m_counts.expired;
  }
}

LeaseAnswer LeaseTable::acquire(const std::string& key, const std::string& holder, const std::string& request,
                                std::chrono::seconds ttl) {
  base::MutexLock lock(m_mutex);
  const auto now = m_now();
  if (live_locked(key, now)) {
    auto& live = m_leases[key];
    if (!request.empty() && live.request == request) {
      live.expires = now + ttl;  // the same request again: its answer was lost on the way
      return {true, live};
    }
    ++m_counts.refused;
    return {false, live};
  }
  Lease lease{new_lease_id(), holder, request, now, now + ttl};
  m_leases[key] = lease;
  ++m_counts.granted;
  return {true, std::move(lease)};
}

std::optional<Lease> LeaseTable::renew(const std::string& key, const std::string& id, std::chrono::seconds ttl) {
  base::MutexLock lock(m_mutex);
  const auto now = m_now();
  if (!live_locked(key, now) || m_leases[key].id != id) {
    return std::nullopt;
  }
  auto& lease = m_leases[key];
  lease.expires = now + ttl;
  return lease;
}

bool LeaseTable::erase_locked(const std::string& key, const std::string& id) {
  if (!live_locked(key, m_now()) || m_leases[key].id != id) {
    return false;
  }
  m_leases.erase(key);
  return true;
}

bool LeaseTable::release(const std::string& key, const std::string& id) {
  base::MutexLock lock(m_mutex);
  const bool released = erase_locked(key, id);
  m_counts.released += released ? 1 : 0;
  return released;
}

bool LeaseTable::withdraw(const std::string& key, const std::string& id) {
  base::MutexLock lock(m_mutex);
  const bool withdrawn = erase_locked(key, id);
  m_counts.granted -= withdrawn ? 1 : 0;
  return withdrawn;
}

bool LeaseTable::release_key(const std::string& key) {
  base::MutexLock lock(m_mutex);
  if (!live_locked(key, m_now())) {
    return false;
  }
  m_leases.erase(key);
  ++m_counts.released;
  return true;
}

std::optional<Lease> LeaseTable::live(const std::string& key) {
  base::MutexLock lock(m_mutex);
  if (!live_locked(key, m_now())) {
    return std::nullopt;
  }
  return m_leases[key];
}

LeaseCounts LeaseTable::counts() {
  base::MutexLock lock(m_mutex);
  expire_all_locked(m_now());
  LeaseCounts counts = m_counts;
  counts.active = m_leases.size();
  return counts;
}

MemoryLeaseBook::MemoryLeaseBook(std::function<LeaseTable::Clock::time_point()> now) : m_table(std::move(now)) {}

Result<LeaseAnswer> MemoryLeaseBook::acquire(const std::string& key, const std::string& holder,
                                             const std::string& request, std::chrono::seconds ttl) {
  return m_table.acquire(key, holder, request, ttl);
}

Result<std::optional<Lease>> MemoryLeaseBook::renew(const std::string& key, const std::string& id,
                                                    std::chrono::seconds ttl) {
  return m_table.renew(key, id, ttl);
}

Result<bool> MemoryLeaseBook::release(const std::string& key, const std::string& id) {
  return m_table.release(key, id);
}

Result<bool> MemoryLeaseBook::withdraw(const std::string& key, const std::string& id) {
  return m_table.withdraw(key, id);
}

Status MemoryLeaseBook::release_key(const std::string& key) {
  m_table.release_key(key);
  return {};
}

Result<std::optional<Lease>> MemoryLeaseBook::live(const std::string& key) { return m_table.live(key); }

LeaseCounts MemoryLeaseBook::counts() { return m_table.counts(); }

}  // namespace opcache::server
