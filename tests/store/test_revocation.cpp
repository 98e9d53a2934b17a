// Tombstones (store/revocation.hpp, docs/formats.md "Tombstones"): the file
// form, a directory of them, the reason's rules, the signed message, and the
// local store's revoke/unrevoke.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "base/ed25519.hpp"
#include "store/local_store.hpp"
#include "store/revocation.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache;
using opcache::test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string k_a(64, 'a');
const std::string k_b(64, 'b');
const std::string k_c(64, 'c');

}  // namespace

TEST_CASE("store::TombstoneDirectory adds, finds, lists since a time in order, and removes tombstones") {
  TempDir temp;
  store::TombstoneDirectory tombstones(temp / "revocations");
  CHECK(tombstones.find(k_a).value() == std::nullopt);  // no directory yet: nothing revoked
  CHECK(tombstones.list(0, 10).value().empty());

  REQUIRE(tombstones.add({k_b, "second", 2'000'500}).ok());
  REQUIRE(tombstones.add({k_a, "first", 1'000'000}).ok());
  REQUIRE(tombstones.add({k_c, "third", 2'000'500}).ok());
  opcache::test::write_text(temp / "revocations" / "README", "not a tombstone");

  const auto found = tombstones.find(k_a).value();
  REQUIRE(found);
  CHECK(found->reason == "first");
  CHECK(found->time_ms == 1'000'000);
  CHECK(found->time_s() == 1000);
  const auto text = opcache::test::read_text(temp / "revocations" / (k_a + ".json"));
  CHECK(nlohmann::json::parse(text) ==
        nlohmann::json{{"key", k_a}, {"reason", "first"}, {"time", 1000}, {"time_ms", 1'000'000}});

  auto all = tombstones.list(0, 10).value();
  REQUIRE(all.size() == 3);
  CHECK(all[0].key == k_a);  // oldest first, then by key
  CHECK(all[1].key == k_b);
  CHECK(all[2].key == k_c);
  bool truncated = false;
  auto since = tombstones.list(2'000'000, 1, &truncated).value();
  REQUIRE(since.size() == 1);
  CHECK(since[0].key == k_b);
  CHECK(truncated);

  CHECK(tombstones.remove(k_b).value());
  CHECK_FALSE(tombstones.remove(k_b).value());
  CHECK(tombstones.find(k_b).value() == std::nullopt);
  CHECK(tombstones.list(0, 10).value().size() == 2);
}

TEST_CASE("store::parse_tombstone refuses malformed files and a tombstone filed under another key") {
  CHECK(store::parse_tombstone(store::tombstone_json({k_a, "why", 5}), k_a, "t").ok());
  const auto other = store::parse_tombstone(store::tombstone_json({k_a, "why", 5}), k_b, "t");
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code() == ErrorCode::corrupt);
  CHECK(store::parse_tombstone("{\"key\":\"" + k_a + "\"}", k_a, "t").error().code() == ErrorCode::corrupt);
  CHECK(store::parse_tombstone("not json", k_a, "t").error().code() == ErrorCode::corrupt);
}

TEST_CASE("store::check_revocation_reason wants one non-empty line of UTF-8 of at most 1024 bytes") {
  CHECK(store::check_revocation_reason("wrong results on Ascend910B1\tsee issue 42").ok());
  CHECK(store::check_revocation_reason("").error().code() == ErrorCode::usage);
  CHECK(store::check_revocation_reason("two\nlines").error().code() == ErrorCode::usage);
  CHECK(store::check_revocation_reason(std::string(1025, 'x')).error().code() == ErrorCode::usage);
  CHECK(store::check_revocation_reason("\xff\xfe").error().code() == ErrorCode::usage);
}

TEST_CASE("store::sign_revocation covers the keys, the reason and the time") {
  auto key = base::Ed25519PrivateKey::generate();
  REQUIRE(key.ok());
  auto signature = store::sign_revocation(*key, {k_a, k_b}, "bad", 100);
  REQUIRE(signature.ok());
  CHECK(store::revocation_signature_verifies(*signature, {k_a, k_b}, "bad", 100));
  CHECK_FALSE(store::revocation_signature_verifies(*signature, {k_a}, "bad", 100));
  CHECK_FALSE(store::revocation_signature_verifies(*signature, {k_a, k_b}, "good", 100));
  CHECK_FALSE(store::revocation_signature_verifies(*signature, {k_a, k_b}, "bad", 101));
  CHECK(store::revocation_message({k_a}, "bad", 7) == "opcache-revoke-v1\n7\nbad\n" + k_a + "\n");
}

TEST_CASE("store::LocalStore revoke deletes the entry and keeps a tombstone until unrevoke") {
  TempDir temp;
  store::StoreOptions options;
  options.root = temp / "cache";
  auto local = store::LocalStore::open(options);
  REQUIRE(local.ok());
  opcache::test::write_text(temp / "k.o", "kernel bytes");
  store::BundleInput input;
  input.descriptor = {{"op_type", "Revoked"}};
  input.scenario = {{"device_mode", "single"}, {"phase", "infer"}, {"toolchain", "t"}, {"soc", "s"}};
  input.members.push_back({"k.o", temp / "k.o", ""});
  auto put = (*local)->put(input, ReplacePolicy::keep_existing);
  REQUIRE(put.ok());
  const std::string key = put->key;

  CHECK((*local)->revoke({key, "crashes", 42}).value());
  CHECK_FALSE((*local)->contains(key).value());
  CHECK(fs::exists(temp / "cache" / "revocations" / (key + ".json")));
  CHECK((*local)->revocation(key).value()->reason == "crashes");
  CHECK_FALSE((*local)->revoke({key, "again", 43}).value());  // no entry left; the tombstone is replaced
  CHECK((*local)->revocation(key).value()->reason == "again");
  CHECK((*local)->revoke({key, "", 44}).error().code() == ErrorCode::usage);

  CHECK((*local)->unrevoke(key).value());
  CHECK_FALSE((*local)->unrevoke(key).value());
  CHECK((*local)->revocation(key).value() == std::nullopt);
}
