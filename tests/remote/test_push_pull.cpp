// `opcache push` and `opcache pull` through the CLI: --json summaries
// (transferred / skipped / failed), exit status 4 when something failed,
// `pull --keys FILE` with keys and with descriptors, and nothing half-written
// in the store when transfers fail.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.hpp"
#include "tests/support/children.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/gate.hpp"
#include "tests/support/files.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/process.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

extern char** environ;

using namespace opcache::test;
using opcache::Store;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// `opcache serve` with one write token, seeded before it starts.
struct PushPullServer {
  TempDir dir;
  fs::path storage = dir / "storage";
  fs::path token_file = dir / "client.token";
  std::unique_ptr<ServerProcess> process;

  explicit PushPullServer(const std::vector<TestKernel>& seeded = {}) {
    write_text(dir / "tokens", token_line(k_write_token, "ci", "write"));
    write_text(token_file, std::string(k_write_token) + "\n");
    if (!seeded.empty()) {
      Store store = open_remote_store(storage, {});
      for (const auto& kernel : seeded) {
        put_kernel(store, kernel);
      }
    }
    process = std::make_unique<ServerProcess>(storage, std::vector<std::string>{"--tokens", (dir / "tokens").string()});
  }
  std::string url() const { return process->base_url(); }
};

// Runs the CLI on `cache` with the remote and the token.
ProcessResult opcache_cli(const fs::path& cache, const std::string& remote, const fs::path& token_file,
                          std::vector<std::string> args) {
  std::vector<std::string> all = {"-C", cache.string(), "--remote", remote};
  if (!token_file.empty()) {
    all.insert(all.end(), {"--token-file", token_file.string()});
  }
  all.insert(all.end(), args.begin(), args.end());
  return run_cli(all, hermetic_cli());
}

json summary_of(const ProcessResult& result) {
  auto parsed = json::parse(result.out, nullptr, false);
  REQUIRE_MESSAGE(parsed.is_object(), "stdout: " << result.out << "\nstderr: " << result.err);
  for (const char* field :
       {"remote", "requested", "transferred", "skipped", "failed", "bytes", "seconds", "interrupted", "failures"}) {
    CHECK_MESSAGE(parsed.contains(field), field);
  }
  return parsed;
}

void put_all(const fs::path& cache, const std::vector<TestKernel>& kernels) {
  Store store = open_remote_store(cache, {});
  for (const auto& kernel : kernels) {
    put_kernel(store, kernel);
  }
}

std::set<std::string> local_keys(const fs::path& cache) {
  Store store = open_remote_store(cache, {});
  auto entries = store.list();
  REQUIRE(entries.ok());
  std::set<std::string> keys;
  for (const auto& entry : *entries) {
    keys.insert(entry.key);
  }
  return keys;
}

// Starts the CLI without waiting (standard output and error into files);
// returns its pid. The environment is prepared before fork: the child only
// opens, dup2s and execs.
pid_t spawn_cli(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
  std::vector<std::string> argv_strings = {cli_path()};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings;
  const auto hermetic = hermetic_cli();
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string item(*entry);
    const std::string name = item.substr(0, item.find('='));
    if (std::find(hermetic.unset_env.begin(), hermetic.unset_env.end(), name) == hermetic.unset_env.end()) {
      env_strings.push_back(item);
    }
  }
  std::vector<char*> argv;
  std::vector<char*> envp;
  for (auto& item : argv_strings) {
    argv.push_back(item.data());
  }
  argv.push_back(nullptr);
  for (auto& item : env_strings) {
    envp.push_back(item.data());
  }
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("remote::push and pull through the CLI: --json counts, a second run skips, files come back byte-exact") {
  TempDir temp;
  const std::vector<TestKernel> kernels = {make_test_kernel(temp / "src", "square", 21),
                                           make_cheap_kernel(temp / "src", 1), make_cheap_kernel(temp / "src", 2)};
  PushPullServer server;
  put_all(temp / "a", kernels);

  auto pushed = opcache_cli(temp / "a", server.url(), server.token_file, {"--json", "push"});
  REQUIRE_MESSAGE(pushed.exit_code == 0, pushed.err);
  auto first = summary_of(pushed);
  CHECK(first["remote"] == server.url());
  CHECK(first["requested"] == 3);
  CHECK(first["transferred"] == 3);
  CHECK(first["skipped"] == 0);
  CHECK(first["failed"] == 0);
  CHECK(first["bytes"].get<std::int64_t>() > 0);
  CHECK(first["interrupted"] == false);
  CHECK(first["failures"].empty());
  CHECK(pushed.err.find('\r') == std::string::npos);  // no progress line on a pipe

  auto again = opcache_cli(temp / "a", server.url(), server.token_file, {"--json", "push"});
  REQUIRE(again.exit_code == 0);
  auto second = summary_of(again);
  CHECK(second["requested"] == 3);
  CHECK(second["transferred"] == 0);
  CHECK(second["skipped"] == 3);

  // Filters go to the server's listing.
  auto squares = opcache_cli(temp / "c", server.url(), server.token_file, {"--json", "pull", "--op-type", "square"});
  REQUIRE_MESSAGE(squares.exit_code == 0, squares.err);
  CHECK(summary_of(squares)["requested"] == 1);
  CHECK(summary_of(squares)["transferred"] == 1);
  CHECK(local_keys(temp / "c") == std::set<std::string>{kernels[0].key});
  auto inference = opcache_cli(temp / "c", server.url(), server.token_file,
                               {"--json", "pull", "--scenario", "phase=infer,toolchain=8.0.RC2,soc=Ascend910B1"});
  REQUIRE_MESSAGE(inference.exit_code == 0, inference.err);
  CHECK(summary_of(inference)["requested"] == 0);

  // Text output names the counts too.
  auto pulled = opcache_cli(temp / "b", server.url(), server.token_file, {"pull"});
  REQUIRE_MESSAGE(pulled.exit_code == 0, pulled.err);
  CHECK_MESSAGE(pulled.out.find("pulled 3 of 3 (0 skipped, 0 failed)") != std::string::npos, pulled.out);
  auto pulled_again = opcache_cli(temp / "b", server.url(), server.token_file, {"--json", "pull"});
  REQUIRE(pulled_again.exit_code == 0);
  CHECK(summary_of(pulled_again)["skipped"] == 3);
  CHECK(summary_of(pulled_again)["transferred"] == 0);

  // Pulled entries are ordinary local entries: get them without any remote.
  for (const auto& kernel : kernels) {
    const fs::path out = temp / ("out-" + kernel.key.substr(0, 8));
    auto got =
        run_cli({"-C", (temp / "b").string(), "--no-remote", "get", kernel.key, "--out", out.string()}, hermetic_cli());
    REQUIRE_MESSAGE(got.exit_code == 0, got.err);
    CHECK(directory_contents(out) == kernel.contents());
  }
  auto verified = run_cli({"-C", (temp / "b").string(), "verify"}, hermetic_cli());
  CHECK_MESSAGE(verified.exit_code == 0, verified.out << verified.err);
}

TEST_CASE("remote::pull --keys FILE takes keys, descriptor lines, a JSON array and a model op list") {
  TempDir temp;
  std::vector<TestKernel> kernels;
  for (int i = 0; i < 6; ++i) {
    kernels.push_back(make_cheap_kernel(temp / "src", i));
  }
  PushPullServer server(kernels);
  const std::string absent = opcache::base::sha256_hex("not on the server");
  auto pull = [&](const fs::path& cache, std::vector<std::string> args) {
    args.insert(args.begin(), {"--json", "pull"});
    return opcache_cli(cache, server.url(), server.token_file, args);
  };

  SUBCASE("keys, one per line, with comments and blank lines") {
    write_text(temp / "keys.txt", "# prefetch\n" + kernels[0].key + "\n\n" + kernels[1].key + "\r\n" + absent + "\n");
    auto result = pull(temp / "cache", {"--keys", (temp / "keys.txt").string()});
    REQUIRE_MESSAGE(result.exit_code == 0, result.err);
    auto summary = summary_of(result);
    CHECK(summary["requested"] == 3);
    CHECK(summary["transferred"] == 2);
    CHECK(summary["skipped"] == 1);
    CHECK(local_keys(temp / "cache") == std::set<std::string>{kernels[0].key, kernels[1].key});
  }
  SUBCASE("descriptors, one JSON object per line, keyed with --scenario") {
    write_text(temp / "ops.jsonl", kernels[2].descriptor_json + "\n" + kernels[3].descriptor_json + "\n");
    auto result = pull(temp / "cache", {"--keys", (temp / "ops.jsonl").string(), "--scenario", k_test_scenario});
    REQUIRE_MESSAGE(result.exit_code == 0, result.err);
    CHECK(summary_of(result)["transferred"] == 2);
    CHECK(local_keys(temp / "cache") == std::set<std::string>{kernels[2].key, kernels[3].key});

    auto unkeyed = pull(temp / "other", {"--keys", (temp / "ops.jsonl").string()});
    CHECK(unkeyed.exit_code == 2);
    CHECK(unkeyed.err.find("--scenario") != std::string::npos);
  }
  SUBCASE("a pretty-printed JSON array of descriptors") {
    json array = json::array({json::parse(kernels[4].descriptor_json), json::parse(kernels[5].descriptor_json)});
    write_text(temp / "ops.json", array.dump(2));
    auto result = pull(temp / "cache", {"--keys", (temp / "ops.json").string(), "--scenario", k_test_scenario});
    REQUIRE_MESSAGE(result.exit_code == 0, result.err);
    CHECK(summary_of(result)["transferred"] == 2);
    CHECK(local_keys(temp / "cache") == std::set<std::string>{kernels[4].key, kernels[5].key});
  }
  SUBCASE("a model op list like examples/models/*.json: named ops, repeated layers") {
    json model = {{"name", "tiny"}, {"description", "three layers"}, {"ops", json::array()}};
    for (int layer = 0; layer < 3; ++layer) {
      for (int i : {0, 1, 2}) {
        json op = json::parse(kernels[i].descriptor_json);
        op["name"] = "layer" + std::to_string(layer) + ".op" + std::to_string(i);
        model["ops"].push_back(op);
      }
    }
    write_text(temp / "model.json", model.dump(2));
    auto result = pull(temp / "cache", {"--keys", (temp / "model.json").string(), "--scenario", k_test_scenario});
    REQUIRE_MESSAGE(result.exit_code == 0, result.err);
    auto summary = summary_of(result);
    CHECK(summary["requested"] == 3);  // one per distinct kernel
    CHECK(summary["transferred"] == 3);
    CHECK(summary["failed"] == 0);
    CHECK(local_keys(temp / "cache") == std::set<std::string>{kernels[0].key, kernels[1].key, kernels[2].key});
  }
  SUBCASE("a line that is neither a key nor JSON is a usage error naming the line") {
    write_text(temp / "bad.txt", kernels[0].key + "\nnot-a-key\n");
    auto result = pull(temp / "cache", {"--keys", (temp / "bad.txt").string()});
    CHECK(result.exit_code == 2);
    CHECK(result.err.find("bad.txt:2") != std::string::npos);
    CHECK(local_keys(temp / "cache").empty());
  }
}

TEST_CASE("remote::pull of bad answers fails those keys with exit 4 and leaves nothing half-written") {
  TempDir temp;
  const TestKernel good = make_test_kernel(temp / "src", "relu", 50);
  const TestKernel mis_keyed = make_test_kernel(temp / "src", "relu", 51);
  const TestKernel cut = make_test_kernel(temp / "src", "relu", 52);
  const TestKernel failing = make_test_kernel(temp / "src", "relu", 53);
  FaultServer server([&](const FaultRequest& request) {
    if (request.method == "POST") {
      auto keys = json::parse(request.body)["keys"];
      return FaultReply::ok(json{{"present", keys}, {"missing", json::array()}}.dump());
    }
    const std::string key = request.target.substr(request.target.rfind('/') + 1);
    if (key == good.key) {
      return FaultReply::ok(good.bundle);
    }
    if (key == mis_keyed.key) {
      return FaultReply::ok(good.bundle);  // valid, but another key's
    }
    if (key == cut.key) {
      return FaultReply::cut_short(cut.bundle, cut.bundle.size() / 3);
    }
    return FaultReply::status(500, R"({"error":"internal","message":"storage failed"})");
  });
  auto result = opcache_cli(temp / "cache", server.url() + "|retries=0|parallelism=2", {},
                            {"--json", "pull", good.key, mis_keyed.key, cut.key, failing.key});
  CHECK(result.exit_code == 4);
  auto summary = summary_of(result);
  CHECK(summary["requested"] == 4);
  CHECK(summary["transferred"] == 1);
  CHECK(summary["failed"] == 3);
  std::set<std::string> failed_keys;
  for (const auto& failure : summary["failures"]) {
    failed_keys.insert(failure["key"].get<std::string>());
    CHECK(!failure["reason"].get<std::string>().empty());
  }
  CHECK(failed_keys == std::set<std::string>{mis_keyed.key, cut.key, failing.key});
  CHECK(local_keys(temp / "cache") == std::set<std::string>{good.key});
  CHECK(count_files(temp / "cache" / "objects") == 1);
  CHECK(count_files(temp / "cache" / "tmp") == 0);
  auto verified = run_cli({"-C", (temp / "cache").string(), "verify"}, hermetic_cli());
  CHECK_MESSAGE(verified.exit_code == 0, verified.out << verified.err);

  // Text mode names each failure on stderr and exits 4 as well.
  auto text = opcache_cli(temp / "cache2", server.url() + "|retries=0", {}, {"pull", mis_keyed.key});
  CHECK(text.exit_code == 4);
  CHECK_MESSAGE(text.err.find("failed " + mis_keyed.key) != std::string::npos, text.err);
  CHECK(text.err.find("failed verification") != std::string::npos);
}

TEST_CASE("remote::push counts what the server refuses as failed and exits 4") {
  TempDir temp;
  std::vector<TestKernel> kernels;
  for (int i = 0; i < 4; ++i) {
    kernels.push_back(make_cheap_kernel(temp / "src", i));
  }
  const std::string refused = kernels[2].key;
  FaultServer server([&](const FaultRequest& request) {
    if (request.method == "POST") {
      // One key the server already has (not the one it will refuse).
      auto keys = json::parse(request.body)["keys"];
      const auto& present = keys[0] == refused ? keys[1] : keys[0];
      return FaultReply::ok(json{{"present", json::array({present})}, {"missing", json::array()}}.dump());
    }
    if (request.target.find(refused) != std::string::npos) {
      return FaultReply::status(500, R"({"error":"internal","message":"bucket unavailable"})");
    }
    return FaultReply::status(201, R"({"stored":true})");
  });
  put_all(temp / "cache", kernels);
  auto result = opcache_cli(temp / "cache", server.url() + "|retries=0", {}, {"--json", "push"});
  CHECK(result.exit_code == 4);
  auto summary = summary_of(result);
  CHECK(summary["requested"] == 4);
  CHECK(summary["skipped"] == 1);
  CHECK(summary["transferred"] == 2);
  CHECK(summary["failed"] == 1);
  REQUIRE(summary["failures"].size() == 1);
  CHECK(summary["failures"][0]["key"] == refused);
  CHECK_MESSAGE(summary["failures"][0]["reason"].get<std::string>().find("bucket unavailable") != std::string::npos,
                summary["failures"][0]["reason"]);
  // The bodies the server accepted are whole bundles.
  for (const auto& request : server.requests()) {
    if (request.method == "PUT" && request.target.find(refused) == std::string::npos) {
      bool matched = false;
      for (const auto& kernel : kernels) {
        matched = matched || request.target == "/v1/entries/" + kernel.key;
      }
      CHECK(matched);
      CHECK(request.body.substr(0, 8) == "OPCBUNDL");
    }
  }
  CHECK(server.count("PUT") == 3);
}

TEST_CASE("remote::pull interrupted by SIGINT finishes what is in flight, exits 130 and leaves nothing half-written") {
  TempDir temp;
  std::vector<TestKernel> kernels;
  for (int i = 0; i < 10; ++i) {
    kernels.push_back(make_cheap_kernel(temp / "src", i));
  }
  // The second download is held on the server until the CLI has taken its
  // SIGINT: it is in flight when the signal comes, whatever the machine's speed.
  Gate interrupted;
  int downloads_answered = 0;  // the script runs one request at a time
  FaultServer server([&](const FaultRequest& request) {
    if (request.method == "POST") {
      auto keys = json::parse(request.body)["keys"];
      return FaultReply::ok(json{{"present", keys}, {"missing", json::array()}}.dump());
    }
    if (request.target.rfind("/v1/entries/", 0) == 0 && ++downloads_answered >= 2) {
      (void)interrupted.wait(std::chrono::seconds(60));  // a minute only catches a hang
    }
    for (const auto& kernel : kernels) {
      if (request.target == "/v1/entries/" + kernel.key) {
        return FaultReply::ok(kernel.bundle);
      }
    }
    return FaultReply::status(404);
  });
  std::vector<std::string> args = {"-C", (temp / "cache").string(), "--remote", server.url(), "--json", "pull", "-j",
                                   "1"};
  for (const auto& kernel : kernels) {
    args.push_back(kernel.key);
  }
  // Downloads only: the pull also reads the revocation list (GET /v1/revocations) first.
  auto downloads = [&server] {
    int count = 0;
    for (const auto& request : server.requests()) {
      count += request.method == "GET" && request.target.rfind("/v1/entries/", 0) == 0 ? 1 : 0;
    }
    return count;
  };
  const pid_t pid = spawn_cli(args, temp / "out.json", temp / "err.txt");
  const bool started = eventually([&] { return downloads() >= 2; }, std::chrono::seconds(60));
  ::kill(pid, SIGINT);
  // Taken by a thread of the CLI (its handler sets the flag the pull checks
  // before each download), not just sent; then the held download may end.
  const bool handled = eventually([&] { return !signal_pending(pid, SIGINT); }, std::chrono::seconds(60));
  interrupted.open();
  const int code = wait_exit_code(pid);
  REQUIRE(started);
  CHECK(handled);
  CHECK_MESSAGE(code == 130, read_text(temp / "err.txt"));
  auto summary = json::parse(read_text(temp / "out.json"), nullptr, false);
  REQUIRE_MESSAGE(summary.is_object(), read_text(temp / "out.json") << read_text(temp / "err.txt"));
  CHECK(summary["interrupted"] == true);
  CHECK(summary["failed"] == 0);
  const auto transferred = summary["transferred"].get<std::int64_t>();
  CHECK(transferred >= 2);  // the download in flight was finished, not dropped
  CHECK(transferred < 10);
  CHECK(local_keys(temp / "cache").size() == static_cast<std::size_t>(transferred));
  CHECK(downloads() == transferred);  // no download was started and dropped
  CHECK(count_files(temp / "cache" / "tmp") == 0);
  auto verified = run_cli({"-C", (temp / "cache").string(), "verify"}, hermetic_cli());
  CHECK_MESSAGE(verified.exit_code == 0, verified.out << verified.err);
}

TEST_CASE("remote::push and pull against a dead or hanging remote end in a clear error, not a hang") {
  TempDir temp;
  put_all(temp / "cache", {make_cheap_kernel(temp / "src", 1), make_cheap_kernel(temp / "src", 2)});
  const std::string refused = "http://127.0.0.1:" + std::to_string(refused_port());
  FaultServer hanging([](const FaultRequest&) { return FaultReply::hang(); });
  for (const std::string& remote : {refused, hanging.url()}) {
    CAPTURE(remote);
    for (const std::string& verb : {std::string("push"), std::string("pull")}) {
      CAPTURE(verb);
      const auto start = std::chrono::steady_clock::now();
      auto result = opcache_cli(temp / "cache", remote + "|timeout=1000|retries=1", {},
                                {verb, opcache::base::sha256_hex("some key")});
      // A hang catcher: with 1 s timeouts the run ends in a few seconds.
      CHECK(seconds_since(start) < 60.0);
      CHECK(result.exit_code != 0);
      CHECK(result.exit_code != 8);  // not an internal error
      CHECK_MESSAGE(result.err.find(remote) != std::string::npos, result.err);
    }
  }
  CHECK(count_files(temp / "cache" / "tmp") == 0);
  CHECK(local_keys(temp / "cache").size() == 2);
}

namespace {

// The count of opcache_http_requests_total of `route` and `method` (all statuses) in a /metrics text.
long requests_of(const std::string& metrics, const std::string& route, const std::string& method) {
  long total = 0;
  const std::string prefix = "opcache_http_requests_total{route=\"" + route + "\",method=\"" + method + "\",";
  for (const auto& line : lines_of(metrics)) {
    if (line.rfind(prefix, 0) == 0) {
      total += std::stol(line.substr(line.rfind(' ') + 1));
    }
  }
  return total;
}

std::string metrics_of(const PushPullServer& server) {
  auto answer = http_request("GET", server.url() + "/metrics",
                             {std::string("Authorization: Bearer ") + k_write_token});
  REQUIRE(answer.status == 200);
  return without_replica_label(answer.body);
}

// The kernels the batch tests pull: 40 small ones.
std::vector<TestKernel> batch_kernels(const fs::path& dir) {
  std::vector<TestKernel> kernels;
  for (int i = 0; i < 40; ++i) {
    kernels.push_back(make_cheap_kernel(dir, i));
  }
  return kernels;
}

// CHECKs that every kernel is in `cache`, byte-exact.
void check_pulled(const fs::path& cache, const std::vector<TestKernel>& kernels) {
  CHECK(local_keys(cache).size() == kernels.size());
  Store store = open_remote_store(cache, {});
  for (const auto& kernel : kernels) {
    auto got = store.get(kernel.key, cache.parent_path() / ("out-" + kernel.key.substr(0, 12)));
    REQUIRE_MESSAGE(got.ok(), got.error().message());
    REQUIRE(got->has_value());
    CHECK(directory_contents(cache.parent_path() / ("out-" + kernel.key.substr(0, 12))) == kernel.contents());
  }
}

}  // namespace

TEST_CASE("remote::pull from opcache serve fetches 40 entries in one batch request, with no GET per entry") {
  TempDir temp;
  const auto kernels = batch_kernels(temp / "src");
  PushPullServer server(kernels);
  auto pulled = opcache_cli(temp / "fresh", server.url(), server.token_file, {"--json", "pull"});
  REQUIRE_MESSAGE(pulled.exit_code == 0, pulled.err);
  CHECK(summary_of(pulled)["transferred"] == 40);
  const std::string metrics = metrics_of(server);
  CHECK(requests_of(metrics, "list", "GET") == 1);
  CHECK(requests_of(metrics, "fetch", "POST") == 1);
  CHECK(requests_of(metrics, "entry", "GET") == 0);
  check_pulled(temp / "fresh", kernels);
}

TEST_CASE("remote::pull stores a batch response 64 bundles at a time: 150 entries, every one stored and sound") {
  TempDir temp;
  std::vector<TestKernel> kernels;
  for (int i = 0; i < 150; ++i) {  // past two of PullReceiver's batches of 64: two full ones and the rest
    kernels.push_back(make_cheap_kernel(temp / "src", i));
  }
  PushPullServer server(kernels);
  auto pulled = opcache_cli(temp / "fresh", server.url(), server.token_file, {"--json", "pull"});
  REQUIRE_MESSAGE(pulled.exit_code == 0, pulled.err);
  CHECK(summary_of(pulled)["transferred"] == 150);
  CHECK(requests_of(metrics_of(server), "fetch", "POST") == 1);
  check_pulled(temp / "fresh", kernels);
  auto verified = opcache_cli(temp / "fresh", server.url(), server.token_file, {"--json", "verify"});
  REQUIRE_MESSAGE(verified.exit_code == 0, verified.out << verified.err);
  const auto report = nlohmann::json::parse(verified.out);
  CHECK(report["entries_checked"] == 150);
  CHECK(report["problems"].empty());
}

TEST_CASE("remote::pull from a server without batch fetch falls back to one GET per entry") {
  TempDir temp;
  const auto kernels = batch_kernels(temp / "src");
  PushPullServer server(kernels);
  // An older server reads /v1/entries/fetch as an entry's path: 400 invalid_key.
  FaultServer older([&](const FaultRequest& request) {
    if (request.target == "/v1/entries/fetch") {
      return FaultReply::status(400, R"({"error":"invalid_key","message":"not a cache key"})");
    }
    return forward_to(request, server.url());
  });
  auto pulled = opcache_cli(temp / "fresh", older.url(), server.token_file, {"--json", "pull"});
  REQUIRE_MESSAGE(pulled.exit_code == 0, pulled.err);
  CHECK(summary_of(pulled)["transferred"] == 40);
  CHECK(older.count("POST") == 1);  // asked once
  CHECK(requests_of(metrics_of(server), "entry", "GET") == 40);
  check_pulled(temp / "fresh", kernels);
}

TEST_CASE("remote::pull keeps the verified bundles of a batch response cut short and fetches the rest one at a "
          "time") {
  TempDir temp;
  const auto kernels = batch_kernels(temp / "src");
  PushPullServer server(kernels);
  FaultServer cutting([&](const FaultRequest& request) {
    FaultReply reply = forward_to(request, server.url());
    if (request.target == "/v1/entries/fetch") {
      // Announce the whole stream, send the first 40 % of it, then close.
      const std::string body = reply.raw.substr(reply.raw.find("\r\n\r\n") + 4);
      return FaultReply::cut_short(body, body.size() * 2 / 5);
    }
    return reply;
  });
  auto pulled = opcache_cli(temp / "fresh", cutting.url() + "|retries=0", server.token_file, {"--json", "pull"});
  REQUIRE_MESSAGE(pulled.exit_code == 0, pulled.err);
  auto summary = summary_of(pulled);
  CHECK(summary["transferred"] == 40);
  CHECK(summary["failed"] == 0);
  const long singles = requests_of(metrics_of(server), "entry", "GET");
  CHECK(singles > 0);
  CHECK(singles < 30);  // about 60 % of them: the batch's complete bundles were kept
  CHECK(count_files(temp / "fresh" / "tmp") == 0);
  check_pulled(temp / "fresh", kernels);
}
