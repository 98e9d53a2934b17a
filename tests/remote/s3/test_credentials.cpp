// S3 credentials (remote/s3/credentials.hpp): the environment, then the
// shared credentials file's profile, and messages saying what was looked at.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "remote/s3/credentials.hpp"
#include "tests/support/env_lookup.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache;
using namespace opcache::test;
using remote::load_s3_credentials;
namespace fs = std::filesystem;

namespace {

using Env = std::map<std::string, std::string>;

}  // namespace

TEST_CASE("remote::load_s3_credentials prefers the environment, then the credentials file profile") {
  TempDir temp;
  const fs::path file = temp / "credentials";
  write_text(file,
             "[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = defaultsecret\n\n"
             "# CI profile\n[ci]\naws_access_key_id=CIKEY\naws_secret_access_key=ci/secret+x\n"
             "aws_session_token = citoken\n\n[broken]\naws_access_key_id = ONLYKEY\n");

  SUBCASE("environment wins over the file") {
    auto credentials = load_s3_credentials(env_of({{"AWS_ACCESS_KEY_ID", "ENVKEY"},
                                                   {"AWS_SECRET_ACCESS_KEY", "envsecret"},
                                                   {"AWS_SESSION_TOKEN", "envtoken"},
                                                   {"AWS_SHARED_CREDENTIALS_FILE", file.string()}}));
    REQUIRE(credentials.ok());
    CHECK(credentials->access_key_id == "ENVKEY");
    CHECK(credentials->secret_access_key == "envsecret");
    CHECK(credentials->session_token == "envtoken");
    CHECK(credentials->source == "environment");
  }
  SUBCASE("the file's default profile") {
    auto credentials = load_s3_credentials(env_of({{"AWS_SHARED_CREDENTIALS_FILE", file.string()}}));
    REQUIRE(credentials.ok());
    CHECK(credentials->access_key_id == "DEFAULTKEY");
    CHECK(credentials->secret_access_key == "defaultsecret");
    CHECK(credentials->session_token.empty());
    CHECK(credentials->source == file.string() + " [default]");
  }
  SUBCASE("AWS_PROFILE picks the section") {
    auto credentials =
        load_s3_credentials(env_of({{"AWS_SHARED_CREDENTIALS_FILE", file.string()}, {"AWS_PROFILE", "ci"}}));
    REQUIRE(credentials.ok());
    CHECK(credentials->access_key_id == "CIKEY");
    CHECK(credentials->secret_access_key == "ci/secret+x");
    CHECK(credentials->session_token == "citoken");
  }
  SUBCASE("$HOME/.aws/credentials when AWS_SHARED_CREDENTIALS_FILE is unset") {
    fs::create_directories(temp / "home" / ".aws");
    fs::copy_file(file, temp / "home" / ".aws" / "credentials");
    auto credentials = load_s3_credentials(env_of({{"HOME", (temp / "home").string()}, {"AWS_PROFILE", "ci"}}));
    REQUIRE(credentials.ok());
    CHECK(credentials->access_key_id == "CIKEY");
  }
  SUBCASE("empty variables count as unset") {
    auto credentials = load_s3_credentials(env_of(
        {{"AWS_ACCESS_KEY_ID", ""}, {"AWS_SECRET_ACCESS_KEY", ""}, {"AWS_SHARED_CREDENTIALS_FILE", file.string()}}));
    REQUIRE(credentials.ok());
    CHECK(credentials->access_key_id == "DEFAULTKEY");
  }
}

TEST_CASE("remote::load_s3_credentials reports what it looked at when it finds nothing usable") {
  TempDir temp;
  const fs::path file = temp / "credentials";
  write_text(file, "[default]\naws_access_key_id = K\naws_secret_access_key = S\n[broken]\naws_access_key_id = K\n");
  const auto message_of = [](const Env& env) {
    auto credentials = load_s3_credentials(env_of(env));
    REQUIRE_FALSE(credentials.ok());
    CHECK(credentials.error().code() == ErrorCode::usage);
    return credentials.error().message();
  };
  const std::string nothing = message_of({{"HOME", temp.path().string()}});
  CHECK(nothing.find("AWS_ACCESS_KEY_ID") != std::string::npos);
  CHECK(nothing.find((temp / ".aws" / "credentials").string()) != std::string::npos);
  CHECK(nothing.find("profile default") != std::string::npos);

  CHECK(message_of({{"AWS_ACCESS_KEY_ID", "K"}, {"AWS_SHARED_CREDENTIALS_FILE", file.string()}})
            .find("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not") != std::string::npos);
  CHECK(message_of({{"AWS_SECRET_ACCESS_KEY", "S"}}).find("AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID") !=
        std::string::npos);
  CHECK(message_of({{"AWS_SHARED_CREDENTIALS_FILE", file.string()}, {"AWS_PROFILE", "nope"}})
            .find("has no profile [nope]") != std::string::npos);
  CHECK(message_of({{"AWS_SHARED_CREDENTIALS_FILE", file.string()}, {"AWS_PROFILE", "broken"}})
            .find("[broken] lacks aws_access_key_id or aws_secret_access_key") != std::string::npos);
  CHECK(message_of({}).find("neither AWS_SHARED_CREDENTIALS_FILE nor HOME") != std::string::npos);
  write_text(file, "[default]\nthis line is not ini\n");
  CHECK(message_of({{"AWS_SHARED_CREDENTIALS_FILE", file.string()}}).find("line 2 is not INI syntax") !=
        std::string::npos);
}

