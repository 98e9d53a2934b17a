// `opcache stats --remote URL` (cli/remote_stats): a real `opcache serve`
// filled through the CLI (a push, hits and misses naming their op types)
// shows the same figures in the terminal as its /v1/stats/summary, and
// --json passes the server's documents through; a canned server checks the
// exact text and the window; 401 without a token, an older server (404)
// and a URL that is no server are clear errors.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"
#include "tests/support/tokens.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace opcache::test;

namespace {

// `opcache serve --tokens` with one read token (reader.token), on a storage
// that may be filled (storage()) before start().
struct ReaderStatsServer {
  TempDir dir;
  fs::path reader_token = dir / "reader.token";
  std::unique_ptr<ServerProcess> process;

  /// The server's storage as a CLI cache, to put entries into before start().
  CliRunner storage() const { return CliRunner(dir.path(), dir / "storage"); }

  void start() {
    write_text(reader_token, std::string(k_read_token) + "\n");
    write_text(dir / "tokens", token_line(k_read_token, "reader", "read"));
    process = std::make_unique<ServerProcess>(dir / "storage",
                                              std::vector<std::string>{"--tokens", (dir / "tokens").string()});
  }
  std::string url() const { return process->base_url(); }

  /// GET `path` with the read token, parsed; REQUIREs 200.
  json get(const std::string& path) const {
    auto response = http_request("GET", url() + path, {std::string("Authorization: Bearer ") + k_read_token});
    INFO(response.body);
    REQUIRE(response.status == 200);
    return json::parse(response.body);
  }
};

// A summary and misses as the contract shows them (docs/protocol.md "Statistics").
const json k_canned_summary = json::parse(R"({
  "window": "hour", "window_seconds": 3600, "from_ms": 1795849200000, "to_ms": 1795852800000,
  "requests": 42, "lookups": 30, "hits": 21, "misses": 9, "hit_rate": 0.7,
  "bytes_served": 3145728, "uploads": 4, "bytes_uploaded": 10240, "compile_ms_saved": 95000,
  "all_time": {"since_ms": 1795766400000, "requests": 420, "lookups": 300, "hits": 240, "misses": 60,
               "hit_rate": 0.8, "bytes_served": 0, "uploads": 0, "bytes_uploaded": 0, "compile_ms_saved": 7200000},
  "storage": {"kind": "local", "entries": 12, "bytes": 2048, "limit_bytes": 524288000, "evictions": 3},
  "top_op_types": [{"op_type": "MatMul", "hits": 15}, {"op_type": null, "hits": 6}],
  "top_scenarios": [],
  "replica": {"shared_storage": false, "history_persisted": true}
})");
const json k_canned_misses = json::parse(R"({"tracked_keys": 3, "capacity": 10000, "groups": [
  {"op_type": "Conv2D", "scenario": {"device_mode": "single", "phase": "train", "toolchain": "8.0", "soc": "Ascend910B1"},
   "keys": 2, "requests": 9, "clients": 3, "top_keys": []}]})");

// A stand-in server answering the canned documents (or `status` for both).
FaultServer canned_server(int status = 200) {
  return FaultServer([status](const FaultRequest& request) {
    if (status != 200) {
      return FaultReply::status(status, R"({"error":"not_found","message":"no route"})");
    }
    if (request.target.rfind("/v1/stats/summary", 0) == 0) {
      return FaultReply::ok(k_canned_summary.dump());
    }
    if (request.target.rfind("/v1/stats/misses", 0) == 0) {
      return FaultReply::ok(k_canned_misses.dump());
    }
    return FaultReply::status(404, "{}");
  });
}

std::string row(const std::string& label, const std::string& value) {
  char line[256];
  std::snprintf(line, sizeof line, "%-22s %s", label.c_str(), value.c_str());
  return line;
}

}  // namespace

TEST_CASE("cli::stats --remote: a real server's figures in the terminal and, with --json, its documents") {
  TempDir temp;
  ReaderStatsServer server;
  const KernelTriple stored = make_kernel(temp / "k", "square", 21);
  const KernelTriple missing = make_kernel(temp / "k", "relu", 22);
  const std::string op_type = json::parse(stored.descriptor_json)["op_type"];
  const std::string missing_op = json::parse(missing.descriptor_json)["op_type"];
  server.storage().put(stored);
  server.start();

  // Two gets of one kernel and one of another, each naming its op type (opcache get --desc): one
  // machine (one token, one address), so one hit and one miss (a kernel counts once per client).
  auto get = [&](const KernelTriple& kernel, const std::string& cache) {
    CliRunner consumer(temp.path(), temp / cache);
    return consumer.run({"--remote", server.url() + "|prefetch=0", "--token-file", server.reader_token.string(), "get",
                         "--desc", consumer.descriptor_file(kernel).string(), "--scenario", k_test_scenario, "--out",
                         (temp / ("out-" + cache)).string()});
  };
  CHECK(get(stored, "c1").exit_code == 0);
  CHECK(get(stored, "c2").exit_code == 0);
  CHECK(get(missing, "c3").exit_code == 1);

  CliRunner viewer(temp.path(), temp / "viewer");
  const std::vector<std::string> stats = {"stats", "--remote", server.url(), "--token-file",
                                          server.reader_token.string()};
  auto document = viewer.run_json(stats);
  const json summary = server.get("/v1/stats/summary?window=day");
  const json misses = server.get("/v1/stats/misses?limit=5");
  // Lookups do not move between the two reads; requests and to_ms do (the reads themselves).
  for (const char* field : {"window", "lookups", "hits", "misses", "hit_rate", "bytes_served", "uploads",
                            "compile_ms_saved", "storage", "top_op_types", "top_scenarios"}) {
    INFO(field);
    CHECK(document["summary"][field] == summary[field]);
  }
  CHECK(document["misses"] == misses);
  CHECK(summary["hits"] == 1);
  CHECK(summary["misses"] == 1);
  CHECK(summary["top_op_types"][0]["op_type"] == op_type);
  REQUIRE(misses["groups"].size() == 1);
  CHECK(misses["groups"][0]["op_type"] == missing_op);

  auto text = viewer.run(stats);
  REQUIRE_MESSAGE(text.exit_code == 0, text.err);
  INFO(text.out);
  CHECK(contains(text.out, row("server", server.url())));
  CHECK(contains(text.out, row("hits / misses", "1 / 1 (hit rate 50.0 %)")));
  CHECK(contains(text.out, row("entries", "1 (")));
  CHECK(contains(text.out, "  " + row(op_type, "1")));
  CHECK(contains(text.out, "  " + row(missing_op, "single/train/8.0.RC2/Ascend910B1: 1 request from 1 client, 1 key")));
}

TEST_CASE("cli::stats --remote: the text shows each figure of the summary and --window reaches the server") {
  TempDir temp;
  FaultServer server = canned_server();
  CliRunner cli(temp);
  auto text = cli.run({"stats", "--remote", server.url(), "--window", "hour"});
  REQUIRE_MESSAGE(text.exit_code == 0, text.err);
  INFO(text.out);
  CHECK(contains(text.out, row("window", "last hour (2026-11-28 07:00 UTC to 2026-11-28 08:00 UTC)")));
  CHECK(contains(text.out, row("requests", "42 (30 lookups)")));
  CHECK(contains(text.out, row("hits / misses", "21 / 9 (hit rate 70.0 %)")));
  CHECK(contains(text.out, row("bytes served", "3.0 MiB")));
  CHECK(contains(text.out, row("uploads", "4 (10.0 KiB)")));
  CHECK(contains(text.out, row("compile time saved", "95.0 s")));
  CHECK(contains(text.out, row("entries", "12 (2.0 KiB of 500.0 MiB limit, local storage)")));
  CHECK(contains(text.out, row("evictions", "3")));
  CHECK(contains(text.out, row("all time",
                               "hits / misses 240 / 60 (hit rate 80.0 %), compile time saved 2.0 h, "
                               "since 2026-11-27 08:00 UTC")));
  CHECK(contains(text.out, "  " + row("MatMul", "15")));
  CHECK(contains(text.out, "  " + row("(unknown)", "6")));
  CHECK(contains(text.out, "  " + row("Conv2D", "single/train/8.0/Ascend910B1: 9 requests from 3 clients, 2 keys")));
  const auto requests = server.requests();
  REQUIRE(requests.size() == 2);
  CHECK(requests[0].target == "/v1/stats/summary?window=hour");
  CHECK(requests[1].target == "/v1/stats/misses?limit=5");

  auto document = cli.run_json({"stats", "--remote", server.url(), "--window", "hour"});
  CHECK(document == json{{"summary", k_canned_summary}, {"misses", k_canned_misses}});
}

TEST_CASE("cli::stats --remote: 401 without a token names the token settings (exit 4)") {
  TempDir temp;
  ReaderStatsServer server;
  server.start();
  CliRunner cli(temp);
  auto result = cli.run({"stats", "--remote", server.url()});
  CHECK(result.exit_code == 4);
  CHECK_MESSAGE(contains(result.err, "HTTP 401"), result.err);
  CHECK(contains(result.err, "--token-file"));
  CHECK(contains(result.err, "OPCACHE_TOKEN"));
  CHECK(result.out.empty());
}

TEST_CASE("cli::stats --remote: a server older than /v1/stats says so (exit 4)") {
  TempDir temp;
  FaultServer server = canned_server(404);
  CliRunner cli(temp);
  auto result = cli.run({"stats", "--remote", server.url()});
  CHECK(result.exit_code == 4);
  CHECK_MESSAGE(contains(result.err, "has no /v1/stats"), result.err);
  CHECK(contains(result.err, "older than HTTP API v1 revision 4"));
  auto json_result = cli.run({"--json", "stats", "--remote", server.url()});
  CHECK(json_result.exit_code == 4);
  CHECK(contains(json_result.out, "has no /v1/stats"));
}

TEST_CASE(
    "cli::stats --remote: s3:// and file:// have no server (exit 2), an unreachable one is exit 4, "
    "--window needs --remote") {
  TempDir temp;
  CliRunner cli(temp);
  for (const std::string url : {"s3://bucket/prefix", "file:///tmp/store"}) {
    auto result = cli.run({"stats", "--remote", url});
    CHECK(result.exit_code == 2);
    CHECK_MESSAGE(contains(result.err, "has no server to ask"), result.err);
  }
  auto unreachable = cli.run(
      {"stats", "--remote", "http://127.0.0.1:" + std::to_string(refused_port()) + "|connect-timeout=1000|retries=0"});
  CHECK(unreachable.exit_code == 4);
  CHECK_MESSAGE(contains(unreachable.err, "/v1/stats/summary"), unreachable.err);
  auto window_alone = cli.run({"stats", "--window", "hour"});
  CHECK(window_alone.exit_code == 2);
  CHECK(contains(window_alone.err, "--remote"));
  auto local = cli.run({"stats"});
  CHECK(local.exit_code == 0);
  CHECK(contains(local.out, row("cache directory", cli.cache().string())));
}
