// Prefetching a scenario: on a fresh machine the first local miss of a
// scenario usually means every kernel of the model will miss. Fetching them
// one process at a time (one `opcache exec` per kernel) pays a connection
// and libcurl's start-up per kernel; pulling the scenario's entries once, in
// one batch over reused connections, turns the other misses into local hits.
//
// Bounded: only when the remote lists at most `RemoteOptions::prefetch`
// entries for the scenario; at most once per `k_prefetch_interval` per
// remote and scenario across the processes sharing the cache (a marker file
// under <cache>/remotes/, written under a lock so concurrent processes
// prefetch once; the others do not wait for it but fetch their own keys
// meanwhile, as `xargs -P` compiles on a fresh machine do).
#pragma once

#include <chrono>

#include "opcache/types.hpp"
#include "remote/remote_set.hpp"

namespace opcache::remote {

/// How long a prefetch of a scenario counts as fresh.
inline constexpr std::chrono::minutes k_prefetch_interval{10};

/// Pulls the entries matching `scenario` (its device mode, phase, toolchain
/// and soc; `op_type` is ignored) from `remote` into `local`, unless the
/// remote's `prefetch` attribute is 0, the remote cannot list by scenario
/// (file://), the remote lists more entries than
/// it, or this cache prefetched the scenario from it within
/// k_prefetch_interval. Never fails the lookup that asked: problems go to
/// the store's warning sink and the caller fetches the one key as usual.
/// The caller has checked that the remote's circuit breaker allows it.
/// Thread-safe; never waits: while another process (or thread) prefetches
/// the same scenario it returns at once, and the caller fetches its one key.
/// Returns whether this call pulled anything into `local`.
bool prefetch_scenario(store::LocalStore& local, const Remote& remote, const ListFilter& scenario);

}  // namespace opcache::remote
