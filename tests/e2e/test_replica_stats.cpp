// Statistics across replicas (docs/operations.md "Statistics across
// replicas"): two real `opcache serve` processes over one moto bucket, each
// writing its usage counters every second (--stats-interval 1). Clients hit
// and miss through each; the summary, /v1/status and `opcache stats
// --remote` of either replica then show the team's totals, /metrics of each
// only its own, labelled with its replica name; a replica stopped with
// SIGTERM and started again under the same --replica keeps its counts.
// Skipped with the reason when moto_server is not installed.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/children.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/files.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

namespace replica_stats_test {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace opcache::test;
using namespace std::chrono_literals;

// Generous: a replica writes every second and reads the others every two;
// this only catches a hang.
constexpr auto k_team_wait = 60s;

// Two replicas over one bucket, with a read token per client and a writer.
struct ReplicaTeam {
  TempDir dir;
  std::string storage;
  std::unique_ptr<ServerProcess> a;
  std::unique_ptr<ServerProcess> b;

  static constexpr const char* k_clients[] = {"c1", "c2", "c3"};
  static std::string token_of(const std::string& client) { return std::string(k_read_token) + "-" + client; }

  ReplicaTeam() {
    use_moto_test_credentials();
    storage = "s3://opcache-replica-stats/team?endpoint=" + MotoServer::shared().endpoint();
    std::string tokens = token_line(k_write_token, "writer", "read,write") + token_line(k_admin_token, "boss", "admin");
    for (const char* client : k_clients) {
      tokens += token_line(token_of(client), client, "read");
    }
    write_text(dir / "tokens", tokens);
    write_text(dir / "reader-token", token_of("c1"));
    a = start("a");
    b = start("b");
  }

  std::unique_ptr<ServerProcess> start(const std::string& name) const {
    return std::make_unique<ServerProcess>(
        storage, std::vector<std::string>{"--tokens", (dir / "tokens").string(), "--replica", name,
                                          "--stats-interval", "1", "--temp-dir", dir.path().string()});
  }

  static HttpResponse call(const ServerProcess& server, const std::string& method, const std::string& path,
                           const std::string& token, const std::string& body = {}) {
    return http_request(method, server.base_url() + path, {"Authorization: Bearer " + token}, body);
  }
  static json get_json(const ServerProcess& server, const std::string& path) {
    auto response = call(server, "GET", path, k_admin_token);
    REQUIRE_MESSAGE(response.status == 200, response.body);
    return json::parse(response.body);
  }
  static std::string metrics(const ServerProcess& server) { return call(server, "GET", "/metrics", k_admin_token).body; }
};

// The value of `sample` (its text up to the value) in a /metrics text; -1 when absent.
double metric_of(const std::string& text, const std::string& sample) {
  const std::regex line("^" + std::regex_replace(sample, std::regex(R"([{}"=+.\\])"), R"(\$&)") + " ([0-9.e+]+)$",
                        std::regex::multiline);
  std::smatch match;
  return std::regex_search(text, match, line) ? std::stod(match[1]) : -1;
}

// Whether the all-time figures of `server`'s summary are `hits` and `misses`.
bool shows_team(const ServerProcess& server, int hits, int misses) {
  const json all_time = ReplicaTeam::get_json(server, "/v1/stats/summary")["all_time"];
  return all_time["hits"] == hits && all_time["misses"] == misses;
}

TEST_CASE("e2e::replicas over one bucket: each one's statistics show the team, /metrics its own, a restart keeps them") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  ReplicaTeam team;
  TempDir temp;
  const auto stored = make_cheap_kernel(temp / "k", 1, 500);
  REQUIRE(ReplicaTeam::call(*team.a, "PUT", "/v1/entries/" + stored.key, k_write_token, stored.bundle).status == 201);
  const std::string absent(64, 'd');

  // Through a: c1 hits, c2 misses. Through b: c2 and c3 hit, c3 misses. Each
  // client and kernel once: 3 hits and 2 misses for the team.
  auto lookup = [&](const ServerProcess& server, const std::string& client, const std::string& key) {
    return ReplicaTeam::call(server, "GET", "/v1/entries/" + key, ReplicaTeam::token_of(client)).status;
  };
  CHECK(lookup(*team.a, "c1", stored.key) == 200);
  CHECK(lookup(*team.a, "c2", absent) == 404);
  CHECK(lookup(*team.b, "c2", stored.key) == 200);
  CHECK(lookup(*team.b, "c3", stored.key) == 200);
  CHECK(lookup(*team.b, "c3", absent) == 404);

  for (const ServerProcess* replica : {team.a.get(), team.b.get()}) {
    wait_until([&] { return shows_team(*replica, 3, 2); }, k_team_wait, "the team's figures on " + replica->base_url());
    const json summary = ReplicaTeam::get_json(*replica, "/v1/stats/summary");
    CHECK(summary["hits"] == 3);
    CHECK(summary["misses"] == 2);
    CHECK(summary["compile_ms_saved"] == 1500);
    CHECK(summary["replica"] == json{{"shared_storage", true}, {"history_persisted", true}});
    const json status = ReplicaTeam::get_json(*replica, "/v1/status");
    CHECK(status["hits"] == 3);
    CHECK(status["misses"] == 2);
    const json misses = ReplicaTeam::get_json(*replica, "/v1/stats/misses");
    REQUIRE(misses["groups"].size() == 1);
    CHECK(misses["groups"][0]["requests"] == 2);  // c2 through a, c3 through b
    CHECK(misses["groups"][0]["clients"] == 2);
    const json tokens = ReplicaTeam::get_json(*replica, "/v1/stats/tokens")["tokens"];
    std::map<std::string, json> by_name;
    for (const auto& token : tokens) {
      by_name[token["name"]] = token;
    }
    CHECK(by_name["c2"]["hits"] == 1);
    CHECK(by_name["c2"]["misses"] == 1);
    CHECK(by_name["writer"]["uploads"] == 1);
  }

  // /metrics: each replica's own kernels, with its name.
  const std::string metrics_a = ReplicaTeam::metrics(*team.a);
  const std::string metrics_b = ReplicaTeam::metrics(*team.b);
  CHECK(metric_of(metrics_a, R"(opcache_kernel_lookups{result="hit",replica="a"})") == 1);
  CHECK(metric_of(metrics_a, R"(opcache_kernel_lookups{result="miss",replica="a"})") == 1);
  CHECK(metric_of(metrics_b, R"(opcache_kernel_lookups{result="hit",replica="b"})") == 2);
  CHECK(metric_of(metrics_b, R"(opcache_kernel_lookups{result="miss",replica="b"})") == 1);
  CHECK(metrics_a.find("replica=\"b\"") == std::string::npos);
  CHECK(metrics_b.find("replica=\"a\"") == std::string::npos);

  // `opcache stats --remote` reads the merged documents as it reads any.
  CliRunner viewer(temp.path(), temp / "viewer");
  const auto document = viewer.run_json({"stats", "--remote", team.b->base_url(), "--token-file",
                                         (team.dir / "reader-token").string()});
  CHECK(document["summary"]["hits"] == 3);
  CHECK(document["summary"]["misses"] == 2);
  CHECK(document["misses"]["groups"].size() == 1);

  // b stops (its counters written at the stop) and starts again under its name: nothing is lost.
  REQUIRE(team.b->stop() == 0);
  CHECK(team.b->log_text().find("stopped") != std::string::npos);
  team.b = team.start("b");
  CHECK(team.b->log_text().find("read back from the bucket") != std::string::npos);
  const std::string restarted = ReplicaTeam::metrics(*team.b);
  CHECK(metric_of(restarted, R"(opcache_kernel_lookups{result="hit",replica="b"})") == 2);
  CHECK(metric_of(restarted, R"(opcache_kernel_lookups{result="miss",replica="b"})") == 1);
  CHECK(lookup(*team.b, "c1", absent) == 404);  // one more miss, through the restarted b
  for (const ServerProcess* replica : {team.a.get(), team.b.get()}) {
    wait_until([&] { return shows_team(*replica, 3, 3); }, k_team_wait, "the team's figures after b's restart");
  }
}

}  // namespace replica_stats_test
