// server/usage_stats (with usage_series, miss_table and usage_history) on a
// manual clock: what counts as a lookup, hit, miss, upload and compile time
// saved; windows and time series; the misses table and its bounds; lookup
// headers; activity per token; the history file and a bad one.
#include <doctest/doctest.h>

#include <memory>
#include <set>
#include <vector>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/base64.hpp"
#include "base/file_io.hpp"
#include "server/miss_table.hpp"
#include "server/usage_history.hpp"
#include "server/usage_stats.hpp"
#include "tests/support/usage_event.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::server;
using opcache::test::TempDir;
using opcache::test::uniform_key;
using json = nlohmann::json;

namespace {

// 2026-11-24 08:00:30 UTC, half a minute into a minute.
constexpr std::int64_t k_start_ms = 1795507230000;
constexpr std::int64_t k_minute = 60'000;
constexpr std::int64_t k_hour = 3'600'000;

const std::string k_stats_scenario =
    R"({"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0"})";

// A UsageStats whose clock the test moves.
struct Stats {
  std::int64_t now = k_start_ms;
  UsageStats stats{[this] { return now; }};


  void lookup(const std::string& method, int status, const std::string& key, const EntryFacts* facts = nullptr,
              std::uint64_t bytes_out = 0, const std::string& token = "reader", const std::string& op_header = "",
              const std::string& scenario_header = "", const std::string& client = "10.0.0.1") {
    UsageEvent event = opcache::test::usage_event(RouteId::entry_read, method, status, key, token, client);
    event.bytes_out = bytes_out;
    event.facts = facts;
    event.op_type_header = op_header;
    event.scenario_header = scenario_header;
    stats.record(event);
  }
  void miss(const std::string& key, const std::string& op, const std::string& client, const std::string& token = "ci") {
    lookup("GET", 404, key, nullptr, 0, token, op, opcache::base::base64url_encode(k_stats_scenario), client);
  }
  void request(RouteId route, const std::string& method, int status, const std::string& key,
               const std::string& token, const std::string& client) {
    stats.record(opcache::test::usage_event(route, method, status, key, token, client));
  }
  void fetch(const std::vector<FetchedKernel>& frames, const std::string& client) {
    UsageEvent event = opcache::test::usage_event(RouteId::fetch, "POST", 200, "", "reader", client);
    event.fetched = frames;
    stats.record(event);
  }
  void upload(const std::string& key, std::uint64_t bytes, const std::string& token = "writer") {
    UsageEvent event = opcache::test::usage_event(RouteId::entry_put, "PUT", 201, key, token, "10.0.0.9");
    event.bytes_in = bytes;
    stats.record(event);
  }
};

}  // namespace

TEST_CASE("server::UsageStats counts lookups, hits, misses, bytes served, uploads and compile time saved") {
  Stats s;
  const EntryFacts matmul{"MatMul", k_stats_scenario, 1500};
  s.lookup("GET", 200, uniform_key('a'), &matmul, 1000);
  s.lookup("GET", 200, uniform_key('a'), &matmul, 1000);  // the same client again: bytes, not a second hit
  s.lookup("HEAD", 200, uniform_key('a'), &matmul);
  s.lookup("GET", 304, uniform_key('a'), &matmul);
  s.lookup("HEAD", 200, uniform_key('a'), &matmul, 0, "reader", "", "", "10.0.0.2");  // another client: a hit
  s.lookup("GET", 404, uniform_key('b'));
  s.lookup("GET", 503, uniform_key('c'));  // neither hit nor miss
  s.upload(uniform_key('b'), 4096);

  const json day = s.stats.summary(StatsWindow::day);
  CHECK(day["requests"] == 8);
  CHECK(day["lookups"] == 3);
  CHECK(day["hits"] == 2);
  CHECK(day["misses"] == 1);
  CHECK(day["hit_rate"] == doctest::Approx(2.0 / 3));
  CHECK(day["bytes_served"] == 2000);
  CHECK(day["compile_ms_saved"] == 1500);  // sent once to one client; the other had no bundle sent
  CHECK(day["uploads"] == 1);
  CHECK(day["bytes_uploaded"] == 4096);
  CHECK(day["window"] == "day");
  CHECK(day["window_seconds"] == 86400);
  CHECK(day["top_op_types"] == json::array({{{"op_type", "MatMul"}, {"hits", 2}}}));
  CHECK(day["top_scenarios"][0]["scenario"] == json::parse(k_stats_scenario));
  CHECK(day["all_time"]["hits"] == 2);
  CHECK(day["all_time"]["since_ms"] == k_start_ms);
  CHECK(s.stats.totals().hits == 2);
  CHECK(s.stats.totals().misses == 1);
}

TEST_CASE("server::UsageStats counts a kernel once per client: a miss then a lease and an upload is one miss") {
  Stats s;
  const std::string key = uniform_key('k');
  s.miss(key, "Add", "10.0.0.1");  // the lookup
  s.now += 1000;
  s.request(RouteId::lease_acquire, "POST", 201, key, "ci", "10.0.0.1");  // granted: it builds
  s.miss(key, "Add", "10.0.0.1");  // the re-check after the lease
  s.now += 5000;
  s.request(RouteId::entry_put, "PUT", 201, key, "ci", "10.0.0.1");
  const EntryFacts add{"Add", k_stats_scenario, 700};
  s.lookup("GET", 200, key, &add, 10, "ci", "", "", "10.0.0.1");  // its own kernel, read back: nothing
  const json day = s.stats.summary(StatsWindow::day);
  CHECK(day["lookups"] == 1);
  CHECK(day["misses"] == 1);
  CHECK(day["hits"] == 0);
  CHECK(day["uploads"] == 1);
  CHECK(day["requests"] == 5);
}

TEST_CASE("server::UsageStats: a waiter answered by another machine's upload counts a hit and no miss") {
  Stats s;
  const std::string key = uniform_key('w');
  const EntryFacts gelu{"Gelu", k_stats_scenario, 900};
  for (const char* client : {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}) {
    s.miss(key, "Gelu", client);
  }
  s.request(RouteId::lease_acquire, "POST", 201, key, "ci", "10.0.0.1");
  for (const char* client : {"10.0.0.2", "10.0.0.3", "10.0.0.4"}) {
    s.request(RouteId::lease_acquire, "POST", 409, key, "ci", client);  // held: they wait
    s.miss(key, "Gelu", client);                                        // a ?wait= poll that ran out
  }
  CHECK(s.stats.summary(StatsWindow::day)["misses"] == 4);
  s.now += 3 * k_minute;  // the build takes minutes: the misses stay in their own minute
  s.request(RouteId::entry_put, "PUT", 201, key, "ci", "10.0.0.1");
  for (const char* client : {"10.0.0.2", "10.0.0.3", "10.0.0.4"}) {
    s.lookup("GET", 200, key, &gelu, 50, "ci", "", "", client);  // woken by the upload
  }
  const json day = s.stats.summary(StatsWindow::day);
  CHECK(day["hits"] == 3);
  CHECK(day["misses"] == 1);
  CHECK(day["lookups"] == 4);
  CHECK(day["compile_ms_saved"] == 3 * 900);
  CHECK(s.stats.totals().misses == 1);
  // The time series agrees: the three misses were taken back from the minute they were counted in.
  const json series = s.stats.timeseries(StatsWindow::hour, 60).value();
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  for (const auto& point : series["points"]) {
    hits += point["hits"].get<std::int64_t>();
    misses += point["misses"].get<std::int64_t>();
    CHECK(point["misses"].get<std::int64_t>() >= 0);
  }
  CHECK(hits == 3);
  CHECK(misses == 1);
  CHECK(s.stats.tokens()["tokens"][0]["misses"] == 1);
  CHECK(s.stats.misses(5)["tracked_keys"] == 0);  // stored now
}

TEST_CASE("server::UsageStats counts each frame of a batch fetch as a kernel, with its bytes and compile time") {
  Stats s;
  auto facts = std::make_shared<const EntryFacts>(EntryFacts{"MatMul", k_stats_scenario, 400});
  const std::vector<FetchedKernel> frames{{uniform_key('1'), true, 1000, facts},
                                          {uniform_key('2'), true, 2000, facts},
                                          {uniform_key('3'), false, 0, nullptr}};
  s.fetch(frames, "10.0.0.1");
  s.lookup("GET", 200, uniform_key('1'), facts.get(), 1000, "reader", "", "", "10.0.0.1");  // used later: same episode
  json day = s.stats.summary(StatsWindow::day);
  CHECK(day["requests"] == 2);
  CHECK(day["hits"] == 2);
  CHECK(day["misses"] == 1);
  CHECK(day["bytes_served"] == 4000);
  CHECK(day["compile_ms_saved"] == 800);
  CHECK(day["top_op_types"] == json::array({{{"op_type", "MatMul"}, {"hits", 2}}}));

  // After the episode ends, the same client asking again is a new lookup.
  s.now += KernelLookups::k_episode_ms + k_minute;
  s.lookup("GET", 200, uniform_key('1'), facts.get(), 1000, "reader", "", "", "10.0.0.1");
  day = s.stats.summary(StatsWindow::day);
  CHECK(day["hits"] == 3);
  CHECK(day["compile_ms_saved"] == 1200);
}

TEST_CASE("server::UsageStats does not count monitoring, and a hit rate without lookups is null") {
  Stats s;
  for (RouteId route :
       {RouteId::status, RouteId::stats_summary, RouteId::stats_timeseries, RouteId::stats_misses,
        RouteId::stats_tokens, RouteId::metrics, RouteId::healthz, RouteId::ui_root, RouteId::ui, RouteId::unknown}) {
    UsageEvent event;
    event.route = route;
    event.method = "GET";
    event.status = 200;
    event.token_name = "reader";
    s.stats.record(event);
  }
  const json day = s.stats.summary(StatsWindow::day);
  CHECK(day["requests"] == 0);
  CHECK(day["hit_rate"].is_null());
  CHECK(s.stats.tokens()["tokens"].empty());
}

TEST_CASE("server::UsageStats windows: an hour-old hit leaves the hour window but stays in the day and 30 days") {
  Stats s;
  const EntryFacts facts{"Conv2D", k_stats_scenario, 10};
  s.lookup("GET", 200, uniform_key('a'), &facts, 100);
  s.now += k_hour + k_minute;
  s.lookup("GET", 404, uniform_key('b'));
  CHECK(s.stats.summary(StatsWindow::hour)["hits"] == 0);
  CHECK(s.stats.summary(StatsWindow::hour)["misses"] == 1);
  CHECK(s.stats.summary(StatsWindow::hour)["top_op_types"].empty());
  CHECK(s.stats.summary(StatsWindow::day)["hits"] == 1);
  CHECK(s.stats.summary(StatsWindow::days30)["hits"] == 1);
  CHECK(s.stats.summary(StatsWindow::days30)["misses"] == 1);
  s.now += 25 * k_hour;
  CHECK(s.stats.summary(StatsWindow::day)["lookups"] == 0);
  CHECK(s.stats.summary(StatsWindow::days30)["lookups"] == 2);
  CHECK(s.stats.summary(StatsWindow::days30)["all_time"]["lookups"] == 2);
}

TEST_CASE("server::UsageStats timeseries has every step, oldest first, and refuses a step off the resolution") {
  Stats s;
  const EntryFacts facts{"Add", k_stats_scenario, 7};
  s.lookup("GET", 200, uniform_key('a'), &facts, 10);
  s.now += 2 * k_minute;
  s.lookup("GET", 404, uniform_key('b'));
  s.lookup("GET", 404, uniform_key('c'));

  auto series = s.stats.timeseries(StatsWindow::hour, 60);
  REQUIRE(series);
  const json& points = (*series)["points"];
  REQUIRE(points.size() == 60);
  CHECK((*series)["step_seconds"] == 60);
  CHECK((*series)["to_ms"].get<std::int64_t>() - (*series)["from_ms"].get<std::int64_t>() == k_hour);
  for (std::size_t i = 1; i < points.size(); ++i) {
    CHECK(points[i]["t_ms"].get<std::int64_t>() - points[i - 1]["t_ms"].get<std::int64_t>() == k_minute);
  }
  CHECK(points[59]["misses"] == 2);
  CHECK(points[59]["hit_rate"] == 0.0);
  CHECK(points[57]["hits"] == 1);
  CHECK(points[57]["compile_ms_saved"] == 7);
  CHECK(points[58]["lookups"] == 0);
  CHECK(points[58]["hit_rate"].is_null());

  auto coarse = s.stats.timeseries(StatsWindow::hour, 0);  // the default step: 60 s
  REQUIRE(coarse);
  CHECK((*coarse)["points"].size() == 60);
  auto month = s.stats.timeseries(StatsWindow::days30, 0);
  REQUIRE(month);
  CHECK((*month)["points"].size() == 60);
  CHECK((*month)["points"][59]["lookups"] == 3);

  CHECK_FALSE(s.stats.timeseries(StatsWindow::hour, 61));
  CHECK_FALSE(s.stats.timeseries(StatsWindow::days30, 60));  // finer than its hours
  CHECK_FALSE(s.stats.timeseries(StatsWindow::day, 30));
  CHECK(s.stats.timeseries(StatsWindow::hour, 61).error().message().find("multiple of 60") != std::string::npos);
}

TEST_CASE("server::UsageStats misses are grouped by op type and scenario with distinct clients, and leave when stored") {
  Stats s;
  for (const char* client : {"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
    s.miss(uniform_key('c'), "Conv2D", client);
  }
  s.miss(uniform_key('c'), "Conv2D", "10.0.0.1");  // the same client again
  s.miss(uniform_key('d'), "Conv2D", "10.0.0.4");
  s.miss(uniform_key('m'), "MatMul", "10.0.0.1");
  s.miss(uniform_key('m'), "MatMul", "10.0.0.1", "other-token");  // another token: another client
  s.miss(uniform_key('u'), "Gelu", "10.0.0.1");

  json misses = s.stats.misses(20);
  CHECK(misses["tracked_keys"] == 4);
  CHECK(misses["capacity"] == UsageStats::k_missed_keys);
  const json& groups = misses["groups"];
  REQUIRE(groups.size() == 3);
  CHECK(groups[0]["op_type"] == "Conv2D");
  CHECK(groups[0]["scenario"] == json::parse(k_stats_scenario));
  CHECK(groups[0]["keys"] == 2);
  CHECK(groups[0]["requests"] == 4);  // once per client: the same client again is the same lookup
  CHECK(groups[0]["clients"] == 4);
  CHECK(groups[0]["top_keys"][0]["key"] == uniform_key('c'));
  CHECK(groups[0]["top_keys"][0]["requests"] == 3);
  CHECK(groups[0]["top_keys"][0]["clients"] == 3);
  CHECK(groups[1]["op_type"] == "MatMul");
  CHECK(groups[1]["clients"] == 2);
  CHECK(s.stats.misses(1)["groups"].size() == 1);

  const EntryFacts gelu{"Gelu", k_stats_scenario, 1};
  s.upload(uniform_key('m'), 100);                    // uploaded: no longer to pre-build
  s.lookup("GET", 200, uniform_key('u'), &gelu, 10);  // found (uploaded through another replica)
  misses = s.stats.misses(20);
  CHECK(misses["tracked_keys"] == 2);
  REQUIRE(misses["groups"].size() == 1);
  CHECK(misses["groups"][0]["op_type"] == "Conv2D");
}

TEST_CASE("server::MissTable keeps at most its capacity, dropping the key asked for least, and caps clients per key") {
  MissTable table(3);
  table.record(uniform_key('a'), "A", "", 1, 10);
  table.record(uniform_key('a'), "A", "", 2, 11);
  table.record(uniform_key('b'), "B", "", 1, 12);
  table.record(uniform_key('c'), "C", "", 1, 13);
  table.record(uniform_key('d'), "D", "", 1, 14);  // full: b (1 request, oldest) goes
  CHECK(table.size() == 3);
  json groups = table.groups_json(10);
  std::set<std::string> ops;
  for (const auto& group : groups) {
    ops.insert(group["op_type"].get<std::string>());
  }
  CHECK(ops == std::set<std::string>{"A", "C", "D"});

  for (std::uint64_t client = 0; client < k_clients_per_key + 10; ++client) {
    table.record(uniform_key('e'), "E", "", client, 20);
  }
  groups = table.groups_json(10);
  CHECK(groups[0]["op_type"] == "E");
  CHECK(groups[0]["requests"] == k_clients_per_key + 10);
  CHECK(groups[0]["clients"] == k_clients_per_key);
}

TEST_CASE("server::UsageStats ignores lookup headers that are not an op type or a scenario") {
  CHECK(op_type_from_header("MatMul") == "MatMul");
  CHECK(op_type_from_header("").empty());
  CHECK(op_type_from_header(std::string(129, 'x')).empty());
  CHECK(op_type_from_header("Mat\x01Mul").empty());
  CHECK(op_type_from_header("Mat\xc3\xa9").empty());
  // Any key order in, canonical JSON out.
  CHECK(scenario_from_header(opcache::base::base64url_encode(R"({"soc":"X", "phase":"train"})")) ==
        R"({"phase":"train","soc":"X"})");
  CHECK(scenario_from_header("not base64!").empty());
  CHECK(scenario_from_header(opcache::base::base64url_encode("[1,2]")).empty());
  CHECK(scenario_from_header(opcache::base::base64url_encode("{broken")).empty());
  CHECK(scenario_from_header(std::string(2052, 'A')).empty());

  Stats s;
  s.lookup("GET", 404, uniform_key('a'), nullptr, 0, "ci", std::string(200, 'x'), "%%%");
  const json group = s.stats.misses(5)["groups"][0];
  CHECK(group["op_type"].is_null());
  CHECK(group["scenario"].is_null());
  CHECK(group["requests"] == 1);
}

TEST_CASE("server::UsageStats counts activity per token name, most recently seen first") {
  Stats s;
  const EntryFacts facts{"Add", k_stats_scenario, 5};
  s.lookup("GET", 200, uniform_key('a'), &facts, 300, "reader");
  s.now += 1000;
  s.upload(uniform_key('b'), 700, "writer");
  s.now += 1000;
  s.lookup("GET", 404, uniform_key('c'), nullptr, 0, "-");
  const json tokens = s.stats.tokens()["tokens"];
  REQUIRE(tokens.size() == 3);
  CHECK(tokens[0]["name"] == "-");
  CHECK(tokens[1]["name"] == "writer");
  CHECK(tokens[1]["uploads"] == 1);
  CHECK(tokens[1]["bytes_in"] == 700);
  CHECK(tokens[1]["last_seen_ms"] == k_start_ms + 1000);
  CHECK(tokens[2]["name"] == "reader");
  CHECK(tokens[2]["hits"] == 1);
  CHECK(tokens[2]["bytes_out"] == 300);
}

TEST_CASE("server::UsageStats saves its history and loads it back, and refuses a bad file without changing anything") {
  TempDir dir;
  Stats first;
  const EntryFacts facts{"MatMul", k_stats_scenario, 250};
  first.lookup("GET", 200, uniform_key('a'), &facts, 64);
  first.miss(uniform_key('b'), "Conv2D", "10.0.0.1");
  first.now += 2 * k_hour;
  first.upload(uniform_key('c'), 10);
  REQUIRE(first.stats.save(dir / "stats.json"));

  Stats second;
  second.now = first.now;
  REQUIRE(second.stats.load(dir / "stats.json"));
  for (auto window : {StatsWindow::hour, StatsWindow::day, StatsWindow::days30}) {
    CHECK(second.stats.summary(window) == first.stats.summary(window));
  }
  CHECK(second.stats.misses(20) == first.stats.misses(20));
  CHECK(second.stats.tokens() == first.stats.tokens());
  CHECK(*second.stats.timeseries(StatsWindow::day, 0) == *first.stats.timeseries(StatsWindow::day, 0));
  CHECK(second.stats.load(dir / "absent.json"));  // no file: nothing to load, no error

  const json before = second.stats.summary(StatsWindow::day);
  for (const std::string bad :
       {"{not json", R"({"format":"something-else","version":1})", R"({"format":"opcache-serve-stats","version":2})",
        R"({"format":"opcache-serve-stats","version":1,"total":{"hits":-1}})",
        R"({"format":"opcache-serve-stats","version":1,"minutes":[{"start_ms":1}]})",
        R"({"format":"opcache-serve-stats","version":1,"misses":{"nokey":{}}})"}) {
    INFO(bad);
    opcache::test::write_text(dir / "bad.json", bad);
    auto loaded = second.stats.load(dir / "bad.json");
    REQUIRE_FALSE(loaded);
    CHECK(loaded.error().message().find("bad.json") != std::string::npos);
    CHECK(second.stats.summary(StatsWindow::day) == before);
  }
}

TEST_CASE("server::UsageHistory moves a bad file aside instead of losing it, and saves nothing without a directory") {
  TempDir dir;
  UsageStats stats;
  opcache::test::write_text(dir / k_usage_file_name, "{garbage");
  UsageHistory history(stats, dir.path());
  CHECK(history.persisted());
  auto message = history.load();
  REQUIRE(message);
  CHECK(message->find("serve-stats.json.bad") != std::string::npos);
  CHECK(opcache::test::read_text(dir / "serve-stats.json.bad") == "{garbage");
  CHECK_FALSE(history.save());
  CHECK(opcache::base::read_file(dir / k_usage_file_name));

  UsageHistory nowhere(stats, std::nullopt);
  CHECK_FALSE(nowhere.persisted());
  CHECK_FALSE(nowhere.load());
  CHECK_FALSE(nowhere.save());
}

TEST_CASE("server::KernelLookups keeps at most its capacity of episodes, ending the least recently active") {
  KernelLookups lookups;
  std::int64_t now = k_start_ms;
  for (std::size_t i = 0; i <= KernelLookups::k_capacity; ++i) {
    CHECK(lookups.answer(std::to_string(i), 1, KernelAnswer::absent, now++).miss);
  }
  CHECK(lookups.size() <= KernelLookups::k_capacity);
  CHECK(lookups.size() >= KernelLookups::k_capacity * 8 / 10);
  // The newest episode survived: asked again, it is the same lookup.
  const std::string newest = std::to_string(KernelLookups::k_capacity);
  CHECK_FALSE(lookups.answer(newest, 1, KernelAnswer::absent, now).miss);
  // The oldest did not: a new lookup.
  CHECK(lookups.answer("0", 1, KernelAnswer::absent, now).miss);
}
