// Remote configuration (remote/remote_config.hpp): spec attributes and their
// errors, the order of sources (flags, OPCACHE_REMOTE, config file), and
// where tokens come from.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "base/file_io.hpp"
#include "remote/remote_config.hpp"
#include "tests/support/env_lookup.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::remote;
using opcache::test::env_of;
using opcache::test::TempDir;
namespace fs = std::filesystem;

namespace {

fs::path write(const fs::path& path, const std::string& text) {
  REQUIRE(opcache::base::write_file_atomic(path, text).ok());
  return path;
}

std::string spec_error(const std::string& spec) {
  auto parsed = parse_remote_spec(spec, "--remote");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().code() == opcache::ErrorCode::usage);
  return parsed.error().message();
}

}  // namespace

TEST_CASE("remote::RemoteConfig parses every spec attribute") {
  auto parsed = parse_remote_spec(
      "https://cache.example:8443|read-only|upload|connect-timeout=150|timeout=900|retries=4|parallelism=3|"
      "cooldown=7|ca-file=/etc/ca.pem",
      "--remote");
  REQUIRE(parsed.ok());
  CHECK(parsed->url == "https://cache.example:8443");
  CHECK(parsed->read_only);
  CHECK(parsed->upload);
  CHECK(parsed->connect_timeout_ms == 150);
  CHECK(parsed->timeout_ms == 900);
  CHECK(parsed->retries == 4);
  CHECK(parsed->parallelism == 3);
  CHECK(parsed->cooldown_s == 7);
  CHECK(parsed->ca_file == "/etc/ca.pem");
  CHECK(parsed->source == "--remote");

  auto defaults = parse_remote_spec("s3://bucket/prefix", "OPCACHE_REMOTE");
  REQUIRE(defaults.ok());
  CHECK_FALSE(defaults->read_only);
  CHECK(defaults->retries == 2);
  CHECK(defaults->cooldown_s == 60);
}

TEST_CASE("remote::RemoteConfig attribute errors name the attribute and the allowed values") {
  CHECK(spec_error("http://h|colour=blue").find("colour is not a remote attribute") != std::string::npos);
  CHECK(spec_error("http://h|retries=11").find("retries \"11\" must be an integer from 0 to 10") != std::string::npos);
  CHECK(spec_error("http://h|timeout=soon").find("timeout \"soon\" must be an integer from 0 to 3600000") !=
        std::string::npos);
  CHECK(spec_error("ftp://h").find("must start with http://, https://, s3:// or file://") != std::string::npos);
  CHECK(spec_error("http://").find("must start with") != std::string::npos);
}

TEST_CASE("remote::RemoteConfig refuses parallelism=0 instead of taking it for 1") {
  CHECK(spec_error("http://cache:8080|parallelism=0") ==
        "--remote http://cache:8080: parallelism \"0\" must be an integer from 1 to 256");
  CHECK(spec_error("http://cache:8080|parallelism=257") ==
        "--remote http://cache:8080: parallelism \"257\" must be an integer from 1 to 256");
  auto one = parse_remote_spec("http://cache:8080|parallelism=1", "--remote");
  REQUIRE(one.ok());
  CHECK(one->parallelism == 1);
}

TEST_CASE("remote::RemoteConfig read-only and upload take every boolean word, and bare means true") {
  for (const auto& [word, expected] : std::map<std::string, bool>{{"on", true},
                                                                  {"off", false},
                                                                  {"yes", true},
                                                                  {"no", false},
                                                                  {"1", true},
                                                                  {"0", false},
                                                                  {"true", true},
                                                                  {"false", false}}) {
    CAPTURE(word);
    auto parsed = parse_remote_spec("http://cache:8080|upload=" + word + "|read-only=" + word, "--remote");
    REQUIRE(parsed.ok());
    CHECK(parsed->upload == expected);
    CHECK(parsed->read_only == expected);
  }
  auto bare = parse_remote_spec("http://cache:8080|upload|read_only", "--remote");
  REQUIRE(bare.ok());
  CHECK(bare->upload);
  CHECK(bare->read_only);
  // Before, "on" fell through to false: a remote meant to be read-only accepted pushes.
  auto read_only = parse_remote_spec("http://cache:8080|read-only=on", "--remote");
  REQUIRE(read_only.ok());
  CHECK(read_only->read_only);
}

TEST_CASE("remote::RemoteConfig refuses a boolean attribute that is no boolean, naming the attribute and the value") {
  CHECK(spec_error("http://cache:8080|upload=maybe") ==
        "--remote http://cache:8080: upload \"maybe\" must be true or false (or 1/0, on/off, yes/no)");
  CHECK(spec_error("http://cache:8080|read-only=TRUE").find("read-only \"TRUE\" must be true or false") !=
        std::string::npos);
  TempDir temp;
  const fs::path config =
      write(temp.path() / "opcache.conf", "[remote \"team\"]\nurl = http://a\nupload = sometimes\n");
  auto remotes = resolve_remotes(RemoteOverrides{}, env_of({}), config);
  REQUIRE_FALSE(remotes.ok());
  CHECK(remotes.error().code() == opcache::ErrorCode::usage);
  CHECK(remotes.error().message().find("[remote \"team\"]: upload \"sometimes\" must be true or false") !=
        std::string::npos);
}

TEST_CASE("remote::RemoteConfig takes flags over OPCACHE_REMOTE over the config file") {
  TempDir temp;
  const fs::path config = write(temp.path() / "op_cache.ini", "[remote \"team\"]\nurl = http://from-file\n");
  const auto env = env_of({{"OPCACHE_REMOTE", "http://env-a; file:///env/b\thttp://env-c"}});

  RemoteOverrides flags;
  flags.remotes = {"http://flag"};
  auto from_flags = resolve_remotes(flags, env, config);
  REQUIRE(from_flags.ok());
  REQUIRE(from_flags->size() == 1);
  CHECK((*from_flags)[0].url == "http://flag");

  auto from_env = resolve_remotes({}, env, config);
  REQUIRE(from_env.ok());
  REQUIRE(from_env->size() == 3);
  CHECK((*from_env)[1].url == "file:///env/b");
  CHECK((*from_env)[2].source == "OPCACHE_REMOTE");

  auto from_file = resolve_remotes({}, env_of({}), config);
  REQUIRE(from_file.ok());
  REQUIRE(from_file->size() == 1);
  CHECK((*from_file)[0].url == "http://from-file");
  CHECK((*from_file)[0].source == config.string() + " [remote \"team\"]");

  RemoteOverrides none;
  none.no_remote = true;
  auto disabled = resolve_remotes(none, env, config);
  REQUIRE(disabled.ok());
  CHECK(disabled->empty());

  auto missing_file = resolve_remotes({}, env_of({}), temp.path() / "absent.ini");
  REQUIRE(missing_file.ok());
  CHECK(missing_file->empty());
}

TEST_CASE("remote::RemoteConfig reads config sections in file order with their attributes") {
  TempDir temp;
  const fs::path config = write(temp.path() / "op_cache.ini",
                                "[settings]\nmode = on\n"
                                "[remote \"b\"]\nurl = s3://bucket\nread-only = true\n"
                                "[remote \"a\"]\nurl = http://a\nretries = 0\n");
  auto remotes = resolve_remotes({}, env_of({}), config);
  REQUIRE(remotes.ok());
  REQUIRE(remotes->size() == 2);
  CHECK((*remotes)[0].url == "s3://bucket");
  CHECK((*remotes)[0].read_only);
  CHECK((*remotes)[1].retries == 0);

  const fs::path no_url = write(temp.path() / "no_url.ini", "[remote \"x\"]\ntimeout = 5\n");
  auto missing = resolve_remotes({}, env_of({}), no_url);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message() == no_url.string() + " [remote \"x\"] has no url");

  const fs::path bad_attribute = write(temp.path() / "bad.ini", "[remote \"x\"]\nurl = http://x\nspeed = 3\n");
  auto bad = resolve_remotes({}, env_of({}), bad_attribute);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("[remote \"x\"]: speed is not a remote attribute") != std::string::npos);

  const fs::path syntax = write(temp.path() / "syntax.ini", "[remote \"x\"]\nthis is not ini\n");
  auto broken = resolve_remotes({}, env_of({}), syntax);
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.error().message().find(syntax.string() + ": line 2 is not INI syntax") != std::string::npos);
}

TEST_CASE("remote::RemoteConfig tokens: a section's token_file, else --token-file, else OPCACHE_TOKEN") {
  TempDir temp;
  const fs::path section_token = write(temp.path() / "section.token", "from-section\n");
  const fs::path flag_token = write(temp.path() / "flag.token", "from-flag\r\n");
  const fs::path config =
      write(temp.path() / "op_cache.ini", "[remote \"a\"]\nurl = http://a\ntoken_file = " + section_token.string() +
                                              "\n[remote \"b\"]\nurl = http://b\n");
  const auto env = env_of({{"OPCACHE_TOKEN", "from-env"}});

  RemoteOverrides flags;
  flags.token_file = flag_token;
  auto with_flag = resolve_remotes(flags, env, config);
  REQUIRE(with_flag.ok());
  CHECK((*with_flag)[0].token == "from-section");
  CHECK((*with_flag)[1].token == "from-flag");

  auto with_env = resolve_remotes({}, env, config);
  REQUIRE(with_env.ok());
  CHECK((*with_env)[1].token == "from-env");

  RemoteOverrides two_lines;
  two_lines.token_file = write(temp.path() / "two.token", "a\nb\n");
  auto bad = resolve_remotes(two_lines, env, config);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("must hold the token on one line") != std::string::npos);

  RemoteOverrides absent;
  absent.token_file = temp.path() / "absent.token";
  auto missing = resolve_remotes(absent, env, config);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find("token file " + (temp.path() / "absent.token").string()) == 0);
}
