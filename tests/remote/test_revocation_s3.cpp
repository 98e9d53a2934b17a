// Revocation on S3 through moto_server (skipped with the reason when moto is
// not installed): an s3:// remote keeps tombstones in its layout
// (v1/revocations/<key>.json, docs/formats.md "Tombstones") and refuses the
// revoked key to readers and uploads; `opcache serve --storage s3://…`
// answers 410 for a revoked key, and so does a second replica over the same
// bucket.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.hpp"
#include "remote/s3/client.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::test;
using opcache::Store;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string s3_url(const std::string& bucket, const std::string& prefix) {
  return "s3://" + bucket + "/" + prefix + "?endpoint=" + MotoServer::shared().endpoint();
}

}  // namespace

TEST_CASE("remote::revocation: an s3:// remote keeps tombstones in the bucket and refuses revoked keys") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  use_moto_test_credentials();
  TempDir temp;
  const std::string url = s3_url("opcache-revoke-s3", "team");
  {
    auto location = opcache::remote::parse_s3_url(url);
    REQUIRE(location.ok());
    auto credentials = opcache::remote::load_s3_credentials(opcache::base::process_environment());
    REQUIRE(credentials.ok());
    opcache::remote::S3Client client(*location, *credentials);
    REQUIRE(client.create_bucket_if_missing().ok());
  }
  const auto kernel = make_cheap_kernel(temp.path(), 21);
  auto writer = open_remote_store(temp / "writer", {url + "|upload"});
  auto reader = open_remote_store(temp / "reader", {url});
  publish_then_revoke(writer, reader, kernel, temp / "out", "wrong tiling on 910B");
  CHECK_FALSE(holds(writer, kernel.key));

  // The reader's copy goes at its next pull, and a fresh machine misses.
  Store::TransferOptions pull;
  REQUIRE(reader.pull(pull).ok());
  CHECK_FALSE(holds(reader, kernel.key));
  auto fresh = open_remote_store(temp / "fresh", {url});
  auto miss = fresh.get(kernel.key, temp / "out2");
  REQUIRE(miss.ok());
  CHECK_FALSE(miss->has_value());

  // An upload of the key is refused until it is unrevoked.
  int checks = 0;
  check_refused_until_unrevoked(writer, kernel, [&] {
    return fresh.get(kernel.key, temp / ("out-check" + std::to_string(++checks))).value().has_value();
  });
}

TEST_CASE("server::revocations on S3 storage: 410 for the revoked key on this replica and on a second one") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  use_moto_test_credentials();
  TempDir temp;
  const std::string admin = "s3-revoke-admin";
  const std::string writer = "s3-revoke-writer";
  write_text(temp / "tokens", opcache::base::sha256_hex(admin) + " admin admin\n" +
                                  opcache::base::sha256_hex(writer) + " writer read,write\n");
  const std::string storage = s3_url("opcache-revoke-serve", "replicas");
  ServerProcess first(storage, {"--tokens", (temp / "tokens").string()});
  const auto kernel = make_cheap_kernel(temp.path(), 22);
  HttpOptions upload;
  upload.body_file = write_bundle_file(temp.path(), kernel);
  auto put = http_request("PUT", first.base_url() + "/v1/entries/" + kernel.key,
                          {"Authorization: Bearer " + writer}, {}, upload);
  REQUIRE_MESSAGE(put.status == 201, put.body);

  auto revoked = http_request("POST", first.base_url() + "/v1/revocations",
                              {"Authorization: Bearer " + admin, "Content-Type: application/json"},
                              json{{"keys", {kernel.key}}, {"reason", "miscompiled"}}.dump());
  REQUIRE_MESSAGE(revoked.status == 200, revoked.body);
  auto get = http_request("GET", first.base_url() + "/v1/entries/" + kernel.key, {"Authorization: Bearer " + writer});
  CHECK(get.status == 410);
  CHECK(get.body.find("miscompiled") != std::string::npos);

  ServerProcess second(storage, {"--tokens", (temp / "tokens").string()});
  auto head = http_request("HEAD", second.base_url() + "/v1/entries/" + kernel.key, {"Authorization: Bearer " + writer});
  CHECK(head.status == 410);
  auto again = http_request("PUT", second.base_url() + "/v1/entries/" + kernel.key,
                            {"Authorization: Bearer " + writer}, {}, upload);
  CHECK(again.status == 410);
  auto listed = http_request("GET", second.base_url() + "/v1/revocations?since=0", {"Authorization: Bearer " + writer});
  REQUIRE(listed.status == 200);
  CHECK(json::parse(listed.body)["revocations"][0]["key"] == kernel.key);
}
