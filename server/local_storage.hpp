// The server's embedded storage: a local store (same layout, index, aging
// and crash safety as the client's).
#pragma once

#include <filesystem>
#include <cstddef>
#include <memory>

#include "server/open_file_budget.hpp"
#include "server/storage.hpp"
#include "store/local_store.hpp"

namespace opcache::server {

/// Opens (creating) a local store at `root` for serving. Aging follows
/// `options.aging` exactly as on a client.
///
/// Bundles up to k_cached_bundle_limit (1 MiB) are read whole and kept in
/// memory, up to `cache_bytes` in all (0: none kept; they are still read
/// whole). A delete or an upload through this storage drops the key from
/// memory at once. A kept bundle is served while its object file exists,
/// checked (one fstatat) on a hit at most once a second: a delete, a
/// replacement or an eviction by another process sharing the store, or by
/// aging, is seen within a second.
///
/// A kept bundle of k_zero_copy_bytes or more keeps its object file open
/// too (StoredBundle::memory_file), while at most `open_files` are (the
/// rest are served from memory alone). Such a file whose object another
/// process deletes keeps its disk space until the bundle leaves memory.
Result<std::unique_ptr<Storage>> make_local_storage(store::StoreOptions options, std::size_t cache_bytes,
                                                    std::size_t open_files = default_open_file_budget());

/// Largest bundle kept in memory by the local storage.
inline constexpr std::size_t k_cached_bundle_limit = 1u << 20;

}  // namespace opcache::server
