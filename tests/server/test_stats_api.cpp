// The statistics API (GET /v1/stats/*) and the dashboard's files (GET /ui/)
// on a real `opcache serve`: figures from real uploads, hits and misses
// (with the lookup headers), each body valid against its schema, scopes
// (tokens need admin), parameters checked, the page served with its CSP and
// its no-JavaScript tables only to a request that may read, the history
// kept over a graceful restart, a bad history file moved aside, and S3
// storage saying that its figures are this replica's own.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/base64.hpp"
#include "opcache_test_paths.hpp"
#include "server/dashboard.hpp"
#include "tests/support/api_schema.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

using namespace opcache::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t k_build_ms = 1234;
const std::string k_client_scenario =
    R"({"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0"})";

// A server with a read ("reader"), a write ("writer") and an admin ("boss") token.
struct StatsServer {
  TempDir dir;
  fs::path storage;
  std::unique_ptr<ServerProcess> process;

  explicit StatsServer(std::vector<std::string> extra = {}, fs::path storage_in = {})
      : storage(storage_in.empty() ? dir / "storage" : std::move(storage_in)) {
    write_text(dir / "tokens", token_line(k_read_token, "reader", "read") +
                                   token_line(k_write_token, "writer", "write") +
                                   token_line(k_admin_token, "boss", "admin"));
    extra.insert(extra.begin(), {"--tokens", (dir / "tokens").string()});
    start(extra);
  }
  void start(const std::vector<std::string>& extra) { process = std::make_unique<ServerProcess>(storage, extra); }

  HttpResponse request(const std::string& method, const std::string& path, const char* token = k_read_token,
                       std::vector<std::string> headers = {}, const std::string& body = {}) const {
    if (token != nullptr) {
      headers.push_back(std::string("Authorization: Bearer ") + token);
    }
    return http_request(method, process->base_url() + path, headers, body);
  }
  json get(const std::string& path, const std::string& schema, const char* token = k_read_token) const {
    return checked_json(request("GET", path, token), schema);
  }
  void upload(const TestKernel& kernel) const {
    REQUIRE(request("PUT", "/v1/entries/" + kernel.key, k_write_token, {}, kernel.bundle).status == 201);
  }
  // A lookup of `key` that misses, saying what it was for.
  void miss(const std::string& key, const std::string& op_type, const char* token = k_read_token) const {
    auto response = request(
        "GET", "/v1/entries/" + key, token,
        {"X-Opcache-Op-Type: " + op_type, "X-Opcache-Scenario: " + opcache::base::base64url_encode(k_client_scenario)});
    REQUIRE(response.status == 404);
  }
};

// What a summary says, for comparing two of them.
json traffic(const json& summary) {
  json out = summary["all_time"];
  out.erase("hit_rate");
  return out;
}

}  // namespace

TEST_CASE("server::/v1/stats answers from real uploads, hits and misses, per the schemas, and equals /v1/status") {
  StatsServer server;
  TempDir temp;
  const auto kernel = make_cheap_kernel(temp / "k", 1, k_build_ms);
  server.upload(kernel);
  for (int i = 0; i < 2; ++i) {
    REQUIRE(server.request("GET", "/v1/entries/" + kernel.key).body == kernel.bundle);
  }
  REQUIRE(server.request("HEAD", "/v1/entries/" + kernel.key, k_admin_token).status == 200);
  for (int i = 0; i < 3; ++i) {
    server.miss(uniform_key('c'), "Conv2D");
  }
  server.miss(uniform_key('d'), "Conv2D", k_admin_token);
  server.miss(uniform_key('a'), "MatMul");

  const json summary = server.get("/v1/stats/summary", "stats-summary-response.schema.json");
  CHECK(summary["window"] == "day");
  // Kernels, once per client (token and address): the reader's two GETs are one hit, the boss's HEAD
  // another; the reader's three misses of c are one.
  CHECK(summary["requests"] == 9);
  CHECK(summary["lookups"] == 5);
  CHECK(summary["hits"] == 2);
  CHECK(summary["misses"] == 3);
  CHECK(summary["hit_rate"] == doctest::Approx(2.0 / 5));
  CHECK(summary["bytes_served"] == 2 * kernel.bundle.size());
  CHECK(summary["compile_ms_saved"] == k_build_ms);
  CHECK(summary["uploads"] == 1);
  CHECK(summary["bytes_uploaded"] == kernel.bundle.size());
  CHECK(summary["top_op_types"] == json::array({{{"op_type", "add"}, {"hits", 2}}}));
  CHECK(summary["storage"]["kind"] == "local");
  CHECK(summary["storage"]["entries"] == 1);
  CHECK(summary["storage"]["bytes"] == kernel.bundle.size());
  CHECK(summary["replica"] == json{{"shared_storage", false}, {"history_persisted", true}});
  CHECK(summary["all_time"]["lookups"] == 5);

  const json status = server.get("/v1/status", "status-response.schema.json");
  CHECK(status["hits"] == summary["hits"]);
  CHECK(status["misses"] == summary["misses"]);
  CHECK(status["entries"] == summary["storage"]["entries"]);
  CHECK(status["storage"] == "local");

  const json misses = server.get("/v1/stats/misses", "stats-misses-response.schema.json");
  CHECK(misses["tracked_keys"] == 3);
  REQUIRE(misses["groups"].size() == 2);
  REQUIRE(misses["groups"][0]["top_keys"].size() == 2);
  CHECK(misses["groups"][0]["op_type"] == "Conv2D");
  CHECK(misses["groups"][0]["scenario"] == json::parse(k_client_scenario));
  CHECK(misses["groups"][0]["requests"] == 2);  // c by the reader (three GETs, one lookup), d by the boss
  CHECK(misses["groups"][0]["keys"] == 2);
  CHECK(misses["groups"][0]["clients"] == 2);  // reader and boss, from one address
  std::set<std::string> top_keys;
  for (const auto& item : misses["groups"][0]["top_keys"]) {
    top_keys.insert(item["key"].get<std::string>());
  }
  CHECK(top_keys == std::set<std::string>{uniform_key('c'), uniform_key('d')});
  CHECK(misses["groups"][1]["op_type"] == "MatMul");

  const json series = server.get("/v1/stats/timeseries?window=hour", "stats-timeseries-response.schema.json");
  CHECK(series["points"].size() == 60);
  std::int64_t lookups = 0;
  std::int64_t saved = 0;
  for (const auto& point : series["points"]) {
    lookups += point["lookups"].get<std::int64_t>();
    saved += point["compile_ms_saved"].get<std::int64_t>();
  }
  CHECK(lookups == 5);
  CHECK(saved == k_build_ms);

  const json tokens = server.get("/v1/stats/tokens", "stats-tokens-response.schema.json", k_admin_token);
  std::map<std::string, json> by_name;
  for (const auto& token : tokens["tokens"]) {
    by_name[token["name"]] = token;
  }
  REQUIRE(by_name.size() == 3);
  CHECK(by_name["writer"]["uploads"] == 1);
  CHECK(by_name["reader"]["hits"] == 1);
  CHECK(by_name["reader"]["misses"] == 2);
  CHECK(by_name["boss"]["lookups"] == 2);

  // No token and no path in any answer.
  for (const auto* body : {&summary, &status, &misses, &series, &tokens}) {
    const std::string text = body->dump();
    for (const char* secret : {k_read_token, k_write_token, k_admin_token}) {
      CHECK(text.find(secret) == std::string::npos);
    }
    CHECK(text.find(server.dir.path().string()) == std::string::npos);
  }
}

TEST_CASE("server::/v1/stats/tokens needs the admin scope, and the other statistics the read scope") {
  StatsServer server;
  CHECK(server.request("GET", "/v1/stats/tokens", k_read_token).status == 403);
  CHECK(server.request("GET", "/v1/stats/tokens", k_write_token).status == 403);
  CHECK(server.request("GET", "/v1/stats/tokens", nullptr).status == 401);
  CHECK(server.request("GET", "/v1/stats/summary", nullptr).status == 401);
  CHECK(server.request("GET", "/v1/stats/misses", k_read_token).status == 200);

  StatsServer anonymous({"--anonymous-read"});
  CHECK(anonymous.request("GET", "/v1/stats/summary", nullptr).status == 200);
  CHECK(anonymous.request("GET", "/v1/stats/tokens", nullptr).status == 401);
}

TEST_CASE("server::/v1/stats parameters are checked, with a 400 naming the parameter") {
  StatsServer server;
  const std::pair<std::string, std::string> cases[] = {
      {"/v1/stats/summary?window=week", "window"},      {"/v1/stats/summary?limit=3", "limit"},
      {"/v1/stats/timeseries?window=30d&step=60", "step"}, {"/v1/stats/timeseries?step=61", "step"},
      {"/v1/stats/timeseries?step=x", "step"},           {"/v1/stats/misses?limit=0", "limit"},
      {"/v1/stats/misses?limit=1001", "limit"},          {"/v1/stats/tokens?window=day", "window"},
  };
  for (const auto& [path, parameter] : cases) {
    CAPTURE(path);
    const auto response = server.request("GET", path, k_admin_token);
    CHECK(response.status == 400);
    const json body = checked_json(response, "error.schema.json");
    CHECK(body["error"] == "bad_request");
    CHECK(body["message"].get<std::string>().find(parameter) != std::string::npos);
  }
  CHECK(server.request("GET", "/v1/stats/keys").status == 404);
  CHECK(server.request("POST", "/v1/stats/summary").status == 405);
  CHECK(server.request("GET", "/v1/stats/timeseries?window=30d&step=86400").status == 200);
}

TEST_CASE("server::/ui/ serves the embedded page without a token, with its CSP, and its tables only to who may read") {
  StatsServer server;
  TempDir temp;
  const auto kernel = make_cheap_kernel(temp / "k", 2, 10);
  server.upload(kernel);
  server.miss(uniform_key('e'), "Softmax");

  const auto moved = server.request("GET", "/ui", nullptr);
  CHECK(moved.status == 301);
  CHECK(moved.header("location") == "/ui/");

  const auto page = server.request("GET", "/ui/", nullptr);
  REQUIRE(page.status == 200);
  CHECK(page.header("content-type") == "text/html; charset=utf-8");
  CHECK(page.header("content-security-policy") == opcache::server::k_ui_content_security_policy);
  CHECK(page.header("x-content-type-options") == "nosniff");
  CHECK(page.body.find("needs a token") != std::string::npos);
  CHECK(page.body.find("<td>Entries stored</td>") == std::string::npos);  // the page's own tables are empty shells
  CHECK(page.body.find(std::string(opcache::server::k_noscript_marker)) == std::string::npos);

  const auto with_token = server.request("GET", "/ui/", k_read_token);
  REQUIRE(with_token.status == 200);
  CHECK(with_token.body.find("<td>Softmax</td>") != std::string::npos);
  CHECK(with_token.body.find("<tr><td>Entries stored</td><td>1</td></tr>") != std::string::npos);

  StatsServer anonymous({"--anonymous-read"});
  CHECK(anonymous.request("GET", "/ui/", nullptr).body.find("<td>Entries stored</td>") != std::string::npos);

  for (const char* file : {"app.js", "style.css"}) {
    CAPTURE(file);
    const auto asset = server.request("GET", std::string("/ui/") + file, nullptr);
    CHECK(asset.status == 200);
    CHECK(asset.body == read_text(fs::path(OPCACHE_SOURCE_DIR) / "server" / "ui" / file));
  }
  CHECK(server.request("GET", "/ui/secrets.txt", nullptr).status == 404);
  CHECK(server.request("GET", "/ui/../v1/status", nullptr).status != 200);
  // The page's own requests do not count as traffic.
  CHECK(server.get("/v1/stats/summary", "stats-summary-response.schema.json")["requests"] == 2);
}

TEST_CASE("server::the usage history survives a graceful restart over local storage, and a bad file is moved aside") {
  StatsServer server;
  TempDir temp;
  const auto kernel = make_cheap_kernel(temp / "k", 3, 77);
  server.upload(kernel);
  REQUIRE(server.request("GET", "/v1/entries/" + kernel.key).status == 200);
  server.miss(uniform_key('f'), "LayerNorm");
  const json before = server.get("/v1/stats/summary", "stats-summary-response.schema.json");
  const json misses_before = server.get("/v1/stats/misses", "stats-misses-response.schema.json");
  REQUIRE(server.process->stop() == 0);
  REQUIRE(fs::exists(server.storage / "serve-stats.json"));

  server.start({"--tokens", (server.dir / "tokens").string()});
  const json after = server.get("/v1/stats/summary", "stats-summary-response.schema.json");
  CHECK(traffic(after) == traffic(before));
  CHECK(after["compile_ms_saved"] == 77);
  CHECK(after["top_op_types"] == before["top_op_types"]);
  CHECK(server.get("/v1/stats/misses", "stats-misses-response.schema.json") == misses_before);
  REQUIRE(server.process->stop() == 0);

  write_text(server.storage / "serve-stats.json", "{\"format\": \"opcache-serve-stats\", \"version\": 99}");
  server.start({"--tokens", (server.dir / "tokens").string()});
  CHECK(server.process->log_text().find("serve-stats.json.bad") != std::string::npos);
  CHECK(read_text(server.storage / "serve-stats.json.bad").find("\"version\": 99") != std::string::npos);
  const json fresh = server.get("/v1/stats/summary", "stats-summary-response.schema.json");
  CHECK(fresh["all_time"]["lookups"] == 0);
  CHECK(server.request("GET", "/v1/entries/" + kernel.key).status == 200);  // the entries themselves are untouched
}

TEST_CASE("server::over s3:// storage the statistics are the team's, kept in the bucket") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  use_moto_test_credentials();
  TempDir temp;
  StatsServer server({}, "s3://opcache-serve-stats/p?endpoint=" + MotoServer::shared().endpoint());
  const auto kernel = make_cheap_kernel(temp / "k", 4, 900);
  server.upload(kernel);
  REQUIRE(server.request("GET", "/v1/entries/" + kernel.key).body == kernel.bundle);
  const json summary = server.get("/v1/stats/summary", "stats-summary-response.schema.json");
  CHECK(summary["replica"] == json{{"shared_storage", true}, {"history_persisted", true}});
  CHECK(summary["storage"]["kind"] == "s3");
  CHECK(summary["storage"]["entries"].is_null());
  CHECK(summary["compile_ms_saved"] == 900);  // read from the bundle's manifest
  REQUIRE(summary["top_op_types"].size() == 1);
  CHECK(summary["top_op_types"][0]["op_type"] == "add");
  const json status = server.get("/v1/status", "status-response.schema.json");
  CHECK(status["storage"] == "s3 opcache-serve-stats/p");
}

TEST_CASE("server::a storage failure is answered 500 without the storage's paths, which go to the server's log") {
  StatsServer server;
  TempDir temp;
  const auto kernel = make_cheap_kernel(temp / "k", 5);
  server.upload(kernel);
  // Tamper with the store: the entry's object becomes a directory.
  fs::path object;
  for (const auto& item : fs::recursive_directory_iterator(server.storage / "objects")) {
    if (item.is_regular_file()) {
      object = item.path();
    }
  }
  REQUIRE_FALSE(object.empty());
  fs::remove(object);
  fs::create_directory(object);

  const auto failed = server.request("GET", "/v1/entries/" + kernel.key);
  CHECK(failed.status == 500);
  const json body = checked_json(failed, "error.schema.json");
  CHECK(body["error"] == "internal");
  CHECK(failed.body.find(server.storage.string()) == std::string::npos);
  CHECK(failed.body.find("/objects") == std::string::npos);
  CHECK(eventually([&] {
    const std::string log = server.process->log_text();
    return log.find("storage failure: the object of " + kernel.key) != std::string::npos &&
           log.find((server.storage / "objects").string()) != std::string::npos;
  }));
}
