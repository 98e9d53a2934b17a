// The statistics endpoints (GET /v1/stats/*) and the dashboard (GET /ui/) of
// the API: parameters checked here, figures from server/usage_stats (the
// whole team's over a shared bucket) and the storage's gauges
// (docs/protocol.md "Statistics").
#include "server/api.hpp"
#include "server/dashboard.hpp"
#include "server/nearest_variant.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

constexpr std::size_t k_default_miss_groups = 20;

Result<StatsWindow> window_parameter(const std::map<std::string, std::string>& parameters) {
  auto it = parameters.find("window");
  return it == parameters.end() ? StatsWindow::day : parse_window(it->second);
}

json optional_number(const std::optional<std::int64_t>& value) { return value ? json(*value) : json(nullptr); }

ApiResponse bad_parameter(const Error& error) { return error_response(400, "bad_request", error.message()); }

}  // namespace

ApiResponse Api::stats_tokens(const std::map<std::string, std::string>& parameters) {
  auto unknown = unknown_parameter(parameters, {});
  return unknown ? std::move(*unknown) : json_response(200, m_usage.tokens());
}

ApiResponse Api::stats_misses(const std::map<std::string, std::string>& parameters) {
  if (auto unknown = unknown_parameter(parameters, {"limit"})) {
    return std::move(*unknown);
  }
  auto limit = integer_parameter(parameters, "limit", k_default_miss_groups, 1, 1000);
  if (!limit) {
    return bad_parameter(limit.error());
  }
  json misses = m_usage.misses(static_cast<std::size_t>(*limit));
  add_nearest_variants(misses, m_storage);
  return json_response(200, misses);
}

ApiResponse Api::stats_timeseries(const std::map<std::string, std::string>& parameters) {
  if (auto unknown = unknown_parameter(parameters, {"window", "step"})) {
    return std::move(*unknown);
  }
  auto window = window_parameter(parameters);
  auto step = integer_parameter(parameters, "step", 0, 1, 30 * 86400);
  if (!window || !step) {
    return bad_parameter(!window ? window.error() : step.error());
  }
  auto series = m_usage.timeseries(*window, *step);
  return series ? json_response(200, *series) : bad_parameter(series.error());
}

ApiResponse Api::stats_summary(const std::map<std::string, std::string>& parameters) {
  if (auto unknown = unknown_parameter(parameters, {"window"})) {
    return std::move(*unknown);
  }
  auto window = window_parameter(parameters);
  return window ? json_response(200, summary(*window, m_storage.gauges())) : bad_parameter(window.error());
}

nlohmann::json Api::summary(StatsWindow window, const StorageGauges& gauges) {
  json body = m_usage.summary(window);
  const std::string description = m_storage.public_description();
  const bool local = m_storage.state_dir().has_value();
  body["storage"] = {{"kind", description.substr(0, description.find(' '))},
                     {"entries", optional_number(gauges.entries)},
                     {"bytes", optional_number(gauges.bytes)},
                     {"limit_bytes", optional_number(gauges.limit_bytes)},
                     {"evictions", optional_number(gauges.evictions)}};
  // Local storage belongs to one server, which keeps its history in a file.
  // A bucket is shared by replicas, which keep theirs in it and answer with
  // the whole team's figures (server/team_usage; before revision 9 each
  // counted only its own, and said history_persisted false).
  const bool team = m_storage.shared_bucket() != nullptr;
  body["replica"] = {{"shared_storage", !local}, {"history_persisted", local || team}};
  return body;
}

ApiResponse Api::ui(const std::string& file, bool may_read) {
  if (file != "index.html") {
    return ui_file(file, "");
  }
  if (!may_read) {
    return ui_file(file, noscript_needs_token());
  }
  // One look at the storage for both tables (an aggregate over the index).
  const auto gauges = m_storage.gauges();
  return ui_file(file, render_noscript_tables(summary(StatsWindow::day, gauges), status_body(gauges),
                                              m_usage.misses(k_default_miss_groups)));
}

}  // namespace opcache::server
