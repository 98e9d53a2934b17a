// POST /v1/entries/fetch on a real `opcache serve` (docs/protocol.md "Batch
// fetch"): many bundles in one response, byte-equal to what GET answers,
// with their signatures; misses and revoked keys said plainly; the response
// bounded (later, too_large); a filter instead of keys; read scope; bad
// bodies refused with precise errors. The stream is parsed here by hand
// (not by remote/bundle_stream), and every frame header is checked against
// schemas/api/fetch-frame.schema.json.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ed25519.hpp"
#include "base/sha256.hpp"
#include "store/signature.hpp"
#include "tests/support/api_schema.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

using namespace opcache::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct FetchServer {
  TempDir dir;
  std::unique_ptr<ServerProcess> process;

  FetchServer() {
    write_text(dir / "tokens", token_line(k_admin_token, "admin", "admin") +
                                   token_line(k_read_token, "dev", "read"));
    process = std::make_unique<ServerProcess>(dir / "storage",
                                              std::vector<std::string>{"--tokens", (dir / "tokens").string()});
  }

  HttpResponse request(const std::string& method, const std::string& path, const std::string& body = {},
                       const char* token = k_read_token) const {
    std::vector<std::string> headers = {"Content-Type: application/json"};
    if (token != nullptr) {
      headers.push_back(std::string("Authorization: Bearer ") + token);
    }
    return http_request(method, process->base_url() + path, headers, body);
  }

  void put(const TestKernel& kernel, const std::vector<std::string>& extra_headers = {}) const {
    std::vector<std::string> headers = {std::string("Authorization: Bearer ") + k_admin_token};
    headers.insert(headers.end(), extra_headers.begin(), extra_headers.end());
    auto stored = http_request("PUT", process->base_url() + "/v1/entries/" + kernel.key, headers, kernel.bundle);
    REQUIRE_MESSAGE(stored.status == 201, stored.body);
  }

  HttpResponse fetch(const json& body) const { return request("POST", "/v1/entries/fetch", body.dump()); }
};

struct Frame {
  json header;
  std::string body;
};

// The frames of a bundle stream, parsed by hand; REQUIREs a well-formed,
// complete stream whose headers all satisfy the schema.
std::vector<Frame> frames_of(const HttpResponse& response) {
  REQUIRE_MESSAGE(response.status == 200, response.body);
  CHECK(response.header("content-type") == "application/vnd.opcache.bundle-stream");
  const std::string& stream = response.body;
  REQUIRE(stream.substr(0, 8) == "OPCSTRM1");
  std::vector<Frame> frames;
  std::size_t at = 8;
  while (true) {
    REQUIRE(at + 4 <= stream.size());
    std::size_t length = 0;
    for (int i = 0; i < 4; ++i) {
      length = (length << 8) | static_cast<unsigned char>(stream[at + static_cast<std::size_t>(i)]);
    }
    at += 4;
    REQUIRE(at + length <= stream.size());
    Frame frame{json::parse(stream.substr(at, length)), {}};
    at += length;
    const std::string errors = schema_errors("fetch-frame.schema.json", frame.header);
    CHECK_MESSAGE(errors.empty(), errors << " in " << frame.header.dump());
    if (frame.header["status"] == "hit") {
      const auto bytes = frame.header["bytes"].get<std::size_t>();
      REQUIRE(at + bytes <= stream.size());
      frame.body = stream.substr(at, bytes);
      at += bytes;
    }
    frames.push_back(std::move(frame));
    if (frames.back().header["status"] == "end") {
      break;
    }
  }
  CHECK(at == stream.size());
  return frames;
}

}  // namespace

TEST_CASE("server::fetch sends the bundles of many keys in one response, byte-equal to GET, with misses and "
          "revocations said plainly") {
  FetchServer server;
  TempDir temp;
  std::vector<TestKernel> kernels;
  for (int i = 0; i < 3; ++i) {
    kernels.push_back(make_cheap_kernel(temp / "src", i));
  }
  // kernels[0] is signed: its frame carries the signature as GET's header does.
  auto signer = opcache::base::Ed25519PrivateKey::generate();
  REQUIRE(signer.ok());
  auto signature = opcache::store::sign_entry(*signer, kernels[0].key, opcache::base::sha256_hex(kernels[0].bundle));
  REQUIRE(signature.ok());
  const std::string signature_text = opcache::store::format_signature(*signature);
  server.put(kernels[0], {"X-Opcache-Signature: " + signature_text});
  server.put(kernels[1]);
  server.put(kernels[2]);
  const TestKernel revoked = make_cheap_kernel(temp / "src", 7);
  server.put(revoked);
  REQUIRE(server.request("POST", "/v1/revocations", json{{"keys", {revoked.key}}, {"reason", "miscompiled"}}.dump(),
                         k_admin_token)
              .status == 200);
  const std::string absent(64, 'e');

  auto frames = frames_of(server.fetch({{"keys", {kernels[2].key, absent, kernels[0].key, revoked.key, kernels[1].key}}}));
  REQUIRE(frames.size() == 6);
  CHECK(frames[0].header["key"] == kernels[2].key);
  CHECK(frames[0].header["status"] == "hit");
  CHECK(frames[1].header == json{{"status", "miss"}, {"key", absent}});
  CHECK(frames[2].header["key"] == kernels[0].key);
  CHECK(frames[3].header["status"] == "revoked");
  CHECK(frames[3].header["reason"] == "miscompiled");
  CHECK(frames[4].header["key"] == kernels[1].key);
  CHECK(frames[5].header == json{{"status", "end"}, {"entries", 5}});
  for (std::size_t i : {std::size_t(0), std::size_t(2), std::size_t(4)}) {
    const std::string key = frames[i].header["key"];
    auto got = server.request("GET", "/v1/entries/" + key);
    REQUIRE(got.status == 200);
    CHECK(frames[i].body == got.body);
    CHECK("\"" + frames[i].header["digest"].get<std::string>() + "\"" == got.header("etag"));
    CHECK(frames[i].header["signatures"] ==
          (key == kernels[0].key ? json::array({signature_text}) : json::array()));
  }
  // The frames count as lookups of kernels, and the GETs after them by the same client do not count again.
  auto status = json::parse(server.request("GET", "/v1/status").body);
  CHECK(status["hits"] == 3);    // three in the batch
  CHECK(status["misses"] == 2);  // the absent key and the revoked one
  const json summary = json::parse(server.request("GET", "/v1/stats/summary").body);
  CHECK(summary["hits"] == 3);
  CHECK(summary["misses"] == 2);
  std::size_t bundle_bytes = 0;
  for (std::size_t i : {std::size_t(0), std::size_t(2), std::size_t(4)}) {
    bundle_bytes += frames[i].body.size();
  }
  CHECK(summary["bytes_served"] == 2 * bundle_bytes);  // the batch's bundles, then each GET's
}

TEST_CASE("server::fetch bounds a response: bundles beyond 8 MiB are 'later', one larger than that 'too_large'") {
  FetchServer server;
  TempDir temp;
  std::vector<TestKernel> kernels;
  for (int i = 0; i < 3; ++i) {
    kernels.push_back(make_large_kernel(temp / "src", i, 3u << 20));  // 3 MiB each: two fit, the third does not
    server.put(kernels.back());
  }
  const TestKernel huge = make_large_kernel(temp / "src", 9, 9u << 20);
  server.put(huge);
  const TestKernel small = make_cheap_kernel(temp / "src", 1);
  server.put(small);

  auto frames = frames_of(server.fetch({{"keys", {huge.key, kernels[0].key, kernels[1].key, kernels[2].key, small.key}}}));
  REQUIRE(frames.size() == 6);
  CHECK(frames[0].header == json{{"status", "too_large"}, {"key", huge.key}});
  CHECK(frames[1].header["status"] == "hit");
  CHECK(frames[1].body == kernels[0].bundle);
  CHECK(frames[2].header["status"] == "hit");
  CHECK(frames[3].header == json{{"status", "later"}, {"key", kernels[2].key}});
  CHECK(frames[4].header == json{{"status", "later"}, {"key", small.key}});  // once full, the rest waits
  // A GET of the large one streams it from its file, byte-exact.
  auto alone = server.request("GET", "/v1/entries/" + huge.key);
  REQUIRE(alone.status == 200);
  CHECK(alone.body == huge.bundle);
  // Asked again, the later ones come.
  auto again = frames_of(server.fetch({{"keys", {kernels[2].key, small.key}}}));
  REQUIRE(again.size() == 3);
  CHECK(again[0].body == kernels[2].bundle);
  CHECK(again[1].body == small.bundle);
}

TEST_CASE("server::fetch by filter sends what GET /v1/entries lists, up to the limit") {
  FetchServer server;
  TempDir temp;
  const TestKernel square = make_test_kernel(temp / "src", "square", 21);
  server.put(square);
  for (int i = 0; i < 3; ++i) {
    server.put(make_cheap_kernel(temp / "src", i));
  }
  auto squares = frames_of(server.fetch({{"op_type", "square"}}));
  REQUIRE(squares.size() == 2);
  CHECK(squares[0].body == square.bundle);
  CHECK(frames_of(server.fetch({{"op_type", "add"}, {"limit", 2}})).size() == 3);
  CHECK(frames_of(server.fetch(json::object())).size() == 5);
  CHECK(frames_of(server.fetch({{"scenario", "phase=infer"}})).size() == 1);  // none: the end frame alone
}

TEST_CASE("server::fetch needs read scope and refuses malformed bodies with precise errors") {
  FetchServer server;
  CHECK(server.request("POST", "/v1/entries/fetch", R"({"keys":[]})", nullptr).status == 401);
  auto not_json = server.request("POST", "/v1/entries/fetch", "keys");
  CHECK(not_json.status == 400);
  CHECK(not_json.error_code() == "bad_request");
  auto bad_key = server.fetch({{"keys", {"ABC"}}});
  CHECK(bad_key.status == 400);
  CHECK(bad_key.error_code() == "invalid_key");
  CHECK(bad_key.body.find("keys[0]") != std::string::npos);
  auto mixed = server.fetch({{"keys", json::array()}, {"op_type", "x"}});
  CHECK(mixed.status == 400);
  CHECK(mixed.body.find("\\\"keys\\\" goes alone") != std::string::npos);
  auto unknown = server.fetch({{"colour", "red"}});
  CHECK(unknown.status == 400);
  CHECK(unknown.body.find("colour") != std::string::npos);
  auto bad_filter = server.fetch({{"scenario", "flavour=sweet"}});
  CHECK(bad_filter.status == 400);
  CHECK(bad_filter.body.find("flavour") != std::string::npos);
  CHECK(server.fetch({{"limit", 0}}).status == 400);
  json many = json::array();
  for (int i = 0; i < 10001; ++i) {
    many.push_back(std::string(64, 'a'));
  }
  auto too_many = server.fetch({{"keys", many}});
  CHECK(too_many.status == 413);
  CHECK(too_many.error_code() == "too_many_keys");
  auto empty = frames_of(server.fetch({{"keys", json::array()}}));
  CHECK(empty.size() == 1);
}
