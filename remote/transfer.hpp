// opcache push / pull: one batch query to learn what the other side lacks,
// then parallel transfers over reused connections. Pulled bundles are
// verified before they become visible locally; nothing is half-written if
// the process is interrupted (temp files in tmp/ are discarded).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "opcache/types.hpp"
#include "remote/remote_set.hpp"

namespace opcache::remote {

struct TransferRequest {
  std::vector<std::string> keys;  ///< explicit keys; empty means every entry matching `filter`
  bool keys_from_listing = false; ///< `keys` came from the remote's listing: pull asks no presence query
  ListFilter filter;              ///< used when `keys` is empty
  int parallelism = 0;            ///< 0: the remote's `parallelism` attribute
  std::function<void(const TransferProgress&)> progress;  ///< called from worker threads
  const std::atomic<bool>* cancel = nullptr;               ///< set to stop starting new transfers
  bool add_signatures = false;  ///< push: send the signatures of signed entries the remote already has
};

/// Uploads local entries the remote lacks. A read-only remote is a `usage` error.
Result<TransferSummary> push(store::LocalStore& local, const Remote& remote, const TransferRequest& request);

/// Downloads remote entries the local store lacks, verifying each.
Result<TransferSummary> pull(store::LocalStore& local, const Remote& remote, const TransferRequest& request);

}  // namespace opcache::remote
