// Exec manifests on a real `opcache serve` (docs/protocol.md "Exec
// manifests", API v1 revision 7): PUT then GET /v1/manifests/{key} round
// trips, a manifest whose command key is not the URL's is refused, two PUTs
// with different builds are merged (concurrent ones too: none is lost behind
// one server), a read token cannot PUT, a malformed or oversized body is
// refused with a JSON error, /v1/status says revision 7, and the same
// through an S3 storage (moto).
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/exec_manifest.hpp"
#include "store/exec_manifest_file.hpp"
#include "tests/support/api_schema.hpp"
#include "tests/support/exec_manifests.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

// A namespace of its own: the tests are compiled in unity batches.
namespace opcache::test::exec_manifest_serving {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// `opcache serve` with a read and a write token, over a local store or `storage_url`.
struct ManifestServer {
  TempDir dir;
  fs::path storage = dir / "storage";
  std::unique_ptr<ServerProcess> process;

  explicit ManifestServer(const std::string& storage_url = {}) {
    write_text(dir / "tokens",
               token_line(k_write_token, "ci", "read,write") + token_line(k_read_token, "dev", "read"));
    process = std::make_unique<ServerProcess>(storage_url.empty() ? storage : fs::path(storage_url),
                                              std::vector<std::string>{"--tokens", (dir / "tokens").string()});
  }

  HttpResponse request(const std::string& method, const std::string& path, const char* token,
                       const std::string& body = {}) const {
    std::vector<std::string> headers = {std::string("Authorization: Bearer ") + token};
    if (!body.empty()) {
      headers.push_back("Content-Type: application/json");
    }
    return http_request(method, process->base_url() + path, headers, body);
  }

  HttpResponse put(const std::string& url_key, const store::ExecManifest& manifest,
                   const char* token = k_write_token) const {
    return request("PUT", "/v1/manifests/" + url_key, token, store::exec_manifest_to_json(manifest));
  }

  HttpResponse get(const std::string& command_key) const {
    return request("GET", "/v1/manifests/" + command_key, k_read_token);
  }

  // The manifest GET answers (REQUIREs a 200 whose body is valid by the schema and parses).
  store::ExecManifest stored(const std::string& command_key) const {
    const auto response = get(command_key);
    REQUIRE_MESSAGE(response.status == 200, response.body);
    checked_json(response, "exec-manifest.schema.json");
    auto parsed = store::parse_exec_manifest(response.body, "GET body");
    REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message()));
    return *parsed;
  }
};

const std::string k_entry_a = std::string(64, 'a');
const std::string k_entry_b = std::string(64, 'b');
const std::string k_entry_c = std::string(64, 'c');

// PUT, GET, merge and refusals on `server`: what both storages must do.
void check_manifest_routes(const ManifestServer& server) {
  const auto command_key = made_up_command_key("routes");
  CHECK(server.get(command_key).status == 404);
  CHECK(server.get(command_key).error_code() == "not_found");

  const auto first = server.put(command_key, exec_manifest_of(command_key, {k_entry_a}));
  REQUIRE_MESSAGE(first.status == 200, first.body);
  const auto answer = checked_json(first, "manifest-put-response.schema.json");
  CHECK(answer["command_key"] == command_key);
  CHECK(answer["builds"] == 1);
  CHECK(same_manifest(server.stored(command_key), exec_manifest_of(command_key, {k_entry_a})));
  CHECK(server.request("HEAD", "/v1/manifests/" + command_key, k_read_token).status == 200);

  // A second PUT with other builds is merged into the first, its builds first.
  const auto second = server.put(command_key, exec_manifest_of(command_key, {k_entry_b, k_entry_a}));
  REQUIRE_MESSAGE(second.status == 200, second.body);
  CHECK(json::parse(second.body)["builds"] == 2);
  const auto third = server.put(command_key, exec_manifest_of(command_key, {k_entry_c}));
  CHECK(json::parse(third.body)["builds"] == 3);
  CHECK(entries_of(server.stored(command_key)) == std::vector<std::string>{k_entry_c, k_entry_b, k_entry_a});

  // The URL's key must be the manifest's: refused, and nothing stored under either.
  const auto other_key = made_up_command_key("another command");
  const auto mismatch = server.put(other_key, exec_manifest_of(command_key, {k_entry_b}));
  CHECK(mismatch.status == 409);
  CHECK(mismatch.error_code() == "key_mismatch");
  checked_json(mismatch, "error.schema.json");
  CHECK(server.get(other_key).status == 404);
  CHECK(entries_of(server.stored(command_key)).size() == 3);

  // A body that is not a manifest: 400 with what is wrong.
  const auto malformed = server.request("PUT", "/v1/manifests/" + command_key, k_write_token, "{\"builds\": []}");
  CHECK(malformed.status == 400);
  CHECK(malformed.error_code() == "corrupt_manifest");
  checked_json(malformed, "error.schema.json");
  // A read token cannot PUT; the stored manifest is unchanged.
  const auto refused = server.put(command_key, exec_manifest_of(command_key, {std::string(64, 'd')}), k_read_token);
  CHECK(refused.status == 403);
  CHECK(entries_of(server.stored(command_key)).size() == 3);
  // The key in the URL is a key.
  CHECK(server.request("GET", "/v1/manifests/not-a-key", k_read_token).error_code() == "invalid_key");
}

}  // namespace

TEST_CASE("server::manifests POST /v1/manifests/fetch answers many keys' manifests, none for a key without one") {
  ManifestServer server;
  const auto first = made_up_command_key("first");
  const auto second = made_up_command_key("second");
  const auto absent = made_up_command_key("never stored");
  REQUIRE(server.put(first, exec_manifest_of(first, {k_entry_a})).status == 200);
  REQUIRE(server.put(second, exec_manifest_of(second, {k_entry_b, k_entry_c})).status == 200);

  const json request{{"keys", {first, absent, second}}};
  CHECK(schema_errors("manifest-fetch-request.schema.json", request).empty());
  const auto response = server.request("POST", "/v1/manifests/fetch", k_read_token, request.dump());
  REQUIRE_MESSAGE(response.status == 200, response.body);
  const auto answer = checked_json(response, "manifest-fetch-response.schema.json");
  CHECK(answer["again"] == json::array());
  REQUIRE(answer["manifests"].size() == 2);
  CHECK_FALSE(answer["manifests"].contains(absent));
  for (const auto& [key, entries] : {std::pair{first, std::vector<std::string>{k_entry_a}},
                                     std::pair{second, std::vector<std::string>{k_entry_b, k_entry_c}}}) {
    auto parsed = store::parse_exec_manifest(answer["manifests"][key].dump(), "batch answer");
    REQUIRE(parsed.ok());
    CHECK(same_manifest(*parsed, exec_manifest_of(key, entries)));
  }
  // Refusals, each a JSON error: not a key list, a key that is not a key, too many keys.
  const auto not_a_list = server.request("POST", "/v1/manifests/fetch", k_read_token, R"({"keys": "x"})");
  CHECK(not_a_list.status == 400);
  CHECK(not_a_list.error_code() == "bad_request");
  const auto bad_key = server.request("POST", "/v1/manifests/fetch", k_read_token, R"({"keys": ["fetch"]})");
  CHECK(bad_key.status == 400);
  CHECK(bad_key.error_code() == "invalid_key");
  const auto too_many = server.request("POST", "/v1/manifests/fetch", k_read_token,
                                       json{{"keys", std::vector<std::string>(1001, first)}}.dump());
  CHECK(too_many.status == 413);
  CHECK(too_many.error_code() == "too_many_keys");
  checked_json(too_many, "error.schema.json");
}

TEST_CASE("server::manifests PUT then GET round trips, merges PUTs, refuses another key, a bad body and a read "
          "token") {
  ManifestServer server;
  check_manifest_routes(server);
  // Over a local store the manifest is where a client's cache keeps it.
  const auto command_key = made_up_command_key("routes");
  auto on_disk = store::read_exec_manifest(store::StoreLayout(server.storage), command_key);
  REQUIRE(on_disk.ok());
  REQUIRE(on_disk->has_value());
  CHECK((*on_disk)->builds.size() == 3);
}

TEST_CASE("server::manifests concurrent PUTs of one key lose no build, and /v1/status says revision 8") {
  ManifestServer server;
  const auto command_key = made_up_command_key("concurrent");
  constexpr int k_writers = 8;
  std::vector<std::string> entries;
  for (int i = 0; i < k_writers; ++i) {
    entries.push_back(made_up_command_key("entry " + std::to_string(i)));
  }
  std::vector<long> statuses(k_writers, 0);
  std::vector<std::thread> writers;
  for (int i = 0; i < k_writers; ++i) {
    writers.emplace_back([&, i] {
      statuses[i] = server.put(command_key, exec_manifest_of(command_key, {entries[i]})).status;
    });
  }
  for (auto& writer : writers) {
    writer.join();
  }
  CHECK(statuses == std::vector<long>(k_writers, 200));
  const auto stored = entries_of(server.stored(command_key));
  CHECK(std::set<std::string>(stored.begin(), stored.end()) == std::set<std::string>(entries.begin(), entries.end()));

  const auto status = checked_json(server.request("GET", "/v1/status", k_read_token), "status-response.schema.json");
  CHECK(status["revision"] == 10);
}

TEST_CASE("server::manifests an exec manifest larger than the limit is refused before it is read whole") {
  ManifestServer server;
  const auto command_key = made_up_command_key("large");
  // Over the limit by one byte: 413 from the announced length.
  const std::string body(store::k_max_manifest_bytes + 1, ' ');
  const auto response = server.request("PUT", "/v1/manifests/" + command_key, k_write_token, body);
  CHECK(response.status == 413);
  CHECK(response.error_code() == "payload_too_large");
  // Larger than other JSON bodies (2 MiB) but within the manifest's limit: read, then judged.
  const std::string padded = store::exec_manifest_to_json(exec_manifest_of(command_key, {k_entry_a})) +
                             std::string(3u << 20, ' ');
  const auto accepted = server.request("PUT", "/v1/manifests/" + command_key, k_write_token, padded);
  CHECK_MESSAGE(accepted.status == 200, accepted.body);
}

TEST_CASE("server::manifests over an S3 storage (moto): PUT, GET, merge and refusals") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  use_moto_test_credentials();
  ManifestServer server("s3://opcache-serve-manifests/team?endpoint=" + MotoServer::shared().endpoint());
  check_manifest_routes(server);
}

}  // namespace opcache::test::exec_manifest_serving
