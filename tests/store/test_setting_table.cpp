// The settings table (store/setting_table.cpp): every settable row must be
// reachable from every surface derived from it — its CLI flag parses and
// reaches the setting, opcache_open_ex accepts its JSON key, `opcache config
// --json` shows it — and StoreConfig::set validates like the flag does.
// (The Python keywords are walked in python/tests/test_opcache.py.)
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ed25519.hpp"
#include "opcache/opcache.h"
#include "opcache/opcache.hpp"
#include "store/setting_table.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::SettingDescriptor;
using opcache::SettingType;
using opcache::test::hermetic;
using opcache::test::TempDir;

namespace {

// A valid value of `row` in its text form, with any file it needs created under `dir`.
std::string sample_value(const SettingDescriptor& row, const fs::path& dir) {
  if (row.name == "signing_key") {
    auto key = opcache::base::Ed25519PrivateKey::generate();
    REQUIRE(key.ok());
    REQUIRE(key->save_pem_file(dir / "signing.pem").ok());
    return (dir / "signing.pem").string();
  }
  if (row.name == "trusted_keys") {
    opcache::test::write_text(dir / "trusted.keys", "# nobody yet\n");
    return (dir / "trusted.keys").string();
  }
  if (row.name == "require_signature") {
    return "remote";
  }
  if (row.type == SettingType::path && row.name != "cache_dir") {
    // A file that exists and reads as an (empty) config file and as a token.
    opcache::test::write_text(dir / std::string(row.name), "[cache]\n");
  }
  switch (row.type) {
    case SettingType::path:
      return (dir / std::string(row.name)).string();
    case SettingType::comma_list:
      return "none";
    case SettingType::repeated:
      return "file://" + (dir / "remote").string();
    case SettingType::flag:
      return "true";
    default:
      return std::string(row.default_value);
  }
}

// The JSON form opcache_open_ex takes for `text`.
json json_value(const SettingDescriptor& row, const std::string& text) {
  switch (row.type) {
    case SettingType::integer:
      return std::stoll(text);
    case SettingType::flag:
      return text == "true";
    case SettingType::repeated:
      return json::array({text});
    default:
      return text;
  }
}

}  // namespace

TEST_CASE("store::SettingTable every settable row is reachable from the CLI, the C ABI and opcache config") {
  const auto& rows = opcache::setting_descriptors();
  REQUIRE(rows.size() == opcache::store::setting_specs().size());
  for (const auto& row : rows) {
    INFO("setting ", row.name);
    TempDir dir;
    const auto cache = dir / "cache";
    if (!row.settable) {
      CHECK(row.flag.empty());
      CHECK_FALSE(row.env.empty());  // CANN's pair: environment and op_cache.ini only
      CHECK_FALSE(opcache::StoreConfig().set(row.name, std::string(row.default_value)).ok());
      continue;
    }
    const std::string value = sample_value(row, dir.path());
    const std::string flag = opcache::store::primary_flag(*opcache::store::find_setting(row.name));
    REQUIRE(flag.rfind("--", 0) == 0);

    // The CLI: the flag parses, and `opcache config --json` shows where the value came from.
    std::vector<std::string> args{"--cache-dir", cache.string(), "--json", flag};
    if (row.type != SettingType::flag) {
      args.push_back(value);
    }
    args.push_back("config");
    auto result = opcache::test::run_cli(args, hermetic());
    INFO("stdout: ", result.out, "\nstderr: ", result.err);
    REQUIRE(result.exit_code == 0);
    const auto document = json::parse(result.out);
    if (!row.display.empty()) {
      CHECK(document[std::string(row.display)]["source"] == flag);
    }
    if (row.type == SettingType::repeated) {
      REQUIRE(document["remotes"].size() == 1);
      CHECK(document["remotes"][0].get<std::string>().find("(--remote)") != std::string::npos);
    }

    // The C ABI: the JSON key is accepted with the value in its JSON type.
    json options = {{"cache_dir", cache.string()}, {std::string(row.name), json_value(row, value)}};
    opcache_store* store = nullptr;
    CHECK_MESSAGE(opcache_open_ex(options.dump().c_str(), &store) == OPCACHE_OK, opcache_last_error());
    opcache_close(store);
  }
}

TEST_CASE("store::SettingTable StoreConfig::set checks values like the flags and names unknown settings") {
  opcache::StoreConfig config;
  CHECK(config.set("mode", "force").ok());
  CHECK(config.mode == std::optional<std::string>("force"));
  CHECK(config.set("min_idle_s", "60").ok());
  CHECK(config.min_idle_s == std::optional<std::int64_t>(60));
  CHECK(config.set("remotes", "file:///a").ok());
  CHECK(config.set("remotes", "file:///b").ok());
  CHECK(config.remotes == std::vector<std::string>{"file:///a", "file:///b"});
  CHECK(config.set("no_remote", "true").ok());
  CHECK(config.no_remote);

  auto bad_mode = config.set("mode", "sometimes");
  REQUIRE_FALSE(bad_mode.ok());
  CHECK(bad_mode.error().code() == opcache::ErrorCode::usage);
  CHECK(bad_mode.error().message() == "mode \"sometimes\" is invalid: expected enable, force or disable");
  auto bad_number = config.set("wait_timeout_s", "soon");
  REQUIRE_FALSE(bad_number.ok());
  CHECK(bad_number.error().message() == "wait_timeout_s \"soon\" is invalid: expected a number of seconds (0 or more)");
  auto unknown = config.set("colour", "blue");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message().find("unknown setting \"colour\" (allowed: cache_dir, config_file, mode,") == 0);
  CHECK(config.mode == std::optional<std::string>("force"));  // failed sets change nothing
}

TEST_CASE("store::SettingTable every yes/no row takes the one boolean grammar, and nothing else") {
  for (const char* name : {"no_remote", "shared_group", "team_single_flight"}) {
    CAPTURE(name);
    for (const char* word : {"true", "false", "1", "0", "on", "off", "yes", "no"}) {
      opcache::StoreConfig config;
      CAPTURE(word);
      CHECK(config.set(name, word).ok());
    }
    opcache::StoreConfig config;
    auto refused = config.set(name, "maybe");
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message() ==
          std::string(name) + " \"maybe\" is invalid: expected true or false (or 1/0, on/off, yes/no)");
  }
  opcache::StoreConfig config;
  CHECK(config.set("no_remote", "on").ok());
  CHECK(config.no_remote);
  CHECK(config.set("shared_group", "yes").ok());
  CHECK(config.shared_group);
  CHECK(config.set("no_remote", "0").ok());
  CHECK_FALSE(config.no_remote);
}

TEST_CASE("store::SettingTable opcache_settings_schema_json lists every row with its surfaces") {
  char* text = nullptr;
  REQUIRE(opcache_settings_schema_json(&text) == OPCACHE_OK);
  const auto schema = json::parse(text);
  opcache_string_free(text);
  const auto& rows = opcache::setting_descriptors();
  REQUIRE(schema.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(schema[i]["name"] == std::string(rows[i].name));
    CHECK(schema[i]["type"] == opcache::to_string(rows[i].type));
    CHECK(schema[i]["flag"] == std::string(rows[i].flag));
    CHECK(schema[i]["env"] == std::string(rows[i].env));
    CHECK(schema[i]["settable"] == rows[i].settable);
  }
  CHECK(schema[2] == json{{"name", "mode"},
                          {"display", "mode"},
                          {"type", "text"},
                          {"settable", true},
                          {"flag", "--mode"},
                          {"help", "Cache mode for exec/get_or_build: enable, force (rebuild and replace) or disable"},
                          {"env", "OPCACHE_MODE"},
                          {"config_key", "mode"},
                          {"default", "enable"}});
  CHECK(opcache_settings_schema_json(nullptr) == OPCACHE_USAGE);
}
