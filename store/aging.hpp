// CANN-compatible aging of a local store (see ../shared/seeds/002: op_cache.ini,
// max_op_cache_size, remain_cache_size_ratio, the 30-minute idle rule).
#pragma once

#include <cstdint>

namespace opcache::store {

/// When and how far a store is aged.
struct AgingPolicy {
  std::int64_t max_bytes = 500ll << 20;  ///< -1 disables aging and access-time updates
  int remain_ratio = 50;                 ///< percent of max_bytes kept after aging, 1..100
  std::int64_t min_idle_ms = 1800000;    ///< only entries idle at least this long are aged

  bool enabled() const noexcept { return max_bytes >= 0; }
  /// Aging removes entries until the store is at most this size.
  /// floor(max_bytes × remain_ratio / 100), computed without overflow.
  std::int64_t target_bytes() const noexcept {
    return max_bytes / 100 * remain_ratio + max_bytes % 100 * remain_ratio / 100;
  }
};

/// The most entries the aging after one write removes, by default (one
/// eviction transaction): bounded work per put, whatever the store's size.
inline constexpr std::int64_t k_evictions_per_write = 256;

/// Whether a gc only reports what it would remove.
enum class GcMode { remove, dry_run };

}  // namespace opcache::store
