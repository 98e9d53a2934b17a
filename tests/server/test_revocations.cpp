// Revocation on a real `opcache serve` (docs/protocol.md "Revocation"):
// POST /v1/revocations (admin) writes tombstones and deletes entries, GET and
// HEAD of a revoked key answer 410 with the reason, a PUT of one is 410 until
// DELETE /v1/revocations/{key}, GET /v1/revocations lists them, a second
// server over the same storage agrees, and a server with trusted keys
// refuses an unsigned revocation.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/base64.hpp"
#include "base/ed25519.hpp"
#include "store/revocation.hpp"
#include "tests/support/api_schema.hpp"
#include "tests/support/files.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

using namespace opcache::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct RevocationServer {
  TempDir dir;
  fs::path storage;
  std::unique_ptr<ServerProcess> process;

  explicit RevocationServer(std::vector<std::string> extra = {}, fs::path shared_storage = {}) {
    storage = shared_storage.empty() ? dir / "storage" : shared_storage;
    write_text(dir / "tokens", token_line(k_admin_token, "admin", "admin") +
                                   token_line(k_write_token, "ci", "read,write") +
                                   token_line(k_read_token, "dev", "read"));
    extra.insert(extra.begin(), {"--tokens", (dir / "tokens").string()});
    process = std::make_unique<ServerProcess>(storage, extra);
  }

  HttpResponse request(const std::string& method, const std::string& path, const char* token,
                       const std::string& body = {}) const {
    std::vector<std::string> headers = {std::string("Authorization: Bearer ") + token};
    if (!body.empty()) {
      headers.push_back("Content-Type: application/json");
    }
    return http_request(method, process->base_url() + path, headers, body);
  }

  HttpResponse put(const TestKernel& kernel) const {
    return http_request("PUT", process->base_url() + "/v1/entries/" + kernel.key,
                        {std::string("Authorization: Bearer ") + k_write_token}, kernel.bundle);
  }

  HttpResponse revoke(const std::vector<std::string>& keys, const std::string& reason,
                      const char* token = k_admin_token) const {
    return request("POST", "/v1/revocations", token, json{{"keys", keys}, {"reason", reason}}.dump());
  }
};

}  // namespace

TEST_CASE("server::revocations: a revoked key is 410 on GET, HEAD and PUT with its reason, listed since a time, "
          "and served again after DELETE") {
  RevocationServer server;
  TempDir temp;
  const auto kernel = make_cheap_kernel(temp.path(), 1);
  const auto other = make_cheap_kernel(temp.path(), 2);
  REQUIRE(server.put(kernel).status == 201);
  REQUIRE(server.put(other).status == 201);
  const std::string entry = "/v1/entries/" + kernel.key;
  REQUIRE(server.request("GET", entry, k_read_token).status == 200);

  // Only an admin may revoke; a refused revocation changes nothing.
  CHECK(server.revoke({kernel.key}, "wrong results", k_write_token).status == 403);
  CHECK(server.request("GET", entry, k_read_token).status == 200);
  CHECK(server.revoke({kernel.key}, "").status == 400);
  CHECK(server.revoke({"not-a-key"}, "bad").error_code() == "bad_request");
  CHECK(server.request("POST", "/v1/revocations", k_admin_token, "{\"keys\":[]}").status == 400);

  const auto revoked = server.revoke({kernel.key, std::string(64, 'e')}, "wrong results on 910B");
  REQUIRE(revoked.status == 200);
  const auto revoked_body = checked_json(revoked, "revoke-response.schema.json");
  CHECK(revoked_body["revoked"] == json::array({{{"key", kernel.key}, {"deleted", true}},
                                                {{"key", std::string(64, 'e')}, {"deleted", false}}}));
  CHECK(revoked_body["reason"] == "wrong results on 910B");

  // GET: 410 with the reason; HEAD: 410 with the header; the other entry is untouched.
  const auto get = server.request("GET", entry, k_read_token);
  CHECK(get.status == 410);
  const auto gone = checked_json(get, "revoked.schema.json");
  CHECK(gone["key"] == kernel.key);
  CHECK(gone["reason"] == "wrong results on 910B");
  CHECK(gone["message"].get<std::string>().find("opcache unrevoke " + kernel.key) != std::string::npos);
  const auto head = server.request("HEAD", entry, k_read_token);
  CHECK(head.status == 410);
  CHECK(head.header("x-opcache-revoked") == "wrong%20results%20on%20910B");
  CHECK(server.request("GET", "/v1/entries/" + other.key, k_read_token).status == 200);
  // ?wait= does not hold a revoked key: it is answered at once.
  CHECK(server.request("HEAD", entry + "?wait=30", k_read_token).status == 410);
  // The bundle is gone from the storage: no object holds its bytes any more.
  auto query = server.request("POST", "/v1/entries/query", k_read_token, json{{"keys", {kernel.key}}}.dump());
  CHECK(json::parse(query.body)["missing"] == json::array({kernel.key}));

  // PUT is refused until unrevoked, and counted.
  const auto put = server.put(kernel);
  CHECK(put.status == 410);
  CHECK(put.error_code() == "revoked");
  CHECK(put.body.find("opcache unrevoke " + kernel.key) != std::string::npos);
  CHECK(opcache::test::without_replica_label(server.request("GET", "/metrics", k_read_token).body)
            .find("opcache_uploads_rejected_total{reason=\"revoked\"} 1") != std::string::npos);

  // The list: read scope, bounded, oldest first; `since` after them is empty.
  CHECK(server.request("GET", "/v1/revocations", "no-such-token").status == 401);
  const auto listed = server.request("GET", "/v1/revocations?since=0", k_read_token);
  REQUIRE(listed.status == 200);
  const auto list = checked_json(listed, "revocations-response.schema.json");
  REQUIRE(list["revocations"].size() == 2);
  CHECK(list["truncated"] == false);
  std::vector<std::string> keys;
  for (const auto& item : list["revocations"]) {
    keys.push_back(item["key"]);
    CHECK(item["reason"] == "wrong results on 910B");
    CHECK(item["time"] == revoked_body["time"]);
  }
  CHECK(keys == std::vector<std::string>{kernel.key, std::string(64, 'e')});
  const auto later = list["now"].get<std::int64_t>() + 1;
  const auto none = server.request("GET", "/v1/revocations?since=" + std::to_string(later), k_read_token);
  CHECK(checked_json(none, "revocations-response.schema.json")["revocations"].empty());
  const auto limited = server.request("GET", "/v1/revocations?limit=1", k_read_token);
  CHECK(json::parse(limited.body)["revocations"].size() == 1);
  CHECK(json::parse(limited.body)["truncated"] == true);
  CHECK(server.request("GET", "/v1/revocations?since=-1", k_read_token).status == 400);
  CHECK(server.request("GET", "/v1/revocations?colour=1", k_read_token).status == 400);

  // The tombstone is a documented file in the storage.
  const auto tombstone_file = server.storage / "revocations" / (kernel.key + ".json");
  REQUIRE(fs::exists(tombstone_file));
  const auto tombstone = json::parse(read_text(tombstone_file));
  CHECK(tombstone["key"] == kernel.key);
  CHECK(tombstone["reason"] == "wrong results on 910B");

  // Unrevoke: admin only; then the key is a plain miss and may be uploaded again.
  CHECK(server.request("DELETE", "/v1/revocations/" + kernel.key, k_write_token).status == 403);
  const auto unrevoked = server.request("DELETE", "/v1/revocations/" + kernel.key, k_admin_token);
  CHECK(unrevoked.status == 200);
  CHECK(json::parse(unrevoked.body) == json{{"key", kernel.key}, {"unrevoked", true}});
  CHECK(server.request("DELETE", "/v1/revocations/" + kernel.key, k_admin_token).status == 404);
  CHECK(!fs::exists(tombstone_file));
  CHECK(server.request("GET", entry, k_read_token).status == 404);
  CHECK(server.put(kernel).status == 201);
  const auto again = server.request("GET", entry, k_read_token);
  CHECK(again.status == 200);
  CHECK(again.body == kernel.bundle);
}

TEST_CASE("server::revocations survive a restart and a second server over the same storage refuses the key") {
  TempDir temp;
  const auto kernel = make_cheap_kernel(temp.path(), 3);
  const fs::path storage = temp.path() / "shared-storage";
  RevocationServer first({}, storage);
  REQUIRE(first.put(kernel).status == 201);
  REQUIRE(first.revoke({kernel.key}, "miscompiled").status == 200);

  RevocationServer second({}, storage);
  const auto get = second.request("GET", "/v1/entries/" + kernel.key, k_read_token);
  CHECK(get.status == 410);
  CHECK(json::parse(get.body)["reason"] == "miscompiled");
  CHECK(second.put(kernel).status == 410);
  CHECK(json::parse(second.request("GET", "/v1/revocations", k_read_token).body)["revocations"].size() == 1);

  first.process->stop();
  RevocationServer restarted({}, storage);
  CHECK(restarted.request("HEAD", "/v1/entries/" + kernel.key, k_read_token).status == 410);
}

TEST_CASE("server::revocations on a server with trusted keys need a signature by one of them") {
  auto trusted = opcache::base::Ed25519PrivateKey::generate();
  auto stranger = opcache::base::Ed25519PrivateKey::generate();
  REQUIRE(trusted.ok());
  REQUIRE(stranger.ok());
  TempDir keys;
  write_text(keys / "trusted", "ci:" + opcache::base::base64_encode(trusted->public_key()) + "\n");
  RevocationServer server({"--trusted-keys", (keys / "trusted").string()});
  const std::vector<std::string> revoked_keys = {std::string(64, 'c')};
  const std::string reason = "bad kernel";
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();

  auto signed_body = [&](const opcache::base::Ed25519PrivateKey& signer, std::int64_t time,
                         const std::string& signed_reason) {
    auto signature = opcache::store::sign_revocation(signer, revoked_keys, signed_reason, time);
    REQUIRE(signature.ok());
    return json{{"keys", revoked_keys},
                {"reason", reason},
                {"time", time},
                {"signatures", json::array({{{"public_key", opcache::base::base64_encode(signature->public_key)},
                                             {"signature", opcache::base::base64_encode(signature->signature)}}})}}
        .dump();
  };

  const auto unsigned_request = server.revoke(revoked_keys, reason);
  CHECK(unsigned_request.status == 403);
  CHECK(unsigned_request.error_code() == "signature_required");
  const auto by_stranger = server.request("POST", "/v1/revocations", k_admin_token, signed_body(*stranger, now, reason));
  CHECK(by_stranger.status == 403);
  CHECK(by_stranger.error_code() == "untrusted_signature");
  const auto forged = server.request("POST", "/v1/revocations", k_admin_token, signed_body(*trusted, now, "other"));
  CHECK(forged.status == 403);
  CHECK(forged.error_code() == "bad_signature");
  const auto stale = server.request("POST", "/v1/revocations", k_admin_token, signed_body(*trusted, now - 3600, reason));
  CHECK(stale.status == 403);
  CHECK(stale.error_code() == "bad_signature");
  CHECK(json::parse(server.request("GET", "/v1/revocations", k_read_token).body)["revocations"].empty());

  const auto accepted = server.request("POST", "/v1/revocations", k_admin_token, signed_body(*trusted, now, reason));
  CHECK(accepted.status == 200);
  CHECK(server.request("GET", "/v1/entries/" + revoked_keys[0], k_read_token).status == 410);
}
