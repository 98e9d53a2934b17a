// Where the build leases of `opcache serve` live (docs/protocol.md "Build
// leases"): one process's memory (server/lease_table, one replica) or the
// bucket every replica over one s3:// storage shares (server/bucket_leases).
// The API (server/api_leases.cpp) and the waiting requests
// (server/entry_wait.cpp) only talk to this interface; nothing here knows
// HTTP.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "opcache/result.hpp"

namespace opcache::server {

/// A lease that is held: by whom, since when, until when.
struct Lease {
  std::string id;      ///< random, unguessable; names the lease in renew and release
  std::string holder;  ///< who builds ("host:pid" as the client said, or its token's name)
  std::string request;  ///< the asker's random request id ("" when it sent none): a retry with it gets this lease back
  std::chrono::steady_clock::time_point granted;
  std::chrono::steady_clock::time_point expires;
};

/// What asking for a lease gave.
struct LeaseAnswer {
  bool granted = false;  ///< true: `lease` is the caller's; false: `lease` is the current holder's
  Lease lease;
};

/// Counts since start-up, for /metrics and /v1/status (this process's own
/// asks, also when the leases live in a shared bucket).
struct LeaseCounts {
  std::uint64_t granted = 0;   ///< leases handed out (takeovers of expired ones included)
  std::uint64_t refused = 0;   ///< asks answered with the current holder (409)
  std::uint64_t expired = 0;   ///< leases that ran out without renewal, release or upload
  std::uint64_t released = 0;  ///< leases ended by DELETE or by the upload of their entry
  std::uint64_t active = 0;    ///< leases held now (in a bucket: granted here and not known to have ended)
};

/// The build leases, by cache key. Implementations are thread-safe. Errors
/// are the storage's (a bucket that cannot be reached); the memory book
/// never fails.
class LeaseBook {
 public:
  virtual ~LeaseBook() = default;

  /// "memory" or "bucket", for /v1/status and the start-up log.
  virtual std::string kind() const = 0;

  /// Grants the lease on `key` to `holder` for `ttl` when nobody holds a live
  /// one (an expired lease is counted and taken over); else answers with
  /// the live lease, unchanged. A retried request, one whose non-empty
  /// `request` id is the live lease's, is granted that lease again
  /// (extended to now + `ttl`): a client whose 201 was lost is not refused
  /// its own lease.
  virtual Result<LeaseAnswer> acquire(const std::string& key, const std::string& holder, const std::string& request,
                                      std::chrono::seconds ttl) = 0;

  /// Extends the live lease `id` on `key` to now + `ttl`; std::nullopt when
  /// `id` is not the live lease of `key` (expired, released, taken over).
  virtual Result<std::optional<Lease>> renew(const std::string& key, const std::string& id,
                                             std::chrono::seconds ttl) = 0;

  /// Ends the live lease `id` on `key`; false when it is not the live lease.
  virtual Result<bool> release(const std::string& key, const std::string& id) = 0;

  /// Takes back the lease `id` on `key` that acquire() has just granted (it
  /// turned out not to be needed): it counts neither as granted nor as
  /// released. False when `id` is not the live lease of `key`.
  virtual Result<bool> withdraw(const std::string& key, const std::string& id) = 0;

  /// Ends whatever lease `key` has: its entry was just stored.
  virtual Status release_key(const std::string& key) = 0;

  /// The live lease on `key`, or std::nullopt.
  virtual Result<std::optional<Lease>> live(const std::string& key) = 0;

  /// True when live() reads only memory (cheap on an I/O thread); false
  /// when it asks the bucket.
  virtual bool is_local() const = 0;

  /// The counts now.
  virtual LeaseCounts counts() = 0;
};

}  // namespace opcache::server
