// The http:// remote against a real `opcache serve` on loopback: layered get
// (local miss → remote hit → verified → stored locally; the next get is
// local), the background upload queue, read-only remotes, and bearer tokens
// from --token-file / OPCACHE_TOKEN (401 and 403 as clear errors).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.hpp"
#include "tests/support/process.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

using namespace opcache::test;
using opcache::ErrorCode;
using opcache::Store;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// `opcache serve --tokens` (a reader and a writer) on a storage directory
// that may be seeded with entries before it starts; the client token files.
struct TeamServer {
  TempDir dir;
  fs::path storage = dir / "storage";
  fs::path reader_token = dir / "reader.token";
  fs::path writer_token = dir / "writer.token";
  std::unique_ptr<ServerProcess> process;

  TeamServer() {
    write_text(dir / "tokens", token_line(k_read_token, "reader", "read") +
                                   token_line(k_write_token, "writer", "write"));
    write_text(reader_token, std::string(k_read_token) + "\n");
    write_text(writer_token, std::string(k_write_token) + "\n");
  }

  /// Stores kernels in the server's storage (before start()).
  void seed(const std::vector<TestKernel>& kernels) {
    Store store = open_remote_store(storage, {});
    for (const auto& kernel : kernels) {
      put_kernel(store, kernel);
    }
  }

  void start() {
    process = std::make_unique<ServerProcess>(storage, std::vector<std::string>{"--tokens", (dir / "tokens").string()});
  }
  std::string url() const { return process->base_url(); }

  /// The status of HEAD /v1/entries/<key> with the reader token.
  long head(const std::string& key) const {
    return http_request("HEAD", url() + "/v1/entries/" + key, {std::string("Authorization: Bearer ") + k_read_token})
        .status;
  }
  /// The bundle bytes the server holds for `key` ("" when absent).
  std::string bundle(const std::string& key) const {
    auto response =
        http_request("GET", url() + "/v1/entries/" + key, {std::string("Authorization: Bearer ") + k_read_token});
    return response.status == 200 ? response.body : std::string();
  }
};

}  // namespace

TEST_CASE("remote::http: a local miss is fetched from opcache serve, verified, stored locally: the next get is local") {
  TempDir temp;
  const TestKernel kernel = make_test_kernel(temp / "src", "square", 96);
  TeamServer server;
  server.seed({kernel});
  server.start();

  WarningLog warnings;
  Store store = open_remote_store(temp / "cache", {server.url()}, &warnings, server.reader_token);
  CHECK_FALSE(*store.contains(kernel.key));
  auto first = store.get(kernel.key, temp / "out1");
  REQUIRE_MESSAGE(first.ok(), first.error().message());
  REQUIRE(first->has_value());
  CHECK(directory_contents(temp / "out1") == kernel.contents());
  CHECK(*store.contains(kernel.key));
  CHECK(counter(store, "remote_hits") == 1);

  // Without the server the entry is still there: the second get is local.
  CHECK(server.process->stop() == 0);
  auto second = store.get(kernel.key, temp / "out2");
  REQUIRE(second.ok());
  REQUIRE(second->has_value());
  CHECK(directory_contents(temp / "out2") == kernel.contents());
  CHECK(counter(store, "remote_hits") == 1);
  CHECK_MESSAGE(warnings.all().empty(), warnings.joined());

  // And a key nobody has is a plain miss once the server is gone (warning, no error).
  auto missing = store.get(opcache::base::sha256_hex("absent"), temp / "out3");
  REQUIRE(missing.ok());
  CHECK_FALSE(missing->has_value());
  CHECK(warnings.contains(server.url()));
}

TEST_CASE("remote::http: a stored entry is queued and uploaded in the background, byte-exact") {
  TempDir temp;
  const TestKernel first = make_test_kernel(temp / "src", "relu", 100);
  const TestKernel second = make_test_kernel(temp / "src", "relu", 101);
  TeamServer server;
  server.start();
  {
    Store store = open_remote_store(temp / "producer", {server.url() + "|upload"}, nullptr, server.writer_token);
    put_kernel(store, first);
    put_kernel(store, second);
    CHECK(eventually([&] { return server.head(first.key) == 200 && server.head(second.key) == 200; }));
  }
  // The outbox is empty once everything is sent.
  std::size_t markers = 0;
  for (const auto& entry : fs::recursive_directory_iterator(temp / "producer" / "outbox")) {
    markers += entry.path().filename().string().size() == 64 ? 1 : 0;
  }
  CHECK(markers == 0);

  // Another machine gets exactly the kernel files back.
  Store consumer = open_remote_store(temp / "consumer", {server.url()}, nullptr, server.reader_token);
  for (const auto* kernel : {&first, &second}) {
    const fs::path out = temp / ("out-" + kernel->key.substr(0, 8));
    auto got = consumer.get(kernel->key, out);
    REQUIRE_MESSAGE(got.ok(), got.error().message());
    REQUIRE(got->has_value());
    CHECK(directory_contents(out) == kernel->contents());
  }
  CHECK(counter(consumer, "remote_hits") == 2);
}

TEST_CASE("remote::http: entries left in the upload queue are sent by the next process with that remote") {
  TempDir temp;
  const TestKernel kernel = make_test_kernel(temp / "src", "neg", 77);
  TeamServer server;
  server.start();
  // The first process queues the key but cannot send it: its token is refused.
  write_text(temp / "bad.token", "not-a-token\n");
  {
    Store store = open_remote_store(temp / "cache", {server.url() + "|upload|cooldown=0"}, nullptr, temp / "bad.token");
    put_kernel(store, kernel);
  }
  CHECK(server.head(kernel.key) == 404);
  // The next process, with a good token, drains the queue without any new put.
  Store store = open_remote_store(temp / "cache", {server.url() + "|upload"}, nullptr, server.writer_token);
  CHECK(eventually([&] { return server.head(kernel.key) == 200; }));
}

TEST_CASE("remote::http: a read-only remote never receives uploads, and push to it is refused") {
  TempDir temp;
  const TestKernel first = make_test_kernel(temp / "src", "add", 5);
  const TestKernel second = make_test_kernel(temp / "src", "add", 6);
  TeamServer read_only;
  TeamServer writable;
  read_only.start();
  writable.start();
  Store store = open_remote_store(temp / "cache", {read_only.url() + "|read-only|upload", writable.url() + "|upload"},
                                  nullptr, read_only.writer_token);  // same token name, different servers
  // Both servers know the writer token (same tokens file contents).
  put_kernel(store, first);
  put_kernel(store, second);
  // The writable remote, queued at the same moment, got both...
  CHECK(eventually([&] { return writable.head(first.key) == 200 && writable.head(second.key) == 200; }));
  // ...and the read-only one got nothing.
  CHECK(read_only.head(first.key) == 404);
  CHECK(read_only.head(second.key) == 404);
  // The access log keeps its lines in order: once the line of a HEAD made
  // last is written, a PUT before it would be too.
  const auto head_lines = [&] {
    const std::string log = read_only.process->log_text(), line = "HEAD /v1/entries/" + second.key + " 404";
    std::size_t count = 0;
    for (auto at = log.find(line); at != std::string::npos; at = log.find(line, at + 1)) {
      ++count;
    }
    return count;
  };
  REQUIRE(eventually([&] { return head_lines() >= 1; }));
  CHECK(read_only.process->log_text().find("PUT ") == std::string::npos);

  opcache::Store::TransferOptions options;
  options.remote = "1";
  auto pushed = store.push(options);
  REQUIRE_FALSE(pushed.ok());
  CHECK(pushed.error().code() == ErrorCode::usage);
  CHECK(pushed.error().message().find("read-only") != std::string::npos);
  const std::size_t heads_before = head_lines();
  CHECK(read_only.head(second.key) == 404);
  REQUIRE(eventually([&] { return head_lines() > heads_before; }));
  CHECK(read_only.process->log_text().find("PUT ") == std::string::npos);
}

TEST_CASE("remote::http: tokens come from --token-file or OPCACHE_TOKEN: 401 and 403 are clear errors") {
  TempDir temp;
  const TestKernel seeded = make_test_kernel(temp / "src", "square", 33);
  const TestKernel local_only = make_test_kernel(temp / "src", "square", 34);
  TeamServer server;
  server.seed({seeded});
  server.start();
  const std::string cache = (temp / "cache").string();
  auto cli = [&](std::vector<std::string> args, ProcessOptions options = hermetic_cli()) {
    args.insert(args.begin(), {"-C", cache, "--remote", server.url()});
    return run_cli(args, options);
  };

  SUBCASE("no token: 401, saying how to give one") {
    auto pulled = cli({"pull", seeded.key});
    CHECK(pulled.exit_code == 4);
    CHECK_MESSAGE(pulled.err.find("HTTP 401") != std::string::npos, pulled.err);
    CHECK(pulled.err.find("--token-file") != std::string::npos);
    CHECK(pulled.err.find("OPCACHE_TOKEN") != std::string::npos);
    // The layered get reports it as a warning and misses.
    auto got = cli({"get", seeded.key, "--out", (temp / "out").string()});
    CHECK(got.exit_code == 1);
    CHECK_MESSAGE(got.err.find("HTTP 401") != std::string::npos, got.err);
    CHECK(got.err.find("bearer token") != std::string::npos);  // the server's own explanation
  }
  SUBCASE("a [remote] section of the config file brings its own token_file") {
    write_text(temp / "opcache.conf", "[remote \"team\"]\nurl = " + server.url() +
                                          "\ntoken_file = " + server.reader_token.string() + "\ntimeout = 5000\n");
    auto pulled = run_cli({"--json", "-C", cache, "--config", (temp / "opcache.conf").string(), "pull", seeded.key},
                          hermetic_cli());
    REQUIRE_MESSAGE(pulled.exit_code == 0, pulled.err);
    CHECK(json::parse(pulled.out)["transferred"] == 1);
    auto config =
        run_cli({"--json", "-C", cache, "--config", (temp / "opcache.conf").string(), "config"}, hermetic_cli());
    REQUIRE(config.exit_code == 0);
    CHECK(config.out.find(server.url()) != std::string::npos);
    CHECK(config.out.find(k_read_token) == std::string::npos);
  }
  SUBCASE("an unknown token: 401, never printed") {
    write_text(temp / "wrong.token", "guessed-token-0000\n");
    auto pulled = cli({"--token-file", (temp / "wrong.token").string(), "pull", seeded.key});
    CHECK(pulled.exit_code == 4);
    CHECK_MESSAGE(pulled.err.find("HTTP 401") != std::string::npos, pulled.err);
    CHECK(pulled.err.find("unknown token") != std::string::npos);
    CHECK(pulled.err.find("guessed-token-0000") == std::string::npos);
  }
  SUBCASE("--token-file and OPCACHE_TOKEN both work; a read token cannot push: 403") {
    auto pulled = cli({"--json", "--token-file", server.reader_token.string(), "pull", seeded.key});
    REQUIRE_MESSAGE(pulled.exit_code == 0, pulled.err);
    CHECK(json::parse(pulled.out)["transferred"] == 1);
    auto via_env_options = hermetic_cli();
    via_env_options.unset_env.erase(
        std::find(via_env_options.unset_env.begin(), via_env_options.unset_env.end(), "OPCACHE_TOKEN"));
    via_env_options.unset_env.erase(
        std::find(via_env_options.unset_env.begin(), via_env_options.unset_env.end(), "OPCACHE_REMOTE"));
    via_env_options.env["OPCACHE_TOKEN"] = k_read_token;
    via_env_options.env["OPCACHE_REMOTE"] = server.url() + "|timeout=5000";
    const std::string other_cache = (temp / "other").string();
    auto via_env = run_cli({"--json", "-C", other_cache, "pull", seeded.key}, via_env_options);
    REQUIRE_MESSAGE(via_env.exit_code == 0, via_env.err);
    CHECK(json::parse(via_env.out)["transferred"] == 1);

    {
      Store store = open_remote_store(temp / "cache", {});
      put_kernel(store, local_only);
    }
    auto pushed = cli({"--json", "--token-file", server.reader_token.string(), "push"});
    CHECK(pushed.exit_code == 4);
    auto summary = json::parse(pushed.out);
    CHECK(summary["requested"] == 2);
    CHECK(summary["skipped"] == 1);
    CHECK(summary["failed"] == 1);
    REQUIRE(summary["failures"].size() == 1);
    const std::string reason = summary["failures"][0]["reason"];
    CHECK_MESSAGE(reason.find("HTTP 403") != std::string::npos, reason);
    CHECK(reason.find("scope") != std::string::npos);
    CHECK(pushed.out.find(k_read_token) == std::string::npos);
    CHECK(pushed.err.find(k_read_token) == std::string::npos);
    CHECK(server.head(local_only.key) == 404);

    auto pushed_ok = cli({"--json", "--token-file", server.writer_token.string(), "push"});
    REQUIRE_MESSAGE(pushed_ok.exit_code == 0, pushed_ok.err);
    CHECK(json::parse(pushed_ok.out)["transferred"] == 1);
    CHECK(server.bundle(local_only.key).size() > 0);
  }
}

TEST_CASE("remote::http: opcache exec uploads what it builds, and a fresh cache takes a remote hit without building") {
  TempDir temp;
  const TestKernel kernel = make_test_kernel(temp / "src", "relu", 640);
  TeamServer server;
  server.start();
  write_text(temp / "desc.json", kernel.descriptor_json);
  const fs::path builds = temp / "builds.log";
  auto exec = [&](const std::string& cache, const std::string& remote, const fs::path& out) {
    std::string copy = "mkdir -p '" + out.string() + "'";
    std::vector<std::string> outputs;
    for (const auto& file : kernel.files) {
      copy += " && cp '" + file.string() + "' '" + out.string() + "/'";
      outputs.push_back(file.filename().string());
    }
    copy += " && echo built >> '" + builds.string() + "'";
    std::vector<std::string> args = {"-C",
                                     (temp / cache).string(),
                                     "--remote",
                                     remote,
                                     "--token-file",
                                     server.writer_token.string(),
                                     "exec",
                                     "--desc",
                                     (temp / "desc.json").string(),
                                     "--scenario",
                                     k_test_scenario,
                                     "--out",
                                     out.string(),
                                     "--key-on",  // the key of kernel.key, as `opcache put` stores it
                                     "descriptor"};
    for (const auto& name : outputs) {
      args.insert(args.end(), {"--output", name});
    }
    args.insert(args.end(), {"--", "sh", "-c", copy});
    return run_cli(args, hermetic_cli());
  };
  auto built = exec("ci-1", server.url() + "|upload", temp / "out1");
  REQUIRE_MESSAGE(built.exit_code == 0, built.err);
  CHECK(read_text(builds) == "built\n");
  CHECK(eventually([&] { return server.head(kernel.key) == 200; }));

  auto warm = exec("ci-2", server.url(), temp / "out2");
  REQUIRE_MESSAGE(warm.exit_code == 0, warm.err);
  CHECK(read_text(builds) == "built\n");  // not built again
  CHECK(directory_contents(temp / "out2") == kernel.contents());
  Store second = open_remote_store(temp / "ci-2", {});
  CHECK(counter(second, "remote_hits") == 1);
}
