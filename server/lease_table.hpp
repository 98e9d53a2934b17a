// Build leases of `opcache serve` (docs/protocol.md "Build leases"): which
// client is building which key right now, so that the machines of a team
// compile each kernel once. Leases live in this process's memory only: the
// book of a server over local storage, or over a bucket that refuses
// conditional writes (docs/operations.md "Replicas"); nothing here knows HTTP.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "base/mutex.hpp"
#include "server/lease_book.hpp"

namespace opcache::server {

/// The leases of one server, by cache key. Thread-safe (one mutex); expiry
/// is judged lazily, on each call, against `now`.
class LeaseTable {
 public:
  using Clock = std::chrono::steady_clock;

  /// A table reading time from `now` (tests pass their own clock).
  explicit LeaseTable(std::function<Clock::time_point()> now = Clock::now);

  /// Grants the lease on `key` to `holder` for `ttl` when nobody holds a live
  /// one (an expired lease is counted and replaced); else answers with the
  /// live lease, unchanged. A retried request, one whose non-empty `request`
  /// id is the live lease's, is granted that lease again (extended to now +
  /// `ttl`, counted once): a client whose 201 was lost is not refused its
  /// own lease.
  LeaseAnswer acquire(const std::string& key, const std::string& holder, const std::string& request,
                      std::chrono::seconds ttl);

  /// Extends the live lease `id` on `key` to now + `ttl`; std::nullopt when
  /// `id` is not the live lease of `key` (expired, released, taken over).
  std::optional<Lease> renew(const std::string& key, const std::string& id, std::chrono::seconds ttl);

  /// Ends the live lease `id` on `key`; false when it is not the live lease.
  bool release(const std::string& key, const std::string& id);

  /// Takes back the lease `id` on `key` that acquire() has just granted (it
  /// turned out not to be needed): it counts neither as granted nor as
  /// released. False when `id` is not the live lease of `key`.
  bool withdraw(const std::string& key, const std::string& id);

  /// Ends whatever lease `key` has: its entry was just stored. Returns
  /// whether there was a live one.
  bool release_key(const std::string& key);

  /// The live lease on `key`, or std::nullopt.
  std::optional<Lease> live(const std::string& key);

  /// The counts now (expired leases are counted first).
  LeaseCounts counts();

 private:
  // Drops `key`'s lease when it has expired (counting it); true when a live one remains.
  bool live_locked(const std::string& key, Clock::time_point now) REQUIRES(m_mutex);
  void expire_all_locked(Clock::time_point now) REQUIRES(m_mutex);
  // Erases the live lease `id` of `key`; false when `id` is not it.
  bool erase_locked(const std::string& key, const std::string& id) REQUIRES(m_mutex);

  std::function<Clock::time_point()> m_now;
  base::Mutex m_mutex;
  std::map<std::string, Lease> m_leases GUARDED_BY(m_mutex);
  LeaseCounts m_counts GUARDED_BY(m_mutex);
};

/// The LeaseBook of one process: a LeaseTable behind the interface.
class MemoryLeaseBook final : public LeaseBook {
 public:
  /// A book reading time from `now` (tests pass their own clock).
  explicit MemoryLeaseBook(std::function<LeaseTable::Clock::time_point()> now = LeaseTable::Clock::now);

  std::string kind() const override { return "memory"; }
  Result<LeaseAnswer> acquire(const std::string& key, const std::string& holder, const std::string& request,
                              std::chrono::seconds ttl) override;
  Result<std::optional<Lease>> renew(const std::string& key, const std::string& id, std::chrono::seconds ttl) override;
  Result<bool> release(const std::string& key, const std::string& id) override;
  Result<bool> withdraw(const std::string& key, const std::string& id) override;
  Status release_key(const std::string& key) override;
  Result<std::optional<Lease>> live(const std::string& key) override;
  bool is_local() const override { return true; }
  LeaseCounts counts() override;

 private:
  LeaseTable m_table;
};

}  // namespace opcache::server
