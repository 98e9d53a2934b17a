#include "server/usage_stats.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "base/base64.hpp"
#include "base/canonical_json.hpp"
#include "base/file_io.hpp"
#include "base/json_parse.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

constexpr const char* k_file_format = "opcache-serve-stats";
constexpr int k_file_version = 1;
constexpr std::size_t k_top_named = 10;
constexpr std::int64_t k_max_points = 1440;
// The two rings: a day of minutes and 30 days of hours.
constexpr std::int64_t k_minute_ms = 60'000;
constexpr std::size_t k_minutes_kept = 1440;
constexpr std::int64_t k_hour_ms = 3'600'000;
constexpr std::size_t k_hours_kept = 720;

constexpr WindowSpec k_windows[] = {
    {"hour", 3600, 60, 60},
    {"day", 86400, 60, 900},
    {"30d", 30 * 86400, 3600, 43200},
};

std::int64_t system_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The rule `route` is counted by (docs/protocol.md "Routes", "Statistics").
UsageRule rule_of(RouteId route) {
  const RouteSpec* spec = find_route(route);
  return spec != nullptr ? spec->usage : UsageRule::monitoring;
}

// What a GET or HEAD of an entry told the client, if it said whether the kernel is there.
std::optional<KernelAnswer> lookup_answer(const UsageEvent& event) {
  if (event.status == 404) {
    return KernelAnswer::absent;
  }
  if (event.status == 304 || (event.status == 200 && event.method != "GET")) {
    return KernelAnswer::found;
  }
  if (event.status == 200 || event.status == 307) {
    return KernelAnswer::sent;  // 307: a GET sent to the bucket for the bundle (--redirect-downloads)
  }
  return std::nullopt;  // refused, revoked, failed: no answer about the kernel
}

// The one frame in which a GET redirected to the bucket (307) says what it
// gave: the bundle's size and facts. Null for any other answer.
const FetchedKernel* redirected_kernel(const UsageEvent& event) {
  return event.status == 307 && event.fetched.size() == 1 ? &event.fetched.front() : nullptr;
}

json optional_text(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }

// The `k_top_named` names with the most hits, most first; "" is null.
json top_named(const HitsByName& hits, const char* field, bool parse_json) {
  std::vector<std::pair<std::string, std::int64_t>> order(hits.begin(), hits.end());
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  json top = json::array();
  for (std::size_t i = 0; i < order.size() && i < k_top_named; ++i) {
    json name = optional_text(order[i].first);
    if (parse_json && !order[i].first.empty()) {
      name = json::parse(order[i].first, nullptr, false);
      name = name.is_discarded() ? json(nullptr) : name;
    }
    top.push_back({{field, name}, {"hits", order[i].second}});
  }
  return top;
}

json token_json(const std::string& name, const TokenActivity& activity) {
  return {{"name", name},
          {"requests", activity.counts.requests},
          {"lookups", activity.counts.lookups},
          {"hits", activity.counts.hits},
          {"misses", activity.counts.misses},
          {"uploads", activity.counts.uploads},
          {"bytes_in", activity.bytes_in},
          {"bytes_out", activity.bytes_out},
          {"last_seen_ms", activity.last_seen_ms}};
}

Result<TokenActivity> token_from_json(const json& item) {
  TokenActivity activity;
  auto counts = counts_from_json(item);
  if (!counts) {
    return counts.error();
  }
  activity.counts = *counts;
  for (auto [name, field] : {std::pair{"bytes_in", &activity.bytes_in}, std::pair{"bytes_out", &activity.bytes_out},
                             std::pair{"last_seen_ms", &activity.last_seen_ms}}) {
    auto it = item.find(name);
    if (it == item.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0) {
      return Error::corrupt(std::string("token activity: \"") + name + "\" is not a non-negative integer");
    }
    *field = it->get<std::int64_t>();
  }
  return activity;
}

}  // namespace

const WindowSpec& window_spec(StatsWindow window) noexcept { return k_windows[static_cast<int>(window)]; }

Result<StatsWindow> parse_window(std::string_view name) {
  for (int i = 0; i < 3; ++i) {
    if (name == k_windows[i].name) {
      return static_cast<StatsWindow>(i);
    }
  }
  return Error::usage("window=\"" + std::string(name) + "\" is not a window (allowed: hour, day, 30d)");
}

std::string op_type_from_header(std::string_view value) {
  return remote::is_op_type_header_value(value) ? std::string(value) : std::string();
}

std::string scenario_from_header(std::string_view value) {
  if (value.empty() || value.size() > remote::k_max_scenario_header) {
    return {};
  }
  auto decoded = base::base64url_decode(value);
  if (!decoded) {
    return {};
  }
  json scenario = json::parse(*decoded, nullptr, false);
  if (scenario.is_discarded() || !scenario.is_object()) {
    return {};
  }
  auto canonical = base::canonical_json(scenario);
  return canonical ? *canonical : std::string();
}

UsageStats::UsageStats(Clock clock)
    : m_clock(clock ? std::move(clock) : Clock(system_ms)),
      m_since_ms(m_clock()),
      m_minutes(k_minute_ms, k_minutes_kept),
      m_hours(k_hour_ms, k_hours_kept),
      m_misses(k_missed_keys) {}

std::int64_t UsageStats::now_ms() const { return m_clock(); }

void UsageStats::record(const UsageEvent& event) {
  const UsageRule rule = rule_of(event.route);
  if (rule == UsageRule::monitoring) {
    return;
  }
  const std::int64_t now = now_ms();
  base::MutexLock lock(m_mutex);
  TokenActivity scratch;
  TokenActivity& token = token_of(event.token_name, scratch);
  UsageCounts counts;
  counts.requests = 1;
  const bool stored = event.status == 200 || event.status == 201;
  if (rule == UsageRule::lookup) {
    if (const auto answer = lookup_answer(event)) {
      const FetchedKernel* redirected = redirected_kernel(event);
      const auto sent = *answer != KernelAnswer::sent ? 0
                        : redirected != nullptr     ? redirected->bytes
                                                    : static_cast<std::int64_t>(event.bytes_out);
      count_kernel(event, event.key, *answer, redirected != nullptr ? redirected->facts.get() : event.facts, sent, now,
                   counts, token);
    }
  } else if (rule == UsageRule::batch) {
    for (const FetchedKernel& kernel : event.fetched) {
      count_kernel(event, kernel.key, kernel.sent ? KernelAnswer::sent : KernelAnswer::absent, kernel.facts.get(),
                   kernel.bytes, now, counts, token);
    }
  } else if ((rule == UsageRule::upload && stored) || (rule == UsageRule::lease && event.status == 201)) {
    count_kernel(event, event.key, KernelAnswer::built, nullptr, 0, now, counts, token);
    if (rule == UsageRule::upload) {
      counts.uploads = 1;
      counts.bytes_uploaded = static_cast<std::int64_t>(event.bytes_in);
      m_misses.forget(std::string(event.key));
    }
  }
  m_total += counts;
  m_minutes.add(now, counts);
  m_hours.add(now, counts);
  token.counts += counts;
  token.bytes_in += static_cast<std::int64_t>(event.bytes_in);
  token.bytes_out += static_cast<std::int64_t>(event.bytes_out);
  token.last_seen_ms = now;
}

TokenActivity& UsageStats::token_of(std::string_view name, TokenActivity& scratch) {
  auto token = m_tokens.find(name);
  if (token == m_tokens.end()) {
    if (m_tokens.size() >= k_token_names) {
      return scratch;
    }
    token = m_tokens.emplace(std::string(name), TokenActivity{}).first;
  }
  return token->second;
}

void UsageStats::count_kernel(const UsageEvent& event, std::string_view key, KernelAnswer answer,
                              const EntryFacts* facts, std::int64_t bytes_sent, std::int64_t now, UsageCounts& counts,
                              TokenActivity& token) {
  const std::uint64_t client = client_hash(event.token_name, event.client);
  const LookupEffect effect = m_episodes.answer(key, client, answer, now);
  counts.bytes_served += bytes_sent;
  if (effect.saved && facts != nullptr) {
    counts.compile_ms_saved += std::max<std::int64_t>(facts->build_ms, 0);
  }
  if (effect.unmiss_at_ms) {
    m_total.misses -= 1;
    m_total.lookups -= 1;
    m_minutes.take_back_miss(*effect.unmiss_at_ms);
    m_hours.take_back_miss(*effect.unmiss_at_ms);
    token.counts.misses -= token.counts.misses > 0 ? 1 : 0;
    token.counts.lookups -= token.counts.lookups > 0 ? 1 : 0;
  }
  if (!effect.hit && !effect.miss) {
    return;
  }
  // What was looked up: the stored entry's own facts, else the client's word (single lookups only).
  const bool single = event.route == RouteId::entry_read;
  const std::string op_type = facts != nullptr ? facts->op_type : single ? op_type_from_header(event.op_type_header) : "";
  const std::string scenario = facts != nullptr ? facts->scenario
                               : single         ? scenario_from_header(event.scenario_header)
                                                : "";
  UsageCounts kernel;
  kernel.lookups = 1;
  if (effect.hit) {
    kernel.hits = 1;
    m_misses.forget(std::string(key));
    m_minutes.name_hit(now, op_type, scenario);  // the hit itself is added with the request's counts
    m_hours.name_hit(now, op_type, scenario);
  } else {
    kernel.misses = 1;
    m_misses.record(std::string(key), op_type, scenario, client, now);
  }
  counts += kernel;
}

UsageCounts UsageStats::totals() const {
  base::MutexLock lock(m_mutex);
  return m_total;
}

json UsageStats::summary(StatsWindow window) const {
  const WindowSpec& spec = window_spec(window);
  const std::int64_t resolution = spec.resolution_seconds * 1000;
  base::MutexLock lock(m_mutex);
  const UsageSeries& series = window == StatsWindow::days30 ? m_hours : m_minutes;
  const std::int64_t to = (now_ms() / resolution + 1) * resolution;
  const std::int64_t from = to - spec.seconds * 1000;
  json body = counts_to_json(series.sum(from, to));
  body["window"] = spec.name;
  body["window_seconds"] = spec.seconds;
  body["from_ms"] = from;
  body["to_ms"] = to;
  json all_time = counts_to_json(m_total);
  all_time["since_ms"] = m_since_ms;
  body["all_time"] = all_time;
  HitsByName op_types;
  HitsByName scenarios;
  series.add_named_hits(from, to, op_types, scenarios);
  body["top_op_types"] = top_named(op_types, "op_type", false);
  body["top_scenarios"] = top_named(scenarios, "scenario", true);
  return body;
}

Result<json> UsageStats::timeseries(StatsWindow window, std::int64_t step_seconds) const {
  const WindowSpec& spec = window_spec(window);
  const std::int64_t step = step_seconds == 0 ? spec.default_step_seconds : step_seconds;
  if (step <= 0 || step % spec.resolution_seconds != 0 || spec.seconds / step > k_max_points) {
    return Error::usage("step=" + std::to_string(step_seconds) + " must be a multiple of " +
                        std::to_string(spec.resolution_seconds) + " seconds for window=" + spec.name +
                        ", giving at most " + std::to_string(k_max_points) + " points");
  }
  const std::int64_t step_ms = step * 1000;
  base::MutexLock lock(m_mutex);
  const UsageSeries& series = window == StatsWindow::days30 ? m_hours : m_minutes;
  // The last step ends with the current bucket of the series.
  const std::int64_t resolution = series.resolution_ms();
  const std::int64_t to = (now_ms() / resolution + 1) * resolution;
  const std::int64_t from = to - (spec.seconds * 1000 / step_ms) * step_ms;
  json points = json::array();
  std::int64_t start = from;
  for (const UsageCounts& counts : series.steps(from, to, step_ms)) {
    json point = counts_to_json(counts);
    point.erase("bytes_uploaded");
    point["t_ms"] = start;
    points.push_back(std::move(point));
    start += step_ms;
  }
  return json{{"window", spec.name}, {"step_seconds", step}, {"from_ms", from}, {"to_ms", to}, {"points", points}};
}

json UsageStats::misses(std::size_t limit) const {
  base::MutexLock lock(m_mutex);
  return {
      {"tracked_keys", m_misses.size()}, {"capacity", m_misses.capacity()}, {"groups", m_misses.groups_json(limit)}};
}

json UsageStats::tokens() const {
  std::vector<std::pair<std::string, TokenActivity>> order;
  {
    base::MutexLock lock(m_mutex);
    order.assign(m_tokens.begin(), m_tokens.end());
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second.last_seen_ms > b.second.last_seen_ms; });
  json tokens = json::array();
  for (const auto& [name, activity] : order) {
    tokens.push_back(token_json(name, activity));
  }
  return {{"tokens", tokens}};
}

json UsageStats::to_json() const {
  json tokens = json::object();
  for (const auto& [name, activity] : m_tokens) {
    tokens[name] = token_json(name, activity);
  }
  return {{"format", k_file_format},     {"version", k_file_version},  {"saved_ms", now_ms()},
          {"since_ms", m_since_ms},      {"total", counts_to_json(m_total)},
          {"minutes", m_minutes.to_json()}, {"hours", m_hours.to_json()}, {"tokens", tokens},
          {"misses", m_misses.to_json()}};
}

Status UsageStats::from_json(const json& value) {
  if (!value.is_object() || value.value("format", "") != k_file_format) {
    return Error::corrupt(std::string("not an \"") + k_file_format + "\" file");
  }
  if (value.value("version", 0) != k_file_version) {
    return Error::corrupt("format version " + value.value("version", json(nullptr)).dump() + ", this server reads " +
                          std::to_string(k_file_version));
  }
  UsageSeries minutes(k_minute_ms, k_minutes_kept);
  UsageSeries hours(k_hour_ms, k_hours_kept);
  MissTable misses(k_missed_keys);
  std::map<std::string, TokenActivity, std::less<>> tokens;
  auto total = counts_from_json(value.value("total", json::object()));
  if (!total) {
    return total.error();
  }
  for (auto [series, field] : {std::pair{&minutes, "minutes"}, std::pair{&hours, "hours"}}) {
    if (auto loaded = series->from_json(value.value(field, json::array())); !loaded) {
      return loaded;
    }
  }
  if (auto loaded = misses.from_json(value.value("misses", json::object())); !loaded) {
    return loaded;
  }
  const json token_items = value.value("tokens", json::object());
  if (!token_items.is_object()) {
    return Error::corrupt("\"tokens\" is not an object");
  }
  for (const auto& [name, item] : token_items.items()) {
    auto activity = token_from_json(item);
    if (!activity) {
      return activity.error();
    }
    tokens.emplace(name, *activity);
  }
  base::MutexLock lock(m_mutex);
  m_since_ms = value.value("since_ms", m_since_ms);
  m_total = *total;
  m_minutes = std::move(minutes);
  m_hours = std::move(hours);
  m_misses = std::move(misses);
  m_tokens = std::move(tokens);
  return {};
}

Status UsageStats::save(const std::filesystem::path& file) const {
  json value;
  {
    base::MutexLock lock(m_mutex);
    value = to_json();
  }
  return base::write_file_atomic(file, value.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

Status UsageStats::load(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    return {};
  }
  auto text = base::read_file(file);
  if (!text) {
    return text.error();
  }
  auto value = base::parse_json(*text, file.string());
  if (!value) {
    return value.error();
  }
  if (auto loaded = from_json(*value); !loaded) {
    return Error::corrupt(file.string() + ": " + loaded.error().message());
  }
  return {};
}

}  // namespace opcache::server
