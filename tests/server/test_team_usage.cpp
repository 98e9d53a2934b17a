// The team's usage statistics (server/usage_tables, server/team_usage): two
// replicas' figures summed (per minute bucket, tokens by name, misses by
// key without the keys uploaded through either), this replica's own
// figures apart for /metrics, a restarted replica taking its object back;
// against a real moto_server, the replica's own object skipped, a stale
// one ignored, a bad one copied aside and never deleted; the replica name's
// rule and the replica label of /metrics.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/base64.hpp"
#include "remote/s3/client.hpp"
#include "remote/s3/layout.hpp"
#include "server/metrics.hpp"
#include "server/server_config.hpp"
#include "server/team_usage.hpp"
#include "server/usage_history.hpp"
#include "server/usage_stats.hpp"
#include "tests/support/usage_event.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/moto_bucket.hpp"
#include "tests/support/skip.hpp"

namespace team_usage_test {

using namespace opcache::server;
using opcache::test::MotoServer;
using opcache::test::uniform_key;
using json = nlohmann::json;

// 2026-11-24 08:00:30 UTC.
constexpr std::int64_t k_t0 = 1795507230000;
constexpr std::int64_t k_minute = 60'000;
const std::string k_team_scenario = R"({"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0"})";

// One replica's statistics on a clock the test moves.
struct Replica {
  std::int64_t now = k_t0;
  UsageStats stats{[this] { return now; }};

  void hit(const std::string& key, const EntryFacts& facts, std::uint64_t bytes, const std::string& token,
           const std::string& client) {
    UsageEvent e = opcache::test::usage_event(RouteId::entry_read, "GET", 200, key, token, client);
    e.facts = &facts;
    e.bytes_out = bytes;
    stats.record(e);
  }
  void miss(const std::string& key, const std::string& token, const std::string& client) {
    const std::string scenario = opcache::base::base64url_encode(k_team_scenario);
    UsageEvent e = opcache::test::usage_event(RouteId::entry_read, "GET", 404, key, token, client);
    e.op_type_header = "Conv2D";
    e.scenario_header = scenario;
    stats.record(e);
  }
  void upload(const std::string& key, const std::string& token) {
    UsageEvent e = opcache::test::usage_event(RouteId::entry_put, "PUT", 201, key, token, "10.0.0.9");
    e.bytes_in = 100;
    stats.record(e);
  }
  // What the bucket would hold of this replica.
  UsageTables tables() const {
    auto parsed = parse_usage_document(stats.document());
    REQUIRE(parsed.ok());
    return std::move(*parsed);
  }
};

// The figures of `replicas` as TeamUsage::refresh sums them.
std::shared_ptr<const TeamFigures> team_of(const std::vector<const Replica*>& replicas) {
  auto team = std::make_shared<TeamFigures>();
  for (const Replica* replica : replicas) {
    const UsageTables tables = replica->tables();
    add_tables(team->others, tables);
    add_upload_times(team->uploaded, tables);
    team->replicas.push_back("r");
  }
  return team;
}

const json* group_of(const json& misses, const std::string& key) {
  for (const auto& group : misses["groups"]) {
    for (const auto& top : group["top_keys"]) {
      if (top["key"] == key) {
        return &top;
      }
    }
  }
  return nullptr;
}

// A replica over the bucket: its statistics and its share in the bucket.
struct BucketReplica {
  Replica replica;
  std::unique_ptr<TeamUsage> team;
  BucketReplica(opcache::remote::S3Client& client, const std::string& name) {
    team = std::make_unique<TeamUsage>(client, name, replica.stats, [this] { return replica.now; });
  }
};


TEST_CASE("server::team usage: two replicas' figures are summed per minute, tokens by name, misses by key") {
  Replica a;
  Replica b;
  const EntryFacts facts{"MatMul", k_team_scenario, 400};
  a.hit(uniform_key('1'), facts, 1000, "ci", "10.0.0.1");
  a.miss(uniform_key('2'), "ci", "10.0.0.1");
  a.miss(uniform_key('3'), "ci", "10.0.0.1");  // uploaded through b below: no longer a miss of the team
  b.now += k_minute;
  b.hit(uniform_key('1'), facts, 1000, "ci", "10.0.0.2");
  b.miss(uniform_key('2'), "dev", "10.0.0.3");
  b.upload(uniform_key('3'), "ci");

  const UsageCounts own = a.stats.totals();
  a.stats.set_team(team_of({&b}));
  CHECK(a.stats.replica_totals().hits == own.hits);  // /metrics: this replica's alone
  const UsageCounts team = a.stats.totals();
  CHECK(team.hits == 2);
  CHECK(team.misses == 3);
  CHECK(team.uploads == 1);

  a.now = b.now;
  const json summary = a.stats.summary(StatsWindow::day);
  CHECK(summary["hits"] == 2);
  CHECK(summary["misses"] == 3);
  CHECK(summary["bytes_served"] == 2000);
  CHECK(summary["compile_ms_saved"] == 800);
  CHECK(summary["all_time"]["lookups"] == 5);
  CHECK(summary["all_time"]["since_ms"] == k_t0);
  REQUIRE(summary["top_op_types"].size() == 1);
  CHECK(summary["top_op_types"][0] == json{{"op_type", "MatMul"}, {"hits", 2}});

  // One point per minute: a's minute, then b's.
  const json series = *a.stats.timeseries(StatsWindow::hour, 60);
  const json& points = series["points"];
  REQUIRE(points.size() == 60);
  CHECK(points[58]["hits"] == 1);
  CHECK(points[58]["misses"] == 2);
  CHECK(points[59]["hits"] == 1);
  CHECK(points[59]["uploads"] == 1);

  const json tokens = a.stats.tokens()["tokens"];
  REQUIRE(tokens.size() == 2);
  CHECK(tokens[0]["name"] == "ci");  // seen last, by b
  CHECK(tokens[0]["hits"] == 2);
  CHECK(tokens[0]["uploads"] == 1);
  CHECK(tokens[1]["name"] == "dev");

  const json misses = a.stats.misses(20);
  CHECK(misses["tracked_keys"] == 1);
  const json* missed = group_of(misses, uniform_key('2'));
  REQUIRE(missed != nullptr);
  CHECK((*missed)["requests"] == 2);
  CHECK((*missed)["clients"] == 2);
  CHECK(group_of(misses, uniform_key('3')) == nullptr);

  a.stats.set_team(nullptr);  // the team's figures gone: only a's own again
  CHECK(a.stats.totals().hits == own.hits);
}

TEST_CASE("server::team usage: a key uploaded through this replica leaves the misses the others counted") {
  Replica a;
  Replica b;
  b.miss(uniform_key('4'), "ci", "10.0.0.2");
  a.stats.set_team(team_of({&b}));
  REQUIRE(group_of(a.stats.misses(20), uniform_key('4')) != nullptr);
  a.now += 1000;
  a.upload(uniform_key('4'), "ci");
  CHECK(group_of(a.stats.misses(20), uniform_key('4')) == nullptr);
  // A miss after the upload (the entry deleted since) counts again.
  b.now = a.now + 1000;
  b.miss(uniform_key('4'), "ci", "10.0.0.5");
  a.stats.set_team(team_of({&b}));
  CHECK(group_of(a.stats.misses(20), uniform_key('4')) != nullptr);
}

TEST_CASE("server::team usage: a restarted replica adds its object back to what it counted since it started") {
  Replica before;
  const EntryFacts facts{"MatMul", k_team_scenario, 10};
  before.hit(uniform_key('5'), facts, 10, "ci", "10.0.0.1");
  before.miss(uniform_key('6'), "ci", "10.0.0.1");
  const UsageTables saved = before.tables();

  Replica after;
  after.now = k_t0 + 5 * k_minute;
  after.hit(uniform_key('7'), facts, 10, "ci", "10.0.0.1");  // counted before the object was read back
  after.stats.absorb(saved);
  const UsageCounts total = after.stats.replica_totals();
  CHECK(total.hits == 2);
  CHECK(total.misses == 1);
  const json summary = after.stats.summary(StatsWindow::day);
  CHECK(summary["all_time"]["since_ms"] == k_t0);
  CHECK(summary["hits"] == 2);
  CHECK(group_of(after.stats.misses(20), uniform_key('6')) != nullptr);
}

TEST_CASE("server::team usage documents: one without uploads is read, a malformed upload is refused") {
  Replica a;
  a.upload(uniform_key('8'), "ci");
  json document = a.stats.document();
  CHECK(document["uploads"] == json{{uniform_key('8'), k_t0}});
  document.erase("uploads");  // written before revision 9
  CHECK(parse_usage_document(document).ok());
  document["uploads"] = {{"not-a-key", 1}};
  auto refused = parse_usage_document(document);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("uploads") != std::string::npos);
}

TEST_CASE("server::replica names: visible ASCII without '/', at most 100 bytes, checked with the settings") {
  CHECK_FALSE(replica_name_problem("node-7:8080").has_value());
  CHECK_FALSE(replica_name_problem(std::string(100, 'r')).has_value());
  CHECK(replica_name_problem("").has_value());
  CHECK(replica_name_problem(std::string(101, 'r')).has_value());
  CHECK(replica_name_problem("a/b").has_value());
  CHECK(replica_name_problem("a b").has_value());
  CHECK(replica_name_problem("a\nb").has_value());
  const std::string fallback = default_replica_name(8123);
  CHECK_FALSE(replica_name_problem(fallback).has_value());
  CHECK(fallback.ends_with(":8123"));

  ServerConfig config;
  config.storage = "/srv/opcache";
  config.listen = {{"127.0.0.1", 0}};
  config.replica = "a/b";
  auto refused = validate_server_config(config);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == opcache::ErrorCode::usage);
  CHECK(refused.error().message().find("--replica") != std::string::npos);
  config.replica = "";
  CHECK(validate_server_config(config).ok());
}

TEST_CASE("server::Metrics labels every series with the replica, escaped, and counts its own kernels") {
  Metrics metrics;
  metrics.record_request(RouteId::entry_read, "GET", 200, 0.001, 0, 10);
  UsageCounts team;
  team.hits = 9;
  CHECK(metrics.render({}, {}, team, 1).find("opcache_cache_hits_total 1\n") != std::string::npos);

  UsageCounts own;
  own.hits = 4;
  metrics.set_replica("node\"7\\", [own] { return own; });
  const std::string text = metrics.render({}, {}, team, 1);
  const std::string label = R"(replica="node\"7\\")";
  CHECK(text.find("opcache_cache_hits_total{" + label + "} 1\n") != std::string::npos);
  CHECK(text.find(R"(opcache_http_requests_total{route="entry",method="GET",status="200",)" + label + "} 1\n") !=
        std::string::npos);
  CHECK(text.find(R"(opcache_kernel_lookups{result="hit",)" + label + "} 4\n") != std::string::npos);
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    if (!line.empty() && line[0] != '#') {
      CHECK_MESSAGE(line.find(label) != std::string::npos, line);
    }
    start = end + 1;
  }
}

TEST_CASE("server::TeamUsage over a bucket: saved, read back, the own object skipped and a stale one ignored") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  auto client = opcache::test::moto_bucket_client("opcache-team-usage", "merge");
  BucketReplica a(client, "node-a:1");
  BucketReplica b(client, "node-b:1");
  BucketReplica gone(client, "node-gone:1");
  const EntryFacts facts{"MatMul", k_team_scenario, 10};

  CHECK_FALSE(a.team->load().has_value());  // nothing in the bucket yet
  CHECK_FALSE(b.team->load().has_value());
  CHECK_FALSE(gone.team->load().has_value());
  gone.replica.now = k_t0 - TeamUsage::k_retention_ms - k_minute;
  gone.replica.hit(uniform_key('a'), facts, 10, "old", "10.0.0.9");
  REQUIRE_FALSE(gone.team->save().has_value());

  a.replica.hit(uniform_key('a'), facts, 10, "ci", "10.0.0.1");
  b.replica.miss(uniform_key('b'), "ci", "10.0.0.2");
  REQUIRE_FALSE(a.team->save().has_value());
  REQUIRE_FALSE(b.team->save().has_value());
  CHECK(client.get_text(opcache::remote::s3_usage_name("node-a:1"), 1 << 20)->has_value());

  const auto notes = a.team->refresh();
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("1 other replica(s): node-b:1") != std::string::npos);
  const UsageCounts team = a.replica.stats.totals();
  CHECK(team.hits == 1);    // a's own, counted once though its object is in the bucket too; not gone's
  CHECK(team.misses == 1);  // b's
  CHECK(a.team->refresh().empty());  // within k_refresh_ms: nothing read

  // b counts more and saves; a sees it at its next refresh.
  b.replica.hit(uniform_key('a'), facts, 10, "ci", "10.0.0.2");
  REQUIRE_FALSE(b.team->save().has_value());
  a.replica.now += TeamUsage::k_refresh_ms;
  CHECK(a.team->refresh().empty());  // the same replicas
  CHECK(a.replica.stats.totals().hits == 2);

  // A restart of a under its name takes its figures back.
  BucketReplica again(client, "node-a:1");
  again.replica.now = a.replica.now;
  const auto read_back = again.team->load();
  REQUIRE(read_back.has_value());
  CHECK(read_back->find("read back") != std::string::npos);
  CHECK(again.replica.stats.replica_totals().hits == 1);
}

TEST_CASE("server::TeamUsage keeps a bad object aside, starts empty, and leaves another replica's bad object out") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  auto client = opcache::test::moto_bucket_client("opcache-team-usage", "bad");
  const std::string own = opcache::remote::s3_usage_name("node-a:1");
  REQUIRE(client.put_text(own, "{\"format\": \"opcache-serve-stats\", \"version\": 99}",
                          opcache::remote::S3WriteCondition::always()).ok());
  REQUIRE(client.put_text(opcache::remote::s3_usage_name("node-b:1"), "{garbage",
                          opcache::remote::S3WriteCondition::always()).ok());
  BucketReplica a(client, "node-a:1");
  const auto note = a.team->load();
  REQUIRE(note.has_value());
  CHECK(note->find("start empty") != std::string::npos);
  CHECK(note->find(own + ".bad") != std::string::npos);
  auto aside = client.get_text(own + ".bad", 1 << 20);
  REQUIRE(aside.ok());
  REQUIRE(aside->has_value());
  CHECK((*aside)->body.find("\"version\": 99") != std::string::npos);
  CHECK(a.replica.stats.replica_totals().lookups == 0);

  const auto notes = a.team->refresh();
  REQUIRE(notes.size() == 1);  // b's object, left out (the .bad copy is no replica's)
  CHECK(notes[0].find("left out") != std::string::npos);
  CHECK(a.replica.stats.totals().lookups == 0);
  a.replica.now += TeamUsage::k_refresh_ms;
  CHECK(a.team->refresh().empty());  // said once per version of the object
  REQUIRE(client.get_text(opcache::remote::s3_usage_name("node-b:1"), 1 << 20)->has_value());  // never deleted

  // The next save replaces the bad object with a good one.
  REQUIRE_FALSE(a.team->save().has_value());
  BucketReplica again(client, "node-a:1");
  const auto read_back = again.team->load();
  REQUIRE(read_back.has_value());
  CHECK(read_back->find("read back") != std::string::npos);
}

}  // namespace team_usage_test
