// `opcache serve`'s settings table (server/server_config.hpp): the [serve]
// section of its config file, the OPCACHE_SERVE_* variables, help and ranges.
#include <doctest/doctest.h>

#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "opcache_test_paths.hpp"
#include "server/server_config.hpp"
#include "tests/support/env_lookup.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using opcache::server::ServerConfig;
using opcache::test::env_of;
using opcache::test::TempDir;

// Loads "[serve]\n<line>" into a default config; the error message, or "" on success.
std::string load_line(const TempDir& temp, const std::string& line, ServerConfig& config) {
  const auto path = temp / "serve.ini";
  opcache::test::write_text(path, "[serve]\n" + line + "\n");
  auto loaded = opcache::server::load_server_config_file(path, config);
  return loaded.ok() ? "" : loaded.error().message();
}

}  // namespace

TEST_CASE("server::[serve] bundle_cache sets the bytes of bundles kept in memory, 0 keeps none, and text is refused") {
  TempDir temp;
  ServerConfig config;
  CHECK(config.bundle_cache_bytes == 64u << 20);
  CHECK(load_line(temp, "bundle_cache = 1048576", config).empty());
  CHECK(config.bundle_cache_bytes == 1048576);
  CHECK(load_line(temp, "bundle_cache = 0", config).empty());
  CHECK(config.bundle_cache_bytes == 0);
  const std::string refused = load_line(temp, "bundle_cache = lots", config);
  CHECK(refused.find("bundle_cache") != std::string::npos);
  CHECK(load_line(temp, "bundle_cache = -1", config).find("must be an integer") != std::string::npos);
}

namespace {

using opcache::server::serve_settings;
using opcache::server::ServeSetting;

const ServeSetting& row_named(const std::string& key) {
  for (const auto& row : serve_settings()) {
    if (row.key == key) {
      return row;
    }
  }
  FAIL("no serve setting " << key);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("server::serve settings: each row has a flag, a [serve] key and OPCACHE_SERVE_<KEY>, all distinct") {
  std::set<std::string> flags;
  std::set<std::string> keys;
  for (const auto& row : serve_settings()) {
    std::string key(row.key);
    CAPTURE(key);
    std::string expected_env = "OPCACHE_SERVE_";
    std::string expected_flag = "--";
    for (char c : key) {
      expected_env += c == '_' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      expected_flag += c == '_' ? '-' : c;
    }
    CHECK(row.env == expected_env);
    CHECK(opcache::server::primary_flag(row) == expected_flag);
    CHECK(flags.insert(std::string(row.flag)).second);
    CHECK(keys.insert(key).second);
    CHECK_FALSE(row.help.empty());
  }
  // Every setting that had a flag or a key before the table still has both.
  for (const char* key :
       {"listen",          "storage",           "threads",   "workers",  "tokens",       "anonymous_read",
        "trusted_keys",    "require_signature", "tls_cert",  "tls_key",  "max_body",     "max_header",
        "request_timeout", "idle_timeout",      "lease_ttl", "max_wait", "max_inflight", "bundle_cache",
        "log_format",      "access_log",        "port_file", "temp_dir"}) {
    CHECK(keys.count(key) == 1);
  }
}

TEST_CASE("server::serve settings: help shows an integer's range, the default, the [serve] key and the variable") {
  CHECK(opcache::server::serve_help(row_named("max_body")) ==
        "Largest accepted upload (413 above) (1024..1099511627776; default 536870912; [serve] max_body; "
        "OPCACHE_SERVE_MAX_BODY)");
  CHECK(opcache::server::default_text(row_named("listen")) == "127.0.0.1:8080");
  CHECK(opcache::server::default_text(row_named("anonymous_read")) == "false");
  CHECK(opcache::server::default_text(row_named("access_log")) == "standard error");
  CHECK(opcache::server::default_text(row_named("tokens")) == "none");
}

TEST_CASE("server::serve settings: docs/operations.md lists every variable") {
  const std::string docs = opcache::test::read_text(std::filesystem::path(OPCACHE_SOURCE_DIR) / "docs/operations.md");
  for (const auto& row : serve_settings()) {
    CAPTURE(row.env);
    CHECK(docs.find("`" + std::string(row.env) + "`") != std::string::npos);
  }
}

TEST_CASE("server::serve settings: the environment beats the [serve] file, which beats the default") {
  TempDir temp;
  ServerConfig config;
  CHECK(config.threads == 2);
  CHECK(load_line(temp, "threads = 3", config).empty());
  CHECK(config.threads == 3);
  REQUIRE(opcache::server::load_server_environment(env_of({{"OPCACHE_SERVE_THREADS", "5"}}), config).ok());
  CHECK(config.threads == 5);
  // Unset and empty variables leave the file's value.
  REQUIRE(opcache::server::load_server_environment(env_of({{"OPCACHE_SERVE_WORKERS", ""}}), config).ok());
  CHECK(config.workers == 4);
  // A flag is applied last (cli/cmd_serve.cpp) through the same row.
  REQUIRE(opcache::server::apply_serve_setting(config, row_named("threads"), "--threads", "7").ok());
  CHECK(config.threads == 7);
}

TEST_CASE("server::serve settings: booleans take every boolean word in the file and the environment") {
  TempDir temp;
  ServerConfig config;
  CHECK(load_line(temp, "anonymous_read = on", config).empty());
  CHECK(config.anonymous_read);
  CHECK(load_line(temp, "anonymous_read = no", config).empty());
  CHECK_FALSE(config.anonymous_read);
  REQUIRE(opcache::server::load_server_environment(env_of({{"OPCACHE_SERVE_ANONYMOUS_READ", "yes"}}), config).ok());
  CHECK(config.anonymous_read);
  CHECK(load_line(temp, "anonymous_read = maybe", config)
            .find("[serve] anonymous_read \"maybe\" must be true or false") != std::string::npos);
}

TEST_CASE("server::serve settings: a malformed environment value is a usage error naming the variable and the value") {
  ServerConfig config;
  auto loaded = opcache::server::load_server_environment(env_of({{"OPCACHE_SERVE_MAX_BODY", "5"}}), config);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().code() == opcache::ErrorCode::usage);
  CHECK(loaded.error().message() ==
        "environment variable OPCACHE_SERVE_MAX_BODY \"5\" must be an integer from 1024 to 1099511627776");
  auto listen = opcache::server::load_server_environment(env_of({{"OPCACHE_SERVE_LISTEN", "nowhere"}}), config);
  REQUIRE_FALSE(listen.ok());
  CHECK(listen.error().message().find("environment variable OPCACHE_SERVE_LISTEN") != std::string::npos);
  CHECK(listen.error().message().find("nowhere") != std::string::npos);
  CHECK(config.max_body_bytes == 512ull << 20);
}

TEST_CASE("server::serve settings: an unknown [serve] key is refused with its name") {
  TempDir temp;
  ServerConfig config;
  CHECK(load_line(temp, "thread = 3", config).find("[serve] thread is not a known setting") != std::string::npos);
  CHECK(load_line(temp, "port_file = /run/opcache.port", config).empty());
  CHECK(config.port_file == "/run/opcache.port");
}
