// The s3:// remote against moto_server (skipped with the reason when moto is
// not installed), the server's S3 storage backend (`opcache serve --storage
// s3://…`) against moto, and an S3 endpoint that hangs (no moto needed).
#include <doctest/doctest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "remote/s3/client.hpp"
#include "base/sha256.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::test;
using opcache::Store;
using opcache::remote::S3Client;
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string s3_url(const std::string& bucket, const std::string& prefix, const std::string& endpoint) {
  return "s3://" + bucket + "/" + prefix + "?endpoint=" + endpoint;
}

// A client on the same bucket and prefix, to look at what the remote wrote.
S3Client bucket_client(const std::string& bucket, const std::string& prefix) {
  auto location = opcache::remote::parse_s3_url(s3_url(bucket, prefix, MotoServer::shared().endpoint()));
  REQUIRE(location.ok());
  auto credentials = opcache::remote::load_s3_credentials(opcache::base::process_environment());
  REQUIRE(credentials.ok());
  S3Client client(*location, *credentials);
  auto created = client.create_bucket_if_missing();
  REQUIRE_MESSAGE(created.ok(), (created.ok() ? "" : created.error().message()));
  return client;
}

bool has_object(S3Client& client, const std::string& name) {
  auto head = client.head(name);
  REQUIRE_MESSAGE(head.ok(), (head.ok() ? "" : head.error().message()));
  return head->has_value();
}

}  // namespace

TEST_CASE("remote::s3: upload queue, layered get and push/pull through moto") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  use_moto_test_credentials();
  S3Client bucket = bucket_client("opcache-remote-s3", "team/a");
  const std::string url = s3_url("opcache-remote-s3", "team/a", MotoServer::shared().endpoint());
  TempDir temp;
  const TestKernel kernel = make_test_kernel(temp / "src", "square", 80);

  // Upload on store, in the bucket layout (bundle and listing marker).
  {
    Store producer = open_remote_store(temp / "producer", {url + "|upload"});
    put_kernel(producer, kernel);
    CHECK(eventually([&] { return has_object(bucket, "v1/bundles/" + kernel.key); }));
  }
  auto markers = bucket.list("v1/index/", "", "", 1000);
  REQUIRE(markers.ok());
  REQUIRE(markers->objects.size() == 1);
  CHECK(markers->objects[0].name == "v1/index/single/train/8.0.RC2/Ascend910B1/square/" + kernel.key);

  // Layered get on another machine, then local.
  WarningLog warnings;
  Store consumer = open_remote_store(temp / "consumer", {url}, &warnings);
  auto got = consumer.get(kernel.key, temp / "out");
  REQUIRE_MESSAGE(got.ok(), got.error().message());
  REQUIRE(got->has_value());
  CHECK(directory_contents(temp / "out") == kernel.contents());
  CHECK(counter(consumer, "remote_hits") == 1);
  CHECK(*consumer.contains(kernel.key));
  CHECK_MESSAGE(warnings.all().empty(), warnings.joined());

  // push: 40 more entries (more than one HEAD per key would be worth), then pull by filter.
  std::vector<TestKernel> batch;
  for (int i = 0; i < 40; ++i) {
    batch.push_back(make_cheap_kernel(temp / "src", i));
  }
  Store pusher = open_remote_store(temp / "producer", {url});
  for (const auto& entry : batch) {
    put_kernel(pusher, entry);
  }
  auto pushed = pusher.push({});
  REQUIRE_MESSAGE(pushed.ok(), pushed.error().message());
  CHECK(pushed->requested == 41);
  CHECK(pushed->skipped == 1);
  CHECK(pushed->transferred == 40);
  CHECK(pushed->failed == 0);

  Store::TransferOptions only_add;
  only_add.filter.op_type = "add";
  auto pulled = consumer.pull(only_add);
  REQUIRE_MESSAGE(pulled.ok(), pulled.error().message());
  CHECK(pulled->requested == 40);
  CHECK(pulled->transferred == 40);
  CHECK(pulled->failed == 0);
  Store::TransferOptions infer;
  infer.filter.phase = "infer";
  auto none = consumer.pull(infer);
  REQUIRE(none.ok());
  CHECK(none->requested == 0);
  const TestKernel& sample = batch[17];
  auto local = consumer.get(sample.key, temp / "sample");
  REQUIRE(local.ok());
  REQUIRE(local->has_value());
  CHECK(directory_contents(temp / "sample") == sample.contents());
  CHECK(counter(consumer, "remote_hits") == 1);  // pulled, not fetched on demand

  // A read-only s3 remote receives nothing.
  const TestKernel extra = make_test_kernel(temp / "src", "neg", 81);
  {
    Store read_only =
        open_remote_store(temp / "ro", {url + "|read-only|upload", "file://" + (temp / "share").string() + "|upload"});
    put_kernel(read_only, extra);
    // The file:// remote queued at the same moment got it; the s3 one did not.
    CHECK(
        eventually([&] { return fs::exists(temp / "share" / "v1" / "bundles" / extra.key.substr(0, 2) / extra.key); }));
  }
  CHECK_FALSE(has_object(bucket, "v1/bundles/" + extra.key));
}

TEST_CASE("remote::s3: an object under the wrong key in the bucket is a miss and is not stored") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  use_moto_test_credentials();
  S3Client bucket = bucket_client("opcache-remote-s3-bad", "p");
  TempDir temp;
  const TestKernel wanted = make_test_kernel(temp / "src", "relu", 3);
  const TestKernel other = make_test_kernel(temp / "src", "relu", 4);
  REQUIRE(bucket.put_from_file("v1/bundles/" + wanted.key, write_bundle_file(temp.path(), other), {}).ok());
  WarningLog warnings;
  Store store = open_remote_store(temp / "cache",
                                  {s3_url("opcache-remote-s3-bad", "p", MotoServer::shared().endpoint())}, &warnings);
  auto got = store.get(wanted.key, temp / "out");
  REQUIRE_MESSAGE(got.ok(), got.error().message());
  CHECK_FALSE(got->has_value());
  CHECK(counter(store, "remote_corrupt") == 1);
  CHECK_FALSE(*store.contains(wanted.key));
  CHECK_FALSE(*store.contains(other.key));
  CHECK(count_files(temp / "cache" / "objects") == 0);
  CHECK(count_files(temp / "out") == 0);
  // A missing key is a plain miss without warnings.
  auto absent = store.get(opcache::base::sha256_hex("absent"), temp / "out");
  REQUIRE(absent.ok());
  CHECK_FALSE(absent->has_value());
  CHECK(warnings.all().size() == 1);
}

TEST_CASE("remote::s3: an S3 endpoint that hangs costs one timeout for a batch of 30 lookups") {
  use_moto_test_credentials();
  FaultServer endpoint([](const FaultRequest&) { return FaultReply::hang(); });
  TempDir temp;
  WarningLog warnings;
  Store store =
      open_remote_store(temp / "cache", {s3_url("bucket", "p", endpoint.url()) + "|timeout=1000|retries=2"}, &warnings);
  const auto start = Clock::now();
  for (int i = 0; i < 30; ++i) {
    auto got = store.get(opcache::base::sha256_hex(std::to_string(i)), temp / "out");
    REQUIRE(got.ok());
    CHECK_FALSE(got->has_value());
  }
  const double elapsed = seconds_since(start);
  CHECK(elapsed >= 0.9);                // the first lookup did wait for its timeout
  CHECK(endpoint.connections() == 1);  // a timeout is not retried, and the breaker skipped the other 29
  // Only a hang or 30 timeouts in a row (30 s) reach this; the batch costs one (1 s).
  CHECK_MESSAGE(elapsed < 15.0, "30 lookups took " << elapsed << " s");
  CHECK(warnings.all().size() == 1);
  CHECK(count_files(temp / "cache" / "objects") == 0);
}

TEST_CASE("remote::serve --storage s3://: PUT, GET, HEAD, query and list round trip through moto") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  use_moto_test_credentials();
  TempDir temp;
  const std::string reader = "s3-reader-token";
  const std::string writer = "s3-writer-token";
  write_text(temp / "tokens", opcache::base::sha256_hex(reader) + " reader read\n" +
                                  opcache::base::sha256_hex(writer) + " writer write\n");
  // The server creates the bucket itself.
  const std::string storage = s3_url("opcache-serve-s3", "replicas", MotoServer::shared().endpoint());
  ServerProcess server(storage, {"--tokens", (temp / "tokens").string()});
  const std::string base = server.base_url();
  const std::string read_auth = "Authorization: Bearer " + reader;
  const std::string write_auth = "Authorization: Bearer " + writer;

  std::vector<TestKernel> kernels = {make_test_kernel(temp / "src", "square", 7),
                                     make_test_kernel(temp / "src", "relu", 7)};
  for (int i = 0; i < 38; ++i) {
    kernels.push_back(make_cheap_kernel(temp / "src", i));
  }
  HttpClient client;
  for (const auto& kernel : kernels) {
    HttpOptions options;
    options.body_file = write_bundle_file(temp.path(), kernel);
    auto put = client.request("PUT", base + "/v1/entries/" + kernel.key,
                              {write_auth, "Content-Type: application/vnd.opcache.bundle"}, {}, options);
    REQUIRE_MESSAGE(put.status == 201, put.status << " " << put.body << "\n" << server.log_text());
  }
  // Idempotent: the same PUT again keeps the entry.
  {
    HttpOptions options;
    options.body_file = write_bundle_file(temp.path(), kernels[0]);
    auto again = client.request("PUT", base + "/v1/entries/" + kernels[0].key, {write_auth}, {}, options);
    CHECK(again.status == 200);
  }

  // GET and HEAD, byte-exact, with the digest as ETag.
  auto got = client.request("GET", base + "/v1/entries/" + kernels[0].key, {read_auth});
  REQUIRE(got.status == 200);
  CHECK(got.body == kernels[0].bundle);
  CHECK(got.header("etag").find(opcache::base::sha256_hex(kernels[0].bundle)) != std::string::npos);
  auto head = client.request("HEAD", base + "/v1/entries/" + kernels[1].key, {read_auth});
  CHECK(head.status == 200);
  CHECK(head.header("content-length") == std::to_string(kernels[1].bundle.size()));
  const std::string absent = opcache::base::sha256_hex("absent");
  CHECK(client.request("GET", base + "/v1/entries/" + absent, {read_auth}).status == 404);
  CHECK(client.request("HEAD", base + "/v1/entries/" + absent, {read_auth}).status == 404);

  // Query: a few keys (HEAD per key) and all 40 plus one absent (one listing).
  for (std::size_t count : {std::size_t{3}, kernels.size()}) {
    CAPTURE(count);
    json keys = json::array({absent});
    for (std::size_t i = 0; i < count; ++i) {
      keys.push_back(kernels[i].key);
    }
    auto query = client.request("POST", base + "/v1/entries/query", {read_auth, "Content-Type: application/json"},
                                json{{"keys", keys}}.dump());
    REQUIRE_MESSAGE(query.status == 200, query.body);
    auto answer = json::parse(query.body);
    CHECK(answer["present"].size() == count);
    CHECK(answer["missing"] == json::array({absent}));
    CHECK(answer["present"][0] == kernels[0].key);
  }

  // Listing with filters, and paging with the cursor.
  auto list = [&](const std::string& query) {
    auto response = client.request("GET", base + "/v1/entries?" + query, {read_auth});
    REQUIRE_MESSAGE(response.status == 200, response.body);
    return json::parse(response.body);
  };
  auto squares = list("op_type=square");
  REQUIRE(squares["entries"].size() == 1);
  CHECK(squares["entries"][0]["key"] == kernels[0].key);
  CHECK(squares["entries"][0]["scenario"]["soc"] == "Ascend910B1");
  CHECK(list("scenario=" + std::string("phase%3Dinfer"))["entries"].empty());
  std::set<std::string> seen;
  std::string after;
  int pages = 0;
  for (;;) {
    auto page = list("scenario=device%3Dsingle%2Cphase%3Dtrain&limit=15" + (after.empty() ? "" : "&after=" + after));
    ++pages;
    for (const auto& entry : page["entries"]) {
      CHECK(seen.insert(entry["key"].get<std::string>()).second);  // no entry twice
    }
    if (page["next"].is_null()) {
      break;
    }
    after = page["next"].get<std::string>();
    // The cursor is an object name; escape what a query string cannot carry.
    std::string escaped;
    for (char c : after) {
      escaped += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'
                     ? std::string(1, c)
                     : "%" + std::string(1, "0123456789ABCDEF"[(c >> 4) & 15]) + "0123456789ABCDEF"[c & 15];
    }
    after = escaped;
    REQUIRE(pages < 10);
  }
  CHECK(pages == 3);
  CHECK(seen.size() == kernels.size());

  // An opcache client pulls from this server like from any other.
  write_text(temp / "reader.token", reader + "\n");
  Store consumer = open_remote_store(temp / "cache", {base}, nullptr, temp / "reader.token");
  Store::TransferOptions everything;
  auto pulled = consumer.pull(everything);
  REQUIRE_MESSAGE(pulled.ok(), pulled.error().message());
  CHECK(pulled->transferred == static_cast<std::int64_t>(kernels.size()));
  auto hit = consumer.get(kernels[1].key, temp / "out");
  REQUIRE(hit.ok());
  REQUIRE(hit->has_value());
  CHECK(directory_contents(temp / "out") == kernels[1].contents());
}
