// The client side of build leases (docs/protocol.md "Build leases"): ask a
// team server for the right to build a key, renew and release it, and wait
// for an entry another machine is building. Implemented by the http(s)
// remote (RemoteStore::leases()); used by remote/team_flight.
#pragma once

#include <chrono>
#include <string>

#include "opcache/result.hpp"
#include "remote/lookup_headers.hpp"

namespace opcache::remote {

/// The server's answer to a lease request.
struct LeaseGrant {
  enum class Kind {
    granted,  ///< this client builds: `id` names the lease
    held,     ///< `holder` builds; its lease runs out in `expires_in` unless renewed
    present,  ///< the entry is stored already: fetch it
  };
  Kind kind = Kind::held;
  std::string id;
  std::string holder;
  std::chrono::milliseconds ttl{0};         ///< granted: renew well before this
  std::chrono::milliseconds expires_in{0};  ///< held
};

/// Build leases on one server. Thread-safe. Transport failures and
/// unexpected statuses are `remote` or `timeout` errors. The requests about
/// an entry carry the lookup's `hint` (remote/lookup_headers.hpp).
class BuildLeases {
 public:
  virtual ~BuildLeases() = default;

  /// POST /v1/leases/{key} naming `holder` ("host:pid"). `not_found` when
  /// the server has no build leases at all (older than API v1 revision 3).
  virtual Result<LeaseGrant> acquire_lease(const std::string& key, const std::string& holder,
                                           const LookupHint& hint) = 0;
  /// PUT /v1/leases/{key}/{id}: true when renewed, false when the lease is
  /// no longer this client's (it expired and another took it, or the entry
  /// was uploaded).
  virtual Result<bool> renew_lease(const std::string& key, const std::string& id) = 0;
  /// DELETE /v1/leases/{key}/{id}; a lease that is already gone is not an error.
  virtual Status release_lease(const std::string& key, const std::string& id) = 0;
  /// HEAD /v1/entries/{key}?wait=SECONDS: true when the entry is there
  /// (within `wait`), false when the wait ended without it (or the lease it
  /// waited behind ended). The request may take `wait` plus the remote's
  /// timeout.
  virtual Result<bool> wait_for_entry(const std::string& key, std::chrono::seconds wait, const LookupHint& hint) = 0;
};

}  // namespace opcache::remote
