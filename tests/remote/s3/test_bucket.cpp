// The S3 bucket layer (remote/s3/bucket.hpp) shared by the s3:// remote and
// the server's S3 storage, against a scripted loopback server: the bundle is
// written before its marker, and a failed marker upload deletes the bundle
// again and fails the write.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "base/file_io.hpp"
#include "base/sha256.hpp"
#include "remote/remote_store.hpp"
#include "remote/s3/bucket.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::remote;
using opcache::test::FaultReply;
using opcache::test::FaultRequest;
using opcache::test::FaultServer;
using opcache::test::TempDir;

namespace {

const std::string k_bundle_key = opcache::base::sha256_hex("bucket test");

// The server answers a marker PUT with `marker_status` and a DELETE with
// `delete_status`; bundles HEAD as present once PUT.
FaultServer bucket_server(int marker_status, int delete_status) {
  return FaultServer([=](const FaultRequest& request) {
    const bool marker = request.target.find("/v1/index/") != std::string::npos;
    if (request.method == "PUT") {
      return FaultReply::status(marker ? marker_status : 200);
    }
    if (request.method == "HEAD") {
      return FaultReply::status(200);
    }
    if (request.method == "DELETE") {
      return FaultReply::status(delete_status);
    }
    return FaultReply::status(404);
  });
}

S3Bucket bucket_on(const FaultServer& server) {
  S3Location location{server.url(), "bucket", "pre", "us-east-1", true};
  S3Options options;
  options.retries = 0;
  return S3Bucket(S3Client(location, S3Credentials{"AKIDTEST", "secret", "", "test"}, options));
}

std::vector<std::string> methods_and_kinds(const FaultServer& server) {
  std::vector<std::string> seen;
  for (const auto& request : server.requests()) {
    const bool marker = request.target.find("/v1/index/") != std::string::npos;
    seen.push_back(request.method + (marker ? " marker" : " bundle"));
  }
  return seen;
}

const S3IndexFields k_fields{"npu", "inference", "cann-8", "910b", "MatMul"};

// Stores a small bundle through a bucket on `server`.
opcache::Status put_bundle(const FaultServer& server) {
  TempDir temp;
  REQUIRE(opcache::base::write_file_atomic(temp.path() / "bundle", "bytes").ok());
  S3Bucket bucket = bucket_on(server);
  return bucket.put_entry(k_bundle_key, temp.path() / "bundle", k_fields, "d1gest");
}

}  // namespace

TEST_CASE("remote::S3Bucket writes the bundle first and its marker second") {
  FaultServer server = bucket_server(200, 204);
  auto stored = put_bundle(server);
  REQUIRE_MESSAGE(stored.ok(), stored.error().message());
  CHECK(methods_and_kinds(server) == std::vector<std::string>{"PUT bundle", "PUT marker"});
  const auto requests = server.requests();
  CHECK(requests[0].target == "/bucket/pre/v1/bundles/" + k_bundle_key);
  CHECK(requests[0].header("x-amz-meta-opcache-digest") == "d1gest");
  CHECK(requests[1].target == "/bucket/pre/" + s3_index_name(k_fields, k_bundle_key));
}

TEST_CASE("remote::S3Bucket deletes the bundle again and fails when the marker upload fails") {
  FaultServer server = bucket_server(403, 204);
  auto stored = put_bundle(server);
  REQUIRE_FALSE(stored.ok());
  CHECK(stored.error().message().find("cannot write the listing marker of " + k_bundle_key) != std::string::npos);
  CHECK(stored.error().message().find("the bundle was deleted again") != std::string::npos);
  CHECK(methods_and_kinds(server) ==
        std::vector<std::string>{"PUT bundle", "PUT marker", "HEAD bundle", "DELETE bundle"});
}

TEST_CASE("remote::S3Bucket says so when undoing the bundle after a failed marker fails too") {
  FaultServer server = bucket_server(403, 403);
  auto stored = put_bundle(server);
  REQUIRE_FALSE(stored.ok());
  CHECK(stored.error().message().find("deleting the bundle failed too") != std::string::npos);
}

TEST_CASE("remote::S3Bucket filter matching: empty fields match everything, others must be equal") {
  CHECK(matches_filter(k_fields, S3IndexFields{}));
  CHECK(matches_filter(k_fields, S3IndexFields{"npu", "", "", "", "MatMul"}));
  CHECK_FALSE(matches_filter(k_fields, S3IndexFields{"cpu", "", "", "", ""}));
  CHECK_FALSE(matches_filter(k_fields, S3IndexFields{"", "", "", "", "Add"}));
  CHECK(json_text(nlohmann::json{{"a", "x"}, {"b", 3}}, "a") == "x");
  CHECK(json_text(nlohmann::json{{"a", "x"}, {"b", 3}}, "b").empty());
  CHECK(json_text(nlohmann::json{{"a", "x"}}, "c").empty());
}

TEST_CASE("remote::S3Bucket the s3:// remote's upload fails and leaves no bundle when its marker cannot be written") {
  TempDir temp;
  const auto kernel = opcache::test::make_cheap_kernel(temp.path() / "src", 1);
  const auto bundle = opcache::test::write_bundle_file(temp.path(), kernel);
  int bundle_heads = 0;  // the first HEAD (before the upload) finds nothing, later ones the bundle
  FaultServer server([&bundle_heads](const FaultRequest& request) {
    const bool marker = request.target.find("/v1/index/") != std::string::npos;
    if (request.target.find("/v1/revocations/") != std::string::npos) {
      return FaultReply::status(404);  // the upload first looks for a tombstone: none
    }
    if (request.method == "HEAD") {
      return FaultReply::status(++bundle_heads == 1 ? 404 : 200);
    }
    return FaultReply::status(request.method == "PUT" && marker ? 403 : request.method == "DELETE" ? 204 : 200);
  });
  RemoteOptions options;
  options.url = "s3://bucket/pre?endpoint=" + server.url();
  options.retries = 0;
  auto remote = make_s3_remote(options, [](const char* name) -> std::optional<std::string> {
    const std::string variable = name;
    if (variable == "AWS_ACCESS_KEY_ID") {
      return "AKIDTEST";
    }
    return variable == "AWS_SECRET_ACCESS_KEY" ? std::optional<std::string>("secret") : std::nullopt;
  });
  REQUIRE_MESSAGE(remote.ok(), remote.error().message());
  auto uploaded = (*remote)->upload(kernel.key, bundle, {});
  REQUIRE_FALSE(uploaded.ok());
  CHECK(uploaded.error().message().find("the bundle was deleted again") != std::string::npos);
  CHECK(server.count("DELETE") == 1);
}
