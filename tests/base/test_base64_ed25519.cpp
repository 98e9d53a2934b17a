// base/base64 (strict standard base64) and base/ed25519 (keys, PEM files,
// signatures) on OpenSSL.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "base/base64.hpp"
#include "base/ed25519.hpp"
#include "base/file_io.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::ErrorCode;
using opcache::base::base64_decode;
using opcache::base::base64_encode;
using opcache::base::Ed25519PrivateKey;
using opcache::test::TempDir;
namespace fs = std::filesystem;

TEST_CASE("base::base64 encodes RFC 4648 vectors and decodes only their one spelling") {
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}, {std::string("\xff\x00\xfe", 3), "/wD+"}};
  for (const auto& [bytes, text] : vectors) {
    CHECK(base64_encode(bytes) == text);
    auto decoded = base64_decode(text);
    REQUIRE(decoded);
    CHECK(*decoded == bytes);
  }
  for (const char* bad : {"Zg", "Zg=", "Zh==", "Zm9=", "Z===", "====", "Zm9v\n", "Zm 9", "Zg==Zg==", "Zm9-"}) {
    INFO(bad);
    CHECK_FALSE(base64_decode(bad).has_value());
  }
}

TEST_CASE("base::base64url encodes without padding and decodes only its one spelling") {
  using opcache::base::base64url_decode;
  using opcache::base::base64url_encode;
  CHECK(base64url_encode("") == "");
  CHECK(base64url_encode("f") == "Zg");
  CHECK(base64url_encode("fo") == "Zm8");
  CHECK(base64url_encode("foo") == "Zm9v");
  CHECK(base64url_encode("\xfb\xff") == "-_8");
  CHECK(base64url_decode("-_8") == std::optional<std::string>("\xfb\xff"));
  CHECK(base64url_decode("Zm8") == std::optional<std::string>("fo"));
  CHECK(base64url_decode("") == std::optional<std::string>(""));
  CHECK_FALSE(base64url_decode("Zm8="));   // padding
  CHECK_FALSE(base64url_decode("+/8"));    // the standard alphabet's two
  CHECK_FALSE(base64url_decode("Zm9vY"));  // 4n+1 characters
  CHECK_FALSE(base64url_decode("Zm9"));    // bits after the last byte
}

TEST_CASE("base::Ed25519PrivateKey signs, and ed25519_verify accepts only that signature of that message") {
  auto key = Ed25519PrivateKey::generate();
  REQUIRE(key.ok());
  CHECK(key->public_key().size() == 32);
  auto signature = key->sign("message");
  REQUIRE(signature.ok());
  CHECK(signature->size() == 64);
  CHECK(opcache::base::ed25519_verify(key->public_key(), "message", *signature));
  CHECK_FALSE(opcache::base::ed25519_verify(key->public_key(), "messagE", *signature));
  std::string flipped = *signature;
  flipped[10] ^= 1;
  CHECK_FALSE(opcache::base::ed25519_verify(key->public_key(), "message", flipped));
  CHECK_FALSE(opcache::base::ed25519_verify(key->public_key().substr(1), "message", *signature));
  CHECK_FALSE(opcache::base::ed25519_verify(key->public_key(), "message", signature->substr(1)));
}

TEST_CASE("base::Ed25519PrivateKey saves PEM with mode 0600, never overwrites, and loads only private files") {
  TempDir temp;
  auto key = Ed25519PrivateKey::generate();
  REQUIRE(key.ok());
  const auto path = temp / "ci.pem";
  REQUIRE(key->save_pem_file(path).ok());
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
  CHECK(opcache::base::read_file(path)->find("-----BEGIN PRIVATE KEY-----") == 0);

  const auto before = *opcache::base::read_file(path);
  auto again = key->save_pem_file(path);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code() == ErrorCode::usage);
  CHECK(*opcache::base::read_file(path) == before);

  auto loaded = Ed25519PrivateKey::load_pem_file(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->public_key() == key->public_key());

  fs::permissions(path, fs::perms::group_read, fs::perm_options::add);
  auto refused = Ed25519PrivateKey::load_pem_file(path);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == ErrorCode::usage);
  CHECK(refused.error().message().find("chmod 600") != std::string::npos);

  fs::create_symlink(path, temp / "link.pem");
  CHECK(Ed25519PrivateKey::load_pem_file(temp / "link.pem").error().code() == ErrorCode::usage);
  CHECK(Ed25519PrivateKey::load_pem_file(temp / "absent.pem").error().code() == ErrorCode::not_found);
  REQUIRE(opcache::base::write_file_atomic(temp / "junk.pem", "not a key").ok());
  fs::permissions(temp / "junk.pem", fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  CHECK(Ed25519PrivateKey::load_pem_file(temp / "junk.pem").error().code() == ErrorCode::usage);
}
