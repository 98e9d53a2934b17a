// The store at scale: an index of N entries filled directly (rows inserted
// through store::Index in large transactions, not N puts), index lookups of
// random present keys on a fresh connection, and a gc that removes 10 % of
// the entries. Only the entries the gc removes get object files (small
// synthetic ones, synced to disk first so their unlink frees real blocks):
// gc touches no other object, and creating and later deleting 10^6 files
// would cost far more than what is measured. Used by bench_aging
// --scale-entries N.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "support/bench_util.hpp"

namespace opcache::bench {

struct ScaleResults {
  std::size_t entries = 0;
  double fill_seconds = 0;         ///< rows inserted and objects written
  std::size_t objects_created = 0;  ///< object files (the entries gc removes)
  std::uint64_t index_bytes = 0;    ///< index.db after the fill
  Percentiles lookup;               ///< Index::lookup of random present keys, us
  std::int64_t gc_removed = 0;
  double gc_seconds = 0;
  std::string gc_stopped_because;

  /// {"entries", "lookup_p50_us", "lookup_p99_us", "gc_removed", "gc_seconds", ...}: the
  /// first five are read by bench/run; keep their names.
  json to_json() const;
};

/// Fills a store of `entries` entries under `root` (which must not exist or
/// be empty), times `lookups` lookups, then times one gc removing 10 % of
/// the entries. Fails (throws) on any store error.
ScaleResults run_scale_benchmark(const fs::path& root, std::size_t entries, std::size_t lookups);

}  // namespace opcache::bench
