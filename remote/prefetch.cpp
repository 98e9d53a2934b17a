#include "remote/prefetch.hpp"

#include <filesystem>
#include <string>

#include "base/file_io.hpp"
#include "base/lock_file.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"
#include "remote/transfer.hpp"

namespace opcache::remote {

namespace {

namespace fs = std::filesystem;

// <cache>/remotes/prefetch-<16 hex of sha256(remote, scenario)>
fs::path marker_path(const store::LocalStore& local, const Remote& remote, const ListFilter& scenario) {
  const std::string identity = remote.store->name() + '\n' + scenario.device_mode + '\n' + scenario.phase + '\n' +
                               scenario.toolchain + '\n' + scenario.soc;
  return local.layout().root() / "remotes" / ("prefetch-" + base::sha256_hex(identity).substr(0, 16));
}

bool is_fresh(const fs::path& marker) {
  std::error_code error;
  const auto written = fs::last_write_time(marker, error);
  return !error && fs::file_time_type::clock::now() - written < k_prefetch_interval;
}

// Under the lock: list, pull when small enough, then mark the scenario done
// (also when it was too large, so the listing is not repeated every miss).
// Whether it pulled anything.
Result<bool> prefetch_locked(store::LocalStore& local, const Remote& remote, ListFilter filter,
                             const fs::path& marker) {
  filter.op_type.clear();
  filter.limit = remote.options.prefetch + 1;
  OPCACHE_TRY_ASSIGN(auto keys, remote.store->list_keys(filter));
  bool pulled = false;
  if (static_cast<std::int64_t>(keys.size()) <= remote.options.prefetch && !keys.empty()) {
    TransferRequest request;
    request.keys = std::move(keys);
    request.keys_from_listing = true;
    OPCACHE_TRY_ASSIGN(auto summary, pull(local, remote, request));
    (void)local.record_counter("remote_prefetched", summary.transferred);
    pulled = summary.transferred > 0 || summary.manifests > 0;
    if (summary.failed > 0) {
      local.options().warn("prefetch from remote " + remote.store->name() + ": " + std::to_string(summary.failed) +
                           " of " + std::to_string(summary.requested) + " entries failed");
    }
  }
  OPCACHE_TRY(base::write_file_atomic(marker, ""));
  return pulled;
}

}  // namespace

bool prefetch_scenario(store::LocalStore& local, const Remote& remote, const ListFilter& scenario) {
  if (remote.options.prefetch <= 0 || !remote.store->lists_by_scenario()) {
    return false;
  }
  const fs::path marker = marker_path(local, remote, scenario);
  if (is_fresh(marker)) {
    return false;
  }
  auto pulled = [&]() -> Result<bool> {
    OPCACHE_TRY(local.layout().ensure_directory(marker.parent_path()));
    OPCACHE_TRY_ASSIGN(auto lock, base::LockFile::try_acquire(fs::path(marker.string() + ".lock")));
    if (!lock || is_fresh(marker)) {
      // Another process is prefetching the scenario: this lookup fetches its
      // one key meanwhile instead of idling until that ends. Or one just did.
      return false;
    }
    return prefetch_locked(local, remote, scenario, marker);
  }();
  if (!pulled) {
    local.options().warn("prefetch from remote " + remote.store->name() + " skipped: " + pulled.error().message());
    return false;
  }
  return *pulled;
}

}  // namespace opcache::remote
