// Prometheus metrics of `opcache serve` (text exposition format 0.0.4), per
// replica: every series carries the replica's name as its `replica` label.
#pragma once

#include <array>
#include <functional>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/mutex.hpp"
#include "server/lease_book.hpp"
#include "server/routes.hpp"
#include "server/usage_series.hpp"

namespace opcache::server {

/// Store-level gauges sampled when /metrics is scraped (absent when the
/// storage cannot tell cheaply, e.g. S3).
struct StorageGauges {
  std::optional<std::int64_t> entries;
  std::optional<std::int64_t> bytes;
  std::optional<std::int64_t> evictions;
  std::optional<std::int64_t> limit_bytes;  ///< the size aging keeps the store under; absent without aging
};

/// Build leases and waiting requests, sampled when /metrics is scraped.
struct CoordinationGauges {
  LeaseCounts leases;
  std::size_t waiting = 0;  ///< GET/HEAD ?wait= requests held open now
};

/// Request counters and latency histograms by route, method and status;
/// bytes in and out; rejected uploads by reason. Thread-safe.
class Metrics {
 public:
  /// Upper bounds (seconds) of the latency histogram buckets.
  static constexpr std::array<double, 12> k_buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,   0.1,   0.25,   0.5,   1.0,  5.0};

  /// Counts an answered request, labelled with route_name(`route`).
  void record_request(RouteId route, const std::string& method, int status, double seconds, std::uint64_t bytes_in,
                      std::uint64_t bytes_out);
  void record_rejected_upload(const std::string& reason);
  /// Counts the entries a batch fetch answered: found, and not found.
  void record_lookups(std::int64_t hits, std::int64_t misses);

  /// Names this replica (the server's start, before it serves): every series
  /// then carries replica="<name>" (escaped as Prometheus label values are),
  /// and opcache_kernel_lookups reports `own_kernels()` — this replica's own
  /// figures, UsageStats::replica_totals — rather than render's `kernels`,
  /// which over a shared bucket are the team's. Without it (tests that build
  /// an Api alone) there is no replica label. Not thread-safe against render.
  void set_replica(std::string name, std::function<UsageCounts()> own_kernels);

  /// The exposition text, including `gauges`, `coordination`, the usage
  /// statistics' all-time `kernels` (hits and misses counted once per kernel
  /// and client, as /v1/status and /v1/stats report them; see set_replica)
  /// and process uptime.
  std::string render(const StorageGauges& gauges, const CoordinationGauges& coordination, const UsageCounts& kernels,
                     double uptime_seconds) const;

 private:
  struct Histogram {
    std::array<std::uint64_t, k_buckets.size()> buckets{};
    std::uint64_t count = 0;
    double sum = 0;
  };

  // `name{labels,replica="…"}`, or `name` without any label.
  std::string series(const char* name, const std::string& labels = {}) const;

  std::string m_replica_label;  // replica="<escaped name>", or "" before set_replica
  std::function<UsageCounts()> m_own_kernels;
  mutable base::Mutex m_mutex;
  // Requests by route name (route_name's static text), method and status,
  // in that order; looked up without copying the name or the method.
  using ByStatus = std::map<int, std::uint64_t>;
  std::map<std::string_view, std::map<std::string, ByStatus, std::less<>>> m_requests GUARDED_BY(m_mutex);
  std::map<std::string_view, Histogram> m_latency GUARDED_BY(m_mutex);
  std::map<std::string, std::uint64_t> m_rejected_uploads GUARDED_BY(m_mutex);
  std::uint64_t m_bytes_in GUARDED_BY(m_mutex) = 0;
  std::uint64_t m_bytes_out GUARDED_BY(m_mutex) = 0;
  std::int64_t m_hits GUARDED_BY(m_mutex) = 0;
  std::int64_t m_misses GUARDED_BY(m_mutex) = 0;
};

}  // namespace opcache::server
