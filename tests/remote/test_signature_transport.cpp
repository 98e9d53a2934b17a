// Signatures travel with entries through every remote kind (http, file, s3):
// an entry signed locally is pushed, then pulled into an empty store that
// trusts the key (require_signature=remote by default) and stored with its
// signature; an unsigned one is refused (exit 3, refused_untrusted), and so
// is it by the layered lookup (a miss); `push --add-signatures` fixes it.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/environment.hpp"
#include "remote/s3/client.hpp"
#include "remote/s3/credentials.hpp"
#include "remote/s3/url.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/process.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

using namespace opcache::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A remote URL and the token file its clients need ("" for none).
struct RemoteUnderTest {
  std::string url;
  fs::path token_file;
};

ProcessResult cli(const fs::path& cache, const RemoteUnderTest& remote, std::vector<std::string> args) {
  std::vector<std::string> all = {"-C", cache.string(), "--remote", remote.url};
  if (!remote.token_file.empty()) {
    all.insert(all.end(), {"--token-file", remote.token_file.string()});
  }
  all.insert(all.end(), args.begin(), args.end());
  return run_cli(all, hermetic_cli());
}

// The entry of `key` in `opcache ls --json` of `cache`, or null.
json listed_entry(const fs::path& cache, const fs::path& trusted, const std::string& key) {
  auto listed = run_cli({"-C", cache.string(), "--no-remote", "--trusted-keys", trusted.string(), "--json", "ls"},
                        hermetic_cli());
  REQUIRE_MESSAGE(listed.exit_code == 0, listed.err);
  auto parsed = json::parse(listed.out, nullptr, false);
  const json& entries = parsed.is_object() && parsed.contains("entries") ? parsed["entries"] : parsed;
  for (const auto& entry : entries) {
    if (entry.value("key", "") == key) {
      return entry;
    }
  }
  return nullptr;
}

// The whole story on one remote.
void check_signatures_travel(const RemoteUnderTest& remote) {
  TempDir temp;
  const fs::path source = temp / "source";
  auto keygen = run_cli({"trust", "keygen", "ci", "--out", (temp / "ci.pem").string()}, hermetic_cli());
  REQUIRE_MESSAGE(keygen.exit_code == 0, keygen.err);
  const std::string key_line = keygen.out.substr(0, keygen.out.find('\n'));
  write_text(temp / "trusted", key_line + "\n");
  const fs::path trusted = temp / "trusted";

  const auto signed_kernel = make_cheap_kernel(temp / "k1", 11);
  const auto unsigned_kernel = make_cheap_kernel(temp / "k2", 12);
  {
    auto store = open_remote_store(source, {});
    put_kernel(store, signed_kernel);
    put_kernel(store, unsigned_kernel);
  }
  auto signed_run = run_cli({"-C", source.string(), "--signing-key", (temp / "ci.pem").string(), "sign",
                             signed_kernel.key},
                            hermetic_cli());
  REQUIRE_MESSAGE(signed_run.exit_code == 0, signed_run.err);
  auto pushed = cli(source, remote, {"push"});
  REQUIRE_MESSAGE(pushed.exit_code == 0, pushed.err);

  // Pulled into an empty store that trusts the key: the signed entry is
  // stored with its signature, the unsigned one refused.
  const fs::path target = temp / "target";
  auto pulled = cli(target, remote, {"--trusted-keys", trusted.string(), "--json", "pull"});
  CHECK_MESSAGE(pulled.exit_code == 3, pulled.out << pulled.err);
  CHECK(pulled.err.find(unsigned_kernel.key) != std::string::npos);
  auto entry = listed_entry(target, trusted, signed_kernel.key);
  REQUIRE_MESSAGE(entry.is_object(), "signed entry not pulled: " << pulled.out << pulled.err);
  REQUIRE(entry["signatures"].size() == 1);
  CHECK(entry["signatures"][0]["public_key"] == key_line.substr(key_line.find(':') + 1));
  CHECK(entry["signatures"][0]["name"] == "ci");
  CHECK(listed_entry(target, trusted, unsigned_kernel.key).is_null());
  {
    auto store = open_remote_store(target, {});
    CHECK(counter(store, "refused_untrusted") == 1);
  }

  // The layered lookup refuses it too: a miss.
  auto looked_up = cli(temp / "lookup", remote, {"--trusted-keys", trusted.string(), "get", unsigned_kernel.key,
                                                 "--out", (temp / "out").string()});
  CHECK_MESSAGE(looked_up.exit_code == 1, looked_up.err);

  // Signed afterwards and sent with push --add-signatures: now it is pulled.
  auto signed_later = run_cli({"-C", source.string(), "--signing-key", (temp / "ci.pem").string(), "sign",
                               unsigned_kernel.key},
                              hermetic_cli());
  REQUIRE_MESSAGE(signed_later.exit_code == 0, signed_later.err);
  auto added = cli(source, remote, {"push", "--add-signatures"});
  CHECK_MESSAGE(added.exit_code == 0, added.out << added.err);
  auto pulled_again = cli(target, remote, {"--trusted-keys", trusted.string(), "pull"});
  CHECK_MESSAGE(pulled_again.exit_code == 0, pulled_again.out << pulled_again.err);
  CHECK(listed_entry(target, trusted, unsigned_kernel.key).is_object());
}

}  // namespace

TEST_CASE("remote::signatures travel through an http remote: push, pull, refusal, layered miss, add-signatures") {
  TempDir dir;
  write_text(dir / "tokens", token_line(k_write_token, "ci", "read,write"));
  write_text(dir / "client.token", std::string(k_write_token) + "\n");
  ServerProcess server(dir / "storage", {"--tokens", (dir / "tokens").string()});
  check_signatures_travel({server.base_url(), dir / "client.token"});
}

TEST_CASE("remote::signatures travel through a file remote, in <key>.sig beside the bundle") {
  TempDir dir;
  check_signatures_travel({"file://" + (dir / "shared").string(), {}});
  std::size_t signature_files = 0;
  for (const auto& file : fs::recursive_directory_iterator(dir / "shared" / "v1" / "bundles")) {
    signature_files += file.path().extension() == ".sig" ? 1 : 0;
  }
  CHECK(signature_files == 2);
}

TEST_CASE("remote::signatures travel through an s3 remote, in v1/signatures/<key>") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  use_moto_test_credentials();
  const std::string url = "s3://opcache-signatures/team?endpoint=" + MotoServer::shared().endpoint();
  auto location = opcache::remote::parse_s3_url(url);
  REQUIRE(location.ok());
  auto credentials = opcache::remote::load_s3_credentials(opcache::base::process_environment());
  REQUIRE(credentials.ok());
  opcache::remote::S3Client client(*location, *credentials);
  REQUIRE(client.create_bucket_if_missing().ok());
  check_signatures_travel({url, {}});
  auto page = client.list("v1/signatures/", "", "", 100);
  REQUIRE(page.ok());
  CHECK(page->objects.size() == 2);
}

TEST_CASE("remote::push to a server with --require-signature: the signed entry is stored, the unsigned one refused "
          "as untrusted with the server's code") {
  TempDir dir;
  auto keygen = run_cli({"trust", "keygen", "ci", "--out", (dir / "ci.pem").string()}, hermetic_cli());
  REQUIRE_MESSAGE(keygen.exit_code == 0, keygen.err);
  write_text(dir / "trusted", keygen.out);
  write_text(dir / "tokens", token_line(k_write_token, "ci", "read,write"));
  write_text(dir / "client.token", std::string(k_write_token) + "\n");
  ServerProcess server(dir / "storage", {"--tokens", (dir / "tokens").string(), "--trusted-keys",
                                         (dir / "trusted").string(), "--require-signature"});
  const RemoteUnderTest remote{server.base_url(), dir / "client.token"};
  const auto signed_kernel = make_cheap_kernel(dir / "k1", 21);
  const auto unsigned_kernel = make_cheap_kernel(dir / "k2", 22);
  {
    auto store = open_remote_store(dir / "source", {});
    put_kernel(store, signed_kernel);
    put_kernel(store, unsigned_kernel);
  }
  auto signed_run = run_cli({"-C", (dir / "source").string(), "--signing-key", (dir / "ci.pem").string(), "sign",
                             signed_kernel.key},
                            hermetic_cli());
  REQUIRE_MESSAGE(signed_run.exit_code == 0, signed_run.err);
  auto pushed = cli(dir / "source", remote, {"--json", "push"});
  // The server's 403 is `untrusted` on the client: refused (exit 3), not failed.
  CHECK_MESSAGE(pushed.exit_code == 3, pushed.out << pushed.err);
  auto summary = json::parse(pushed.out, nullptr, false);
  REQUIRE_MESSAGE(summary.is_object(), pushed.out << pushed.err);
  CHECK(summary["transferred"] == 1);
  CHECK(summary["refused"] == 1);
  CHECK(summary["failed"] == 0);
  CHECK(summary["failures"].dump().find("signature_required") != std::string::npos);
  auto query = http_request("GET", server.base_url() + "/v1/entries/" + unsigned_kernel.key,
                            {"Authorization: Bearer " + std::string(k_write_token)});
  CHECK(query.status == 404);
  auto served = http_request("GET", server.base_url() + "/v1/entries/" + signed_kernel.key,
                             {"Authorization: Bearer " + std::string(k_write_token)});
  CHECK(served.status == 200);
  CHECK_FALSE(served.header("x-opcache-signature").empty());
}
