#include "server/metrics.hpp"

#include <cstdio>

namespace opcache::server {

namespace {

std::string format_double(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

void append_family(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// A label value as the text format escapes it: backslash, double quote and line feed.
std::string escape_label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    out += c == '\\' ? "\\\\" : c == '"' ? "\\\"" : c == '\n' ? "\\n" : std::string(1, c);
  }
  return out;
}

}  // namespace

void Metrics::set_replica(std::string name, std::function<UsageCounts()> own_kernels) {
  m_replica_label = "replica=\"" + escape_label_value(name) + "\"";
  m_own_kernels = std::move(own_kernels);
}

std::string Metrics::series(const char* name, const std::string& labels) const {
  if (labels.empty() && m_replica_label.empty()) {
    return name;
  }
  return std::string(name) + "{" + labels + (labels.empty() || m_replica_label.empty() ? "" : ",") + m_replica_label +
         "}";
}

void Metrics::record_request(RouteId route, const std::string& method, int status, double seconds,
                             std::uint64_t bytes_in, std::uint64_t bytes_out) {
  const std::string_view name = route_name(route);
  base::MutexLock lock(m_mutex);
  auto& by_method = m_requests[name];
  auto counted = by_method.find(method);
  if (counted == by_method.end()) {
    counted = by_method.emplace(method, ByStatus{}).first;
  }
  ++counted->second[status];
  auto& histogram = m_latency[name];
  for (std::size_t i = 0; i < k_buckets.size(); ++i) {
    if (seconds <= k_buckets[i]) {
      ++histogram.buckets[i];
    }
  }
  ++histogram.count;
  histogram.sum += seconds;
  m_bytes_in += bytes_in;
  m_bytes_out += bytes_out;
  if (route == RouteId::entry_read) {
    if (status == 200 || status == 304) {
      ++m_hits;
    } else if (status == 404) {
      ++m_misses;
    }
  }
}

void Metrics::record_rejected_upload(const std::string& reason) {
  base::MutexLock lock(m_mutex);
  ++m_rejected_uploads[reason];
}

void Metrics::record_lookups(std::int64_t hits, std::int64_t misses) {
  base::MutexLock lock(m_mutex);
  m_hits += hits;
  m_misses += misses;
}

std::string Metrics::render(const StorageGauges& gauges, const CoordinationGauges& coordination,
                            const UsageCounts& team_kernels, double uptime_seconds) const {
  const UsageCounts kernels = m_own_kernels ? m_own_kernels() : team_kernels;
  auto quoted = [](const std::string& value) { return "\"" + value + "\""; };
  base::MutexLock lock(m_mutex);
  std::string out;
  append_family(out, "opcache_http_requests_total", "counter", "HTTP requests by route, method and status.");
  for (const auto& [route, by_method] : m_requests) {
    for (const auto& [method, by_status] : by_method) {
      for (const auto& [status, count] : by_status) {
        out += series("opcache_http_requests_total", "route=" + quoted(std::string(route)) + ",method=" +
                                                         quoted(method) + ",status=" + quoted(std::to_string(status))) +
               " " + std::to_string(count) + "\n";
      }
    }
  }
  append_family(out, "opcache_http_request_duration_seconds", "histogram",
                "Time from the first byte of a request to the last byte of its response.");
  for (const auto& [route, histogram] : m_latency) {
    const std::string route_label = "route=" + quoted(std::string(route));
    for (std::size_t i = 0; i < k_buckets.size(); ++i) {
      out += series("opcache_http_request_duration_seconds_bucket",
                    route_label + ",le=" + quoted(format_double(k_buckets[i]))) +
             " " + std::to_string(histogram.buckets[i]) + "\n";
    }
    out += series("opcache_http_request_duration_seconds_bucket", route_label + ",le=\"+Inf\"") + " " +
           std::to_string(histogram.count) + "\n";
    out += series("opcache_http_request_duration_seconds_sum", route_label) + " " + format_double(histogram.sum) + "\n";
    out += series("opcache_http_request_duration_seconds_count", route_label) + " " +
           std::to_string(histogram.count) + "\n";
  }
  append_family(out, "opcache_http_received_bytes_total", "counter", "Request body bytes received.");
  out += series("opcache_http_received_bytes_total") + " " + std::to_string(m_bytes_in) + "\n";
  append_family(out, "opcache_http_sent_bytes_total", "counter", "Response body bytes sent.");
  out += series("opcache_http_sent_bytes_total") + " " + std::to_string(m_bytes_out) + "\n";
  append_family(out, "opcache_uploads_rejected_total", "counter", "Uploads refused, by reason.");
  for (const auto& [reason, count] : m_rejected_uploads) {
    out += series("opcache_uploads_rejected_total", "reason=" + quoted(reason)) + " " + std::to_string(count) + "\n";
  }
  append_family(out, "opcache_cache_hits_total", "counter",
                "Entry reads (GET, HEAD, batch frames) that found the entry: each request.");
  out += series("opcache_cache_hits_total") + " " + std::to_string(m_hits) + "\n";
  append_family(out, "opcache_cache_misses_total", "counter",
                "Entry reads (GET, HEAD, batch frames) that did not find the entry: each request.");
  out += series("opcache_cache_misses_total") + " " + std::to_string(m_misses) + "\n";
  append_family(out, "opcache_kernel_lookups", "gauge",
                "Kernels asked for of this replica since its history began, once per kernel and client (as /v1/stats "
                "counts them); a miss answered later by another machine's upload becomes a hit.");
  out += series("opcache_kernel_lookups", "result=\"hit\"") + " " + std::to_string(kernels.hits) + "\n";
  out += series("opcache_kernel_lookups", "result=\"miss\"") + " " + std::to_string(kernels.misses) + "\n";
  if (gauges.entries) {
    append_family(out, "opcache_store_entries", "gauge", "Entries in the store.");
    out += series("opcache_store_entries") + " " + std::to_string(*gauges.entries) + "\n";
  }
  if (gauges.bytes) {
    append_family(out, "opcache_store_bytes", "gauge", "Bytes of bundles in the store.");
    out += series("opcache_store_bytes") + " " + std::to_string(*gauges.bytes) + "\n";
  }
  if (gauges.evictions) {
    append_family(out, "opcache_store_evictions_total", "counter", "Entries removed by aging.");
    out += series("opcache_store_evictions_total") + " " + std::to_string(*gauges.evictions) + "\n";
  }
  append_family(out, "opcache_leases_total", "counter",
                "Build leases by outcome: granted, refused (held by another), expired, released (DELETE or upload).");
  const auto& leases = coordination.leases;
  for (const auto& [outcome, count] : {std::pair{"granted", leases.granted}, std::pair{"refused", leases.refused},
                                       std::pair{"expired", leases.expired}, std::pair{"released", leases.released}}) {
    out += series("opcache_leases_total", std::string("outcome=") + quoted(outcome)) + " " + std::to_string(count) +
           "\n";
  }
  append_family(out, "opcache_leases_active", "gauge", "Build leases held now.");
  out += series("opcache_leases_active") + " " + std::to_string(leases.active) + "\n";
  append_family(out, "opcache_entry_waits", "gauge", "GET/HEAD ?wait= requests waiting for an entry now.");
  out += series("opcache_entry_waits") + " " + std::to_string(coordination.waiting) + "\n";
  append_family(out, "opcache_uptime_seconds", "gauge", "Seconds since the server started.");
  out += series("opcache_uptime_seconds") + " " + format_double(uptime_seconds) + "\n";
  return out;
}

}  // namespace opcache::server
