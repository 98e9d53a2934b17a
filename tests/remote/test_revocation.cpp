// Clients and revocation (docs/remotes.md "Revocation"): a 410 from a team
// server is a miss that purges the local copy and never opens the breaker;
// the revocation list reaches a store on use (at most once per
// revocation_check_interval, shared by the processes of a cache directory
// through <cache>/remotes/<id>.revocations) and on pull; file:// remotes
// keep tombstones in their own layout; a local tombstone refuses remote hits.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "remote/circuit_breaker.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

using namespace opcache;
using namespace opcache::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A server with an admin token and a read/write token, the latter in a file
// for the client stores.
struct RevocationRemote {
  TempDir dir;
  std::unique_ptr<ServerProcess> server;

  RevocationRemote() {
    write_text(dir / "tokens", token_line(k_admin_token, "admin", "admin") + token_line(k_write_token, "team", "read,write"));
    write_text(dir / "team.token", k_write_token);
    write_text(dir / "admin.token", k_admin_token);
    server = std::make_unique<ServerProcess>(dir / "storage", std::vector<std::string>{"--tokens", (dir / "tokens").string()});
  }

  Store open(const fs::path& cache, std::int64_t interval_s, WarningLog* warnings = nullptr,
             const char* token_file = "team.token") const {
    StoreConfig config;
    config.cache_dir = cache;
    config.remotes = {server->base_url() + "|upload"};
    config.token_file = dir / token_file;
    config.revocation_check_interval_s = interval_s;
    config.team_single_flight = "false";
    if (warnings != nullptr) {
      config.on_warning = warnings->sink();
    }
    auto store = Store::open(config);
    REQUIRE_MESSAGE(store.ok(), (store.ok() ? "" : store.error().message()));
    return std::move(store).value();
  }

  void upload(const TestKernel& kernel) const {
    auto put = http_request("PUT", server->base_url() + "/v1/entries/" + kernel.key,
                            {std::string("Authorization: Bearer ") + k_write_token}, kernel.bundle);
    REQUIRE(put.status == 201);
  }

  /// The status of GET /v1/entries/<key> (200 held, 404 absent, 410 revoked).
  long entry_status(const std::string& key) const {
    return http_request("GET", server->base_url() + "/v1/entries/" + key,
                        {std::string("Authorization: Bearer ") + k_admin_token})
        .status;
  }

  void revoke(const std::string& key, const std::string& reason) const {
    auto revoked = http_request("POST", server->base_url() + "/v1/revocations",
                                {std::string("Authorization: Bearer ") + k_admin_token, "Content-Type: application/json"},
                                json{{"keys", {key}}, {"reason", reason}}.dump());
    REQUIRE(revoked.status == 200);
  }
};

}  // namespace

TEST_CASE("remote::revocation: a 410 is a miss that purges the local copy and never opens the breaker") {
  RevocationRemote team;
  TempDir temp;
  const auto kernel = make_cheap_kernel(temp.path(), 11);
  team.upload(kernel);
  {
    // An older copy stays in the store while the interval is not over.
    auto store = team.open(temp / "cache", 3600);
    REQUIRE(store.get(kernel.key, temp / "out1").value().has_value());
  }
  team.revoke(kernel.key, "wrong results");
  WarningLog warnings;
  auto store = team.open(temp / "cache", 3600, &warnings);
  // Checked when the store first fetched: not due yet, so the copy is still served here.
  CHECK(holds(store, kernel.key));
  REQUIRE(store.remove(kernel.key).value());  // as aging would: the next lookup asks the server
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto got = store.get(kernel.key, temp / "out2");
    REQUIRE(got.ok());
    CHECK_FALSE(got->has_value());
  }
  CHECK(breaker_files(temp / "cache") == 0);
  CHECK(counter(store, "remote_errors") == 0);
  CHECK_FALSE(warnings.contains("failed"));
}

TEST_CASE("remote::revocation: the list reaches a store on use once the interval is over, and on pull") {
  RevocationRemote team;
  TempDir temp;
  const auto kernel = make_cheap_kernel(temp.path(), 12);
  const auto kept = make_cheap_kernel(temp.path(), 13);
  team.upload(kernel);
  team.upload(kept);
  for (const char* cache : {"machine-a", "machine-b"}) {
    auto store = team.open(temp / cache, 3600);
    REQUIRE(store.get(kernel.key, temp / cache / "out").value().has_value());
    REQUIRE(store.get(kept.key, temp / cache / "out-kept").value().has_value());
  }
  // Both stores checked (an empty list) when they were opened and used.
  CHECK(fs::exists(temp / "machine-a" / "remotes" /
                   (remote::remote_id(team.server->base_url()) + ".revocations")));
  team.revoke(kernel.key, "miscompiled for 910B");

  SUBCASE("on use, with the interval over (0: every use)") {
    WarningLog warnings;
    auto store = team.open(temp / "machine-a", 0, &warnings);
    auto got = store.get(kept.key, temp / "out-a");  // a hit on another key is a use too
    REQUIRE(got.ok());
    CHECK(got->has_value());
    CHECK_FALSE(holds(store, kernel.key));
    CHECK(holds(store, kept.key));
    CHECK(counter(store, "revoked") == 1);
    CHECK(warnings.contains("miscompiled for 910B"));
    auto again = store.get(kernel.key, temp / "out-a2");
    REQUIRE(again.ok());
    CHECK_FALSE(again->has_value());
  }
  SUBCASE("not on use within the interval, always on pull") {
    auto store = team.open(temp / "machine-b", 3600);
    REQUIRE(store.get(kept.key, temp / "out-b").value().has_value());
    CHECK(holds(store, kernel.key));  // checked less than an interval ago
    Store::TransferOptions pull;
    pull.keys = {kept.key};
    REQUIRE(store.pull(pull).ok());
    CHECK_FALSE(holds(store, kernel.key));
    CHECK(counter(store, "revoked") == 1);
  }
}

TEST_CASE("remote::revocation: a file:// remote keeps tombstones in its layout and refuses revoked keys") {
  TempDir temp;
  const std::string url = "file://" + (temp / "shared").string();
  const auto kernel = make_cheap_kernel(temp.path(), 14);
  auto writer = open_remote_store(temp / "writer", {url + "|upload"});
  auto reader = open_remote_store(temp / "reader", {url});
  publish_then_revoke(writer, reader, kernel, temp / "out", "bad on 310P");
  const auto tombstone = temp / "shared" / "v1" / "revocations" / (kernel.key + ".json");
  REQUIRE(fs::exists(tombstone));
  CHECK(json::parse(read_text(tombstone))["reason"] == "bad on 310P");
  CHECK_FALSE(holds(writer, kernel.key));  // the revoking machine drops its copy at once

  // Another machine: its copy goes at its next check, and the remote answers revoked.
  auto pull_reader = open_remote_store(temp / "reader", {url});
  Store::TransferOptions pull;
  REQUIRE(pull_reader.pull(pull).ok());
  CHECK_FALSE(holds(pull_reader, kernel.key));
  auto miss = pull_reader.get(kernel.key, temp / "out2");
  REQUIRE(miss.ok());
  CHECK_FALSE(miss->has_value());
  CHECK(breaker_files(temp / "reader") == 0);

  // An upload of the key is refused until it is unrevoked.
  check_refused_until_unrevoked(writer, kernel, [&] {
    return fs::exists(temp / "shared" / "v1" / "bundles" / kernel.key.substr(0, 2) / kernel.key);
  });
}

TEST_CASE("remote::revocation: a local tombstone refuses remote hits and pulls until unrevoke --local") {
  TempDir temp;
  const std::string url = "file://" + (temp / "shared").string();
  const auto kernel = make_cheap_kernel(temp.path(), 15);
  auto writer = open_remote_store(temp / "writer", {url + "|upload"});
  put_kernel(writer, kernel);
  Store::TransferOptions push;
  REQUIRE(writer.push(push).ok());

  auto store = open_remote_store(temp / "local", {url});
  REQUIRE(store.get(kernel.key, temp / "out").value().has_value());
  Store::RevokeOptions revoke;
  revoke.keys = {kernel.key};
  revoke.reason = "crashes on this board";
  revoke.local = true;
  REQUIRE(store.revoke(revoke).value() == std::vector<bool>{true});
  CHECK(fs::exists(temp / "local" / "revocations" / (kernel.key + ".json")));
  CHECK(counter(store, "revoked") == 1);
  CHECK_FALSE(store.get(kernel.key, temp / "out2").value().has_value());
  Store::TransferOptions pull;
  pull.keys = {kernel.key};
  auto pulled = store.pull(pull);
  REQUIRE(pulled.ok());
  CHECK(pulled->transferred == 0);
  CHECK_FALSE(holds(store, kernel.key));
  // The remote still has it: only this store refused it.
  CHECK(fs::exists(temp / "shared" / "v1" / "bundles" / kernel.key.substr(0, 2) / kernel.key));

  REQUIRE(store.unrevoke(revoke).value() == std::vector<bool>{true});
  CHECK(store.get(kernel.key, temp / "out3").value().has_value());
}

TEST_CASE("remote::revocation: a remote marked read-only refuses revoke and unrevoke, http as file") {
  RevocationRemote team;
  TempDir temp;
  const auto kernel = make_cheap_kernel(temp.path(), 16);
  team.upload(kernel);
  const std::string http_url = team.server->base_url();
  const std::string file_url = "file://" + (temp / "shared").string();
  StoreConfig config;
  config.cache_dir = temp / "cache";
  config.remotes = {http_url + "|read-only", file_url + "|read-only"};
  config.token_file = team.dir / "admin.token";  // the scope to revoke: only read-only stands in the way
  config.team_single_flight = "false";
  auto store = Store::open(config).value();
  Store::RevokeOptions options;
  options.keys = {kernel.key};
  options.reason = "wrong output";
  for (const auto& url : {http_url, file_url}) {
    CAPTURE(url);
    options.remote = url;
    auto revoked = store.revoke(options);
    REQUIRE_FALSE(revoked.ok());
    CHECK(revoked.error().code() == ErrorCode::usage);
    CHECK(revoked.error().message() == "remote " + url + " is read-only");
    auto unrevoked = store.unrevoke(options);
    REQUIRE_FALSE(unrevoked.ok());
    CHECK(unrevoked.error().code() == ErrorCode::usage);
    CHECK(unrevoked.error().message() == "remote " + url + " is read-only");
  }
  CHECK(team.entry_status(kernel.key) == 200);  // not revoked
  team.revoke(kernel.key, "wrong output");
  options.remote = http_url;
  REQUIRE_FALSE(store.unrevoke(options).ok());
  CHECK(team.entry_status(kernel.key) == 410);  // still revoked
}
