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

constexpr std::size_t k_top_named = 10;
constexpr std::int64_t k_max_points = 1440;

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

UsageStats::UsageStats(Clock clock) : m_clock(clock ? std::move(clock) : Clock(system_ms)) {
  m_own.since_ms = m_clock();
}

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
      m_own.misses.forget(std::string(event.key));
      m_own.remember_upload(std::string(event.key), now);  // other replicas drop their misses of it
    }
  }
  m_own.total += counts;
  m_own.minutes.add(now, counts);
  m_own.hours.add(now, counts);
  token.counts += counts;
  token.bytes_in += static_cast<std::int64_t>(event.bytes_in);
  token.bytes_out += static_cast<std::int64_t>(event.bytes_out);
  token.last_seen_ms = now;
}

TokenActivity& UsageStats::token_of(std::string_view name, TokenActivity& scratch) {
  auto token = m_own.tokens.find(name);
  if (token == m_own.tokens.end()) {
    if (m_own.tokens.size() >= k_token_names) {
      return scratch;
    }
    token = m_own.tokens.emplace(std::string(name), TokenActivity{}).first;
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
    m_own.total.misses -= 1;
    m_own.total.lookups -= 1;
    m_own.minutes.take_back_miss(*effect.unmiss_at_ms);
    m_own.hours.take_back_miss(*effect.unmiss_at_ms);
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
    m_own.misses.forget(std::string(key));
    m_own.minutes.name_hit(now, op_type, scenario);  // the hit itself is added with the request's counts
    m_own.hours.name_hit(now, op_type, scenario);
  } else {
    kernel.misses = 1;
    m_own.misses.record(std::string(key), op_type, scenario, client, now);
  }
  counts += kernel;
}

UsageCounts UsageStats::totals() const {
  base::MutexLock lock(m_mutex);
  UsageCounts total = m_own.total;
  if (m_team) {
    total += m_team->others.total;
  }
  return total;
}

UsageCounts UsageStats::replica_totals() const {
  base::MutexLock lock(m_mutex);
  return m_own.total;
}

void UsageStats::set_team(std::shared_ptr<const TeamFigures> team) {
  base::MutexLock lock(m_mutex);
  m_team = std::move(team);
}

json UsageStats::summary(StatsWindow window) const {
  const WindowSpec& spec = window_spec(window);
  const std::int64_t resolution = spec.resolution_seconds * 1000;
  const std::int64_t to = (now_ms() / resolution + 1) * resolution;
  const std::int64_t from = to - spec.seconds * 1000;
  base::MutexLock lock(m_mutex);
  UsageCounts counts;
  UsageCounts all_time_counts;
  std::int64_t since = 0;
  HitsByName op_types;
  HitsByName scenarios;
  for (const UsageTables* tables : {&m_own, m_team ? &m_team->others : nullptr}) {
    if (tables == nullptr) {
      continue;
    }
    const UsageSeries& series = window == StatsWindow::days30 ? tables->hours : tables->minutes;
    counts += series.sum(from, to);
    series.add_named_hits(from, to, op_types, scenarios);
    all_time_counts += tables->total;
    if (tables->since_ms > 0) {
      since = since > 0 ? std::min(since, tables->since_ms) : tables->since_ms;
    }
  }
  json body = counts_to_json(counts);
  body["window"] = spec.name;
  body["window_seconds"] = spec.seconds;
  body["from_ms"] = from;
  body["to_ms"] = to;
  json all_time = counts_to_json(all_time_counts);
  all_time["since_ms"] = since;
  body["all_time"] = all_time;
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
  // The last step ends with the current bucket of the series.
  const std::int64_t resolution = spec.resolution_seconds * 1000;
  const std::int64_t to = (now_ms() / resolution + 1) * resolution;
  const std::int64_t from = to - (spec.seconds * 1000 / step_ms) * step_ms;
  std::vector<UsageCounts> steps;
  {
    base::MutexLock lock(m_mutex);
    for (const UsageTables* tables : {&m_own, m_team ? &m_team->others : nullptr}) {
      if (tables == nullptr) {
        continue;
      }
      const UsageSeries& series = window == StatsWindow::days30 ? tables->hours : tables->minutes;
      auto theirs = series.steps(from, to, step_ms);
      steps.resize(theirs.size());
      for (std::size_t i = 0; i < theirs.size(); ++i) {
        steps[i] += theirs[i];  // one minute bucket of every replica, summed
      }
    }
  }
  json points = json::array();
  std::int64_t start = from;
  for (const UsageCounts& counts : steps) {
    json point = counts_to_json(counts);
    point.erase("bytes_uploaded");
    point["t_ms"] = start;
    points.push_back(std::move(point));
    start += step_ms;
  }
  return json{{"window", spec.name}, {"step_seconds", step}, {"from_ms", from}, {"to_ms", to}, {"points", points}};
}

json UsageStats::misses(std::size_t limit) const {
  json own;
  std::shared_ptr<const TeamFigures> team;
  UploadTimes uploaded;
  {
    base::MutexLock lock(m_mutex);
    if (!m_team) {
      return {{"tracked_keys", m_own.misses.size()},
              {"capacity", m_own.misses.capacity()},
              {"groups", m_own.misses.groups_json(limit)}};
    }
    own = m_own.misses.to_json();
    team = m_team;
    uploaded = team->uploaded;
    add_upload_times(uploaded, m_own);
  }
  // The team's table: each replica's misses of a key added up, without the
  // keys some replica has seen uploaded since (they are stored now).
  const json theirs = team->others.misses.to_json();
  MissTable merged(k_missed_keys);
  // merge_missed's records are well-formed: from_json cannot refuse them.
  (void)merged.from_json(merge_missed({&own, &theirs}, uploaded, k_missed_keys));
  return {{"tracked_keys", merged.size()}, {"capacity", merged.capacity()}, {"groups", merged.groups_json(limit)}};
}

json UsageStats::tokens() const {
  TokenActivities merged;
  {
    base::MutexLock lock(m_mutex);
    merged = m_own.tokens;
    if (m_team) {
      add_token_activities(merged, m_team->others.tokens);
    }
  }
  std::vector<std::pair<std::string, TokenActivity>> order(merged.begin(), merged.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second.last_seen_ms > b.second.last_seen_ms; });
  json tokens = json::array();
  for (const auto& [name, activity] : order) {
    tokens.push_back(token_activity_json(name, activity));
  }
  return {{"tokens", tokens}};
}

json UsageStats::document() const {
  const std::int64_t now = now_ms();
  base::MutexLock lock(m_mutex);
  return usage_document(m_own, now);
}

void UsageStats::absorb(const UsageTables& tables) {
  base::MutexLock lock(m_mutex);
  add_tables(m_own, tables);
}

Status UsageStats::save(const std::filesystem::path& file) const {
  return base::write_file_atomic(file, document().dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
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
  auto tables = parse_usage_document(*value);
  if (!tables) {
    return Error::corrupt(file.string() + ": " + tables.error().message());
  }
  base::MutexLock lock(m_mutex);
  if (tables->since_ms == 0) {
    tables->since_ms = m_own.since_ms;  // a file without one: the history begins now
  }
  m_own = std::move(*tables);
  return {};
}

}  // namespace opcache::server
