// Signatures on a real `opcache serve` (docs/protocol.md "Signatures"): PUT
// with X-Opcache-Signature headers, the headers on GET and HEAD, POST
// /v1/entries/{key}/signatures, and --require-signature refusing uploads a
// write token alone would have stored, counted by reason in /metrics.
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/base64.hpp"
#include "base/ed25519.hpp"
#include "base/sha256.hpp"
#include "server/api.hpp"
#include "store/signature.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/process.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/signing_keys.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

using namespace opcache::test;
using opcache::base::Ed25519PrivateKey;
using json = nlohmann::json;

namespace {

// `signer`'s signature of the entry (key, digest of `bundle_for_digest`).
opcache::Signature sign(const Ed25519PrivateKey& signer, const std::string& key, const std::string& bundle_for_digest) {
  auto signature = opcache::store::sign_entry(signer, key, opcache::base::sha256_hex(bundle_for_digest));
  REQUIRE(signature.ok());
  return *signature;
}

std::string signature_header(const opcache::Signature& signature) {
  return "X-Opcache-Signature: " + opcache::store::format_signature(signature);
}

// A server with one write token (and reads for it too), optionally enforcing
// signatures by `trusted`.
struct SigningServer {
  TempDir dir;
  std::unique_ptr<ServerProcess> process;

  SigningServer(const Ed25519PrivateKey* trusted, bool require, const std::string& storage = {}) {
    opcache::test::write_text(dir / "tokens", token_line(k_write_token, "ci", "read,write"));
    std::vector<std::string> args = {"--tokens", (dir / "tokens").string()};
    if (trusted != nullptr) {
      opcache::test::write_text(dir / "trusted",
                                "# team CI\nci:" + opcache::base::base64_encode(trusted->public_key()) + "\n");
      args.insert(args.end(), {"--trusted-keys", (dir / "trusted").string()});
    }
    if (require) {
      args.push_back("--require-signature");
    }
    process = std::make_unique<ServerProcess>(storage.empty() ? (dir / "storage").string() : storage, args);
  }

  std::string entry_url(const std::string& key) const { return process->base_url() + "/v1/entries/" + key; }

  HttpResponse put(const TestKernel& kernel, std::vector<std::string> headers) {
    headers.push_back(std::string("Authorization: Bearer ") + k_write_token);
    return opcache::test::http_request("PUT", entry_url(kernel.key), headers, kernel.bundle);
  }

  HttpResponse request(const std::string& method, const std::string& url, const std::string& body = {}) {
    std::vector<std::string> headers = {std::string("Authorization: Bearer ") + k_write_token};
    if (!body.empty()) {
      headers.push_back("Content-Type: application/json");
    }
    return opcache::test::http_request(method, url, headers, body);
  }

  std::string metrics() {
    return opcache::test::without_replica_label(request("GET", process->base_url() + "/metrics").body);
  }

  // Trusts `key` too (appended to the trusted-keys file), after SIGHUP.
  void trust_also(const Ed25519PrivateKey& key) {
    std::string text = read_text(dir / "trusted");
    write_text(dir / "trusted", text + "second:" + opcache::base::base64_encode(key.public_key()) + "\n");
    process->signal(SIGHUP);
  }
};

// The body of POST /v1/entries/{key}/signatures for `signatures`.
std::string signatures_body(const std::vector<opcache::Signature>& signatures) {
  json list = json::array();
  for (const auto& signature : signatures) {
    list.push_back({{"public_key", opcache::base::base64_encode(signature.public_key)},
                    {"signature", opcache::base::base64_encode(signature.signature)}});
  }
  return json{{"signatures", list}}.dump();
}

}  // namespace

TEST_CASE("server::--require-signature refuses unsigned, untrusted, replayed and wrong-digest uploads with a "
          "valid write token, stores nothing, counts each reason and serves the next trusted entry signed") {
  TempDir temp;
  const auto trusted = new_signing_key();
  const auto stranger = new_signing_key();
  SigningServer server(&trusted, /*require=*/true);
  const auto kernel = opcache::test::make_cheap_kernel(temp / "k", 1);
  const auto other = opcache::test::make_cheap_kernel(temp / "o", 2);
  REQUIRE(kernel.key != other.key);

  auto refused = [&](const std::vector<std::string>& headers, const std::string& code) {
    auto response = server.put(kernel, headers);
    CHECK_MESSAGE(response.status == 403, response.body);
    CHECK_MESSAGE(response.error_code() == code, response.body);
    CHECK(server.request("GET", server.entry_url(kernel.key)).status == 404);  // nothing stored
  };
  refused({}, "signature_required");
  refused({signature_header(sign(stranger, kernel.key, kernel.bundle))}, "untrusted_signature");
  // A trusted signature replayed from another entry, and one over another digest.
  refused({signature_header(sign(trusted, other.key, other.bundle))}, "bad_signature");
  auto wrong_digest = opcache::store::sign_entry(trusted, kernel.key, opcache::base::sha256_hex(other.bundle));
  REQUIRE(wrong_digest.ok());
  refused({signature_header(*wrong_digest)}, "bad_signature");

  auto malformed = server.put(kernel, {"X-Opcache-Signature: not-a-signature"});
  CHECK(malformed.status == 400);
  CHECK(malformed.error_code() == "malformed_signature");
  CHECK(malformed.body.find("X-Opcache-Signature") != std::string::npos);

  // Signed by the trusted key (and by a stranger, in one comma-joined header).
  const auto good = sign(trusted, kernel.key, kernel.bundle);
  const auto extra = sign(stranger, kernel.key, kernel.bundle);
  auto stored = server.put(kernel, {"X-Opcache-Signature: " + opcache::store::format_signature(good) + ", " +
                                        opcache::store::format_signature(extra)});
  CHECK_MESSAGE(stored.status == 201, stored.body);
  for (const char* method : {"GET", "HEAD"}) {
    auto served = server.request(method, server.entry_url(kernel.key));
    CHECK(served.status == 200);
    // Several headers; the client keeps the last: the second signature.
    CHECK(served.header("x-opcache-signature") == opcache::store::format_signature(extra));
  }
  auto fetched = server.request("GET", server.entry_url(kernel.key));
  CHECK(fetched.body == kernel.bundle);

  const auto metrics = server.metrics();
  CHECK(metrics.find("opcache_uploads_rejected_total{reason=\"signature_required\"} 1") != std::string::npos);
  CHECK(metrics.find("opcache_uploads_rejected_total{reason=\"untrusted_signature\"} 1") != std::string::npos);
  CHECK(metrics.find("opcache_uploads_rejected_total{reason=\"bad_signature\"} 2") != std::string::npos);
  CHECK(metrics.find("opcache_uploads_rejected_total{reason=\"malformed_signature\"} 1") != std::string::npos);
}

TEST_CASE("server::without --require-signature an unsigned upload is stored, a bad signature is still refused") {
  TempDir temp;
  const auto signer = new_signing_key();
  SigningServer server(nullptr, false);
  const auto kernel = opcache::test::make_cheap_kernel(temp / "k", 3);
  const auto other = opcache::test::make_cheap_kernel(temp / "o", 4);
  auto bad = server.put(kernel, {signature_header(sign(signer, other.key, other.bundle))});
  CHECK(bad.status == 403);
  CHECK(bad.error_code() == "bad_signature");
  CHECK(server.request("GET", server.entry_url(kernel.key)).status == 404);
  auto stored = server.put(kernel, {});
  CHECK_MESSAGE(stored.status == 201, stored.body);
  auto served = server.request("GET", server.entry_url(kernel.key));
  CHECK(served.status == 200);
  CHECK(served.header("x-opcache-signature").empty());
}

TEST_CASE("server::POST /v1/entries/{key}/signatures adds a verifying signature (served at once), 404 when "
          "absent, 403 bad_signature for one that does not verify, 400 for a malformed body") {
  TempDir temp;
  const auto signer = new_signing_key();
  SigningServer server(nullptr, false);
  const auto kernel = opcache::test::make_cheap_kernel(temp / "k", 5);
  const auto other = opcache::test::make_cheap_kernel(temp / "o", 6);
  REQUIRE(server.put(kernel, {}).status == 201);
  // Read once, so the server keeps the small bundle in memory.
  REQUIRE(server.request("GET", server.entry_url(kernel.key)).header("x-opcache-signature").empty());

  const std::string url = server.entry_url(kernel.key) + "/signatures";
  const auto good = sign(signer, kernel.key, kernel.bundle);
  auto added = server.request("POST", url, signatures_body({good}));
  CHECK_MESSAGE(added.status == 200, added.body);
  CHECK(json::parse(added.body)["added"] == 1);
  CHECK(server.request("GET", server.entry_url(kernel.key)).header("x-opcache-signature") ==
        opcache::store::format_signature(good));
  auto again = server.request("POST", url, signatures_body({good}));
  CHECK(again.status == 200);
  CHECK(json::parse(again.body)["added"] == 0);

  auto absent = server.request("POST", server.entry_url(k_absent_key) + "/signatures", signatures_body({good}));
  CHECK(absent.status == 404);
  auto bad = server.request("POST", url, signatures_body({sign(signer, kernel.key, other.bundle)}));
  CHECK(bad.status == 403);
  CHECK(bad.error_code() == "bad_signature");
  auto malformed = server.request("POST", url, R"({"signatures": [{"public_key": "x"}]})");
  CHECK(malformed.status == 400);
  CHECK(malformed.body.find("signatures[0]") != std::string::npos);
  CHECK(server.request("GET", url).status == 405);
}

TEST_CASE("server::an entry with two signatures serves both, on GET from the file, GET from memory and HEAD") {
  TempDir temp;
  const auto first = new_signing_key();
  const auto second = new_signing_key();
  SigningServer server(nullptr, false);
  const auto kernel = opcache::test::make_cheap_kernel(temp / "k", 7);
  REQUIRE(server.put(kernel, {}).status == 201);
  const auto signatures = std::vector{sign(first, kernel.key, kernel.bundle), sign(second, kernel.key, kernel.bundle)};
  const auto added = server.request("POST", server.entry_url(kernel.key) + "/signatures", signatures_body(signatures));
  REQUIRE(json::parse(added.body)["added"] == 2);
  const std::vector<std::string> expected = {opcache::store::format_signature(signatures[0]),
                                             opcache::store::format_signature(signatures[1])};
  // The first GET reads the bundle's file; the second is served from memory.
  for (const char* method : {"GET", "GET", "HEAD"}) {
    CAPTURE(method);
    const auto response = server.request(method, server.entry_url(kernel.key));
    REQUIRE(response.status == 200);
    auto served = response.header_values("x-opcache-signature");
    std::sort(served.begin(), served.end());
    auto sorted = expected;
    std::sort(sorted.begin(), sorted.end());
    CHECK(served == sorted);
  }
}

TEST_CASE("server::serve --require-signature without --trusted-keys is a usage error") {
  TempDir temp;
  auto result = opcache::test::run_cli({"serve", "--storage", (temp / "s").string(), "--require-signature"},
                                       opcache::test::hermetic_cli());
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("--trusted-keys") != std::string::npos);
}

TEST_CASE("server::match_route routes POST /v1/entries/{key}/signatures (write scope, small body) and checks the key") {
  using opcache::server::match_route;
  const std::string key(64, 'b');
  const auto route = match_route("POST", "/v1/entries/" + key + "/signatures");
  CHECK(route.error_status == 0);
  CHECK(route.id == opcache::server::RouteId::signatures);
  CHECK(route.key == key);
  CHECK(route.scope == opcache::server::Scope::write);
  CHECK(route.body == opcache::server::BodyKind::small);
  const auto wrong_method = match_route("PUT", "/v1/entries/" + key + "/signatures");
  CHECK(wrong_method.error_status == 405);
  CHECK(wrong_method.allow == "POST");
  const auto bad_key = match_route("POST", "/v1/entries/xyz/signatures");
  CHECK(bad_key.error_status == 400);
  CHECK(bad_key.error_code == "invalid_key");
  CHECK(match_route("PUT", "/v1/entries/" + key).id == opcache::server::RouteId::entry_put);
}

TEST_CASE("server::SIGHUP reloads --trusted-keys: a key added to the file is trusted without a restart") {
  TempDir temp;
  const auto first = new_signing_key();
  const auto second = new_signing_key();
  SigningServer server(&first, /*require=*/true);
  const auto kernel = make_cheap_kernel(temp / "k", 7);
  const auto header = signature_header(sign(second, kernel.key, kernel.bundle));
  CHECK(server.put(kernel, {header}).error_code() == "untrusted_signature");
  server.trust_also(second);
  CHECK(eventually([&] { return server.put(kernel, {header}).status == 201; }));
  CHECK(server.process->log_text().find("reloaded 2 trusted keys") != std::string::npos);
}

TEST_CASE("server::serve --storage s3:// stores, serves and adds signatures (v1/signatures/<key>) through moto") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  use_moto_test_credentials();
  TempDir temp;
  const auto trusted = new_signing_key();
  const auto other = new_signing_key();
  SigningServer server(&trusted, /*require=*/true,
                       "s3://opcache-serve-signatures/p?endpoint=" + MotoServer::shared().endpoint());
  const auto kernel = make_cheap_kernel(temp / "k", 8);
  CHECK(server.put(kernel, {}).error_code() == "signature_required");
  CHECK(server.request("GET", server.entry_url(kernel.key)).status == 404);
  const auto good = sign(trusted, kernel.key, kernel.bundle);
  auto stored = server.put(kernel, {signature_header(good)});
  CHECK_MESSAGE(stored.status == 201, stored.body);
  CHECK(server.request("GET", server.entry_url(kernel.key)).header("x-opcache-signature") ==
        opcache::store::format_signature(good));
  const auto added_signature = sign(other, kernel.key, kernel.bundle);
  auto added = server.request("POST", server.entry_url(kernel.key) + "/signatures", signatures_body({added_signature}));
  CHECK_MESSAGE(added.status == 200, added.body);
  CHECK(server.request("GET", server.entry_url(kernel.key)).header("x-opcache-signature") ==
        opcache::store::format_signature(added_signature));
  auto bad = server.request("POST", server.entry_url(kernel.key) + "/signatures",
                            signatures_body({sign(other, kernel.key, "another bundle")}));
  CHECK(bad.error_code() == "bad_signature");
}
