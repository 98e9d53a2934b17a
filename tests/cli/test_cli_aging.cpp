// End-to-end tests of settings and aging through the `opcache` command:
// `config` (every setting and its source), op_cache.ini and ASCEND_*,
// modes, `gc [--dry-run]`, `pin`/`unpin`, `clear`, and the bypass notes of
// explicit put/get. Each case runs the built CLI against its own cache dir.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::test::contains;
using opcache::test::hermetic;
using opcache::test::k_test_scenario;
using opcache::test::KernelTriple;
using opcache::test::make_kernel;
using opcache::test::ProcessOptions;
using opcache::test::ProcessResult;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::write_text;

namespace {

constexpr const char* k_missing_key = "1111111111111111111111111111111111111111111111111111111111111111";

class AgingCli {
 public:
  explicit AgingCli(const TempDir& dir) : m_dir(dir.path()), m_cache(dir.path() / "cache") {
    fs::create_directories(m_cache);
  }

  const fs::path& cache() const { return m_cache; }
  const fs::path& dir() const { return m_dir; }

  ProcessResult run(const std::vector<std::string>& args, const ProcessOptions& options = hermetic()) const {
    std::vector<std::string> full{"--cache-dir", m_cache.string()};
    full.insert(full.end(), args.begin(), args.end());
    return opcache::test::run_cli(full, options);
  }

  json run_json(const std::vector<std::string>& args, int expected_exit = 0,
                const ProcessOptions& options = hermetic()) const {
    std::vector<std::string> full{"--json"};
    full.insert(full.end(), args.begin(), args.end());
    auto result = run(full, options);
    INFO("stdout: ", result.out, "\nstderr: ", result.err);
    REQUIRE(result.exit_code == expected_exit);
    return json::parse(result.out);
  }

  fs::path descriptor_file(const KernelTriple& kernel) const {
    auto path = m_dir / "desc" / (kernel.stem + ".desc.json");
    write_text(path, kernel.descriptor_json);
    return path;
  }

  std::vector<std::string> put_args(const KernelTriple& kernel, const std::vector<fs::path>& extra_files = {}) const {
    std::vector<std::string> args{"put", "--desc", descriptor_file(kernel).string(), "--scenario", k_test_scenario};
    for (const auto& file : kernel.files()) {
      args.push_back(file.string());
    }
    for (const auto& file : extra_files) {
      args.push_back(file.string());
    }
    return args;
  }

  // Stores `kernel` (plus `extra_files`); returns its key.
  std::string put(const KernelTriple& kernel, const std::vector<fs::path>& extra_files = {}) const {
    auto document = run_json(put_args(kernel, extra_files));
    REQUIRE(document.contains("key"));
    return document["key"].get<std::string>();
  }

  json config(const ProcessOptions& options = hermetic(), std::vector<std::string> flags = {}) const {
    flags.push_back("config");
    return run_json(flags, 0, options);
  }

  json entries() const { return run_json({"ls"})["entries"]; }

  std::set<std::string> keys() const {
    std::set<std::string> keys;
    for (const auto& entry : entries()) {
      keys.insert(entry["key"].get<std::string>());
    }
    return keys;
  }

 private:
  fs::path m_dir;
  fs::path m_cache;
};

json setting(const std::string& value, const std::string& source) { return {{"value", value}, {"source", source}}; }

// A file of `bytes` random (incompressible) bytes.
fs::path random_file(const fs::path& path, std::size_t bytes, unsigned seed) {
  std::mt19937 generator(seed);
  std::string data(bytes, '\0');
  for (auto& c : data) {
    c = static_cast<char>(generator() & 0xff);
  }
  write_text(path, data);
  return path;
}

// Puts `count` kernels, each with ~300 KB of random bytes, in order; returns their keys.
std::vector<std::string> put_big_entries(const AgingCli& cli, int count, int first = 0) {
  const char* ops[] = {"square", "relu", "neg", "add"};
  std::vector<std::string> keys;
  for (int i = first; i < first + count; ++i) {
    auto kernel = make_kernel(cli.dir() / ("k" + std::to_string(i)), ops[i % 4], 32 + i);
    auto blob = random_file(cli.dir() / ("k" + std::to_string(i)) / "blob.bin", 300 * 1024, 1000u + static_cast<unsigned>(i));
    keys.push_back(cli.put(kernel, {blob}));
  }
  return keys;
}

// Keys in least-recently-used order (the order aging uses).
std::vector<json> lru_order(const json& entries) {
  std::vector<json> sorted(entries.begin(), entries.end());
  std::sort(sorted.begin(), sorted.end(), [](const json& a, const json& b) {
    auto ta = a["last_access_ms"].get<std::int64_t>();
    auto tb = b["last_access_ms"].get<std::int64_t>();
    return ta != tb ? ta < tb : a["key"].get<std::string>() < b["key"].get<std::string>();
  });
  return sorted;
}

std::vector<std::string> removed_keys(const json& report) {
  std::vector<std::string> keys;
  for (const auto& entry : report["removed"]) {
    keys.push_back(entry["key"].get<std::string>());
  }
  return keys;
}

std::string config_line(const std::string& name, const std::string& value, const std::string& source) {
  char line[1024];
  std::snprintf(line, sizeof line, "%-24s %-32s (%s)", name.c_str(), value.c_str(), source.c_str());
  return line;
}

}  // namespace

TEST_CASE("cli::config prints every effective setting with its source, as text and as --json") {
  TempDir dir;
  AgingCli cli(dir);
  auto result = cli.run({"config"});
  INFO("stderr: ", result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.err == "");
  const std::string expected_text = config_line("cache_dir", cli.cache().string(), "--cache-dir") + "\n" +
                                    config_line("config_file", "(none)", "default") + "\n" +
                                    config_line("mode", "enable", "default") + "\n" +
                                    config_line("max_op_cache_size", "500 MB", "default") + "\n" +
                                    config_line("remain_cache_size_ratio", "50 %", "default") + "\n" +
                                    config_line("min_idle", "1800 s", "default") + "\n" +
                                    config_line("op_debug_level", "0", "default") + "\n" +
                                    config_line("op_debug_list", "(empty)", "default") + "\n" +
                                    config_line("volatile_fields", "(built-in list)", "default") + "\n" +
                                    config_line("wait_timeout", "3600 s", "default") + "\n" +
                                    config_line("signing_key", "(none)", "default") + "\n" +
                                    config_line("trusted_keys", "(none)", "default") + "\n" +
                                    config_line("require_signature", "off", "default") + "\n" +
                                    config_line("team_single_flight", "true", "default") + "\n" +
                                    config_line("shared_group", "false", "default") + "\n" +
                                    config_line("compiler_check", "content", "default") + "\n" +
                                    config_line("exec_env", "(built-in list)", "default") + "\n" +
                                    config_line("base_dir", "(none)", "default") + "\n" +
                                    config_line("revocation_check_interval", "300 s", "default") + "\n";
  CHECK(result.out == expected_text);

  json expected = {{"cache_dir", setting(cli.cache().string(), "--cache-dir")},
                   {"config_file", setting("(none)", "default")},
                   {"mode", setting("enable", "default")},
                   {"max_op_cache_size", setting("500 MB", "default")},
                   {"remain_cache_size_ratio", setting("50 %", "default")},
                   {"min_idle", setting("1800 s", "default")},
                   {"op_debug_level", setting("0", "default")},
                   {"op_debug_list", setting("(empty)", "default")},
                   {"volatile_fields", setting("(built-in list)", "default")},
                   {"wait_timeout", setting("3600 s", "default")},
                   {"signing_key", setting("(none)", "default")},
                   {"trusted_keys", setting("(none)", "default")},
                   {"require_signature", setting("off", "default")},
                   {"team_single_flight", setting("true", "default")},
                   {"shared_group", setting("false", "default")},
                   {"compiler_check", setting("content", "default")},
                   {"exec_env", setting("(built-in list)", "default")},
                   {"base_dir", setting("(none)", "default")},
                   {"revocation_check_interval", setting("300 s", "default")},
                   {"remotes", json::array()}};
  CHECK(cli.config() == expected);

  SUBCASE("flags and environment show up with their names as sources") {
    auto document =
        cli.config(hermetic({{"OPCACHE_MIN_IDLE", "120"}, {"OPCACHE_OP_DEBUG_LEVEL", "2"},
                             {"OPCACHE_TEAM_SINGLE_FLIGHT", "0"}}),
                   {"--op-debug-list", " MatMul , Conv2D", "--wait-timeout", "5", "--volatile-fields", "+**.trace_id"});
    CHECK(document["min_idle"] == setting("120 s", "OPCACHE_MIN_IDLE"));
    CHECK(document["op_debug_level"] == setting("2", "OPCACHE_OP_DEBUG_LEVEL"));
    CHECK(document["op_debug_list"] == setting("MatMul,Conv2D", "--op-debug-list"));
    CHECK(document["wait_timeout"] == setting("5 s", "--wait-timeout"));
    CHECK(document["volatile_fields"] == setting("+**.trace_id", "--volatile-fields"));
    CHECK(document["team_single_flight"] == setting("false", "OPCACHE_TEAM_SINGLE_FLIGHT"));
    CHECK(cli.config(hermetic({}), {"--team-single-flight", "off"})["team_single_flight"] ==
          setting("false", "--team-single-flight"));
    auto flag = cli.config(hermetic({{"OPCACHE_MIN_IDLE", "120"}}), {"--min-idle", "60"});
    CHECK(flag["min_idle"] == setting("60 s", "--min-idle"));
  }
}

TEST_CASE("cli::config takes max_op_cache_size and remain_cache_size_ratio from op_cache.ini over ASCEND_*") {
  TempDir dir;
  AgingCli cli(dir);
  const auto ini = cli.cache() / "op_cache.ini";
  const auto env = hermetic({{"ASCEND_MAX_OP_CACHE_SIZE", "300"}, {"ASCEND_REMAIN_CACHE_SIZE_RATIO", "20"}});

  auto from_env = cli.config(env);
  CHECK(from_env["max_op_cache_size"] == setting("300 MB", "ASCEND_MAX_OP_CACHE_SIZE"));
  CHECK(from_env["remain_cache_size_ratio"] == setting("20 %", "ASCEND_REMAIN_CACHE_SIZE_RATIO"));

  write_text(ini, "[op_compiler_cache]\nmax_op_cache_size=1\nremain_cache_size_ratio=80\n");
  auto from_ini = cli.config(env);
  CHECK(from_ini["max_op_cache_size"] == setting("1 MB", ini.string()));
  CHECK(from_ini["remain_cache_size_ratio"] == setting("80 %", ini.string()));

  write_text(ini, "[op_compiler_cache]\nmax_op_cache_size=-1\nremain_cache_size_ratio=80\n");
  auto disabled = cli.config(env);
  CHECK(disabled["max_op_cache_size"] == setting("-1 (aging disabled)", ini.string()));

  // One invalid value: a warning naming file, key and value; the environment applies.
  write_text(ini, "[op_compiler_cache]\nmax_op_cache_size=1\nremain_cache_size_ratio=101\n");
  auto result = cli.run({"config"}, env);
  CHECK(result.exit_code == 0);
  CHECK(result.err == "opcache: warning: " + ini.string() +
                          ": [op_compiler_cache] remain_cache_size_ratio=\"101\" is invalid (expected an integer from "
                          "1 to 100); the file is ignored\n");
  CHECK(contains(result.out, config_line("max_op_cache_size", "300 MB", "ASCEND_MAX_OP_CACHE_SIZE")));
  CHECK(contains(result.out, config_line("remain_cache_size_ratio", "20 %", "ASCEND_REMAIN_CACHE_SIZE_RATIO")));
}

TEST_CASE("cli::config warns about ASCEND_MAX_OP_CACHE_SIZE=abc, exits 0 and shows the default") {
  TempDir dir;
  AgingCli cli(dir);
  auto result = cli.run({"config"}, hermetic({{"ASCEND_MAX_OP_CACHE_SIZE", "abc"}}));
  CHECK(result.exit_code == 0);
  CHECK(result.err ==
        "opcache: warning: environment variable ASCEND_MAX_OP_CACHE_SIZE=\"abc\" is invalid (expected a size in MB (1 "
        "or more), or -1 to disable aging); ignored\n");
  CHECK(contains(result.out, config_line("max_op_cache_size", "500 MB", "default")));
  CHECK(contains(result.out, config_line("remain_cache_size_ratio", "50 %", "default")));

  // The same warning goes to stderr with --json; stdout stays one document.
  auto json_result = cli.run({"--json", "config"}, hermetic({{"ASCEND_MAX_OP_CACHE_SIZE", "abc"}}));
  CHECK(json_result.exit_code == 0);
  CHECK(contains(json_result.err, "ASCEND_MAX_OP_CACHE_SIZE=\"abc\""));
  CHECK(json::parse(json_result.out)["max_op_cache_size"] == setting("500 MB", "default"));
}

TEST_CASE("cli::config shows the mode from --mode, OPCACHE_MODE or [cache] mode with its source") {
  TempDir dir;
  AgingCli cli(dir);
  CHECK(cli.config(hermetic({{"OPCACHE_MODE", "disable"}}), {"--mode", "force"})["mode"] == setting("force", "--mode"));
  CHECK(cli.config(hermetic({{"OPCACHE_MODE", "disable"}}))["mode"] == setting("disable", "OPCACHE_MODE"));

  const auto conf = cli.cache() / "opcache.conf";
  write_text(conf, "[cache]\nmode = force\n");
  auto from_conf = cli.config();
  CHECK(from_conf["mode"] == setting("force", conf.string() + " [cache] mode"));
  CHECK(from_conf["config_file"] == setting(conf.string(), "default"));

  // An explicit --config wins over the default file.
  const auto other = dir / "other.conf";
  write_text(other, "[cache]\nmode = disable\n");
  auto explicit_conf = cli.config(hermetic(), {"--config", other.string()});
  CHECK(explicit_conf["mode"] == setting("disable", other.string() + " [cache] mode"));
  CHECK(explicit_conf["config_file"] == setting(other.string(), "--config"));

  SUBCASE("a misspelt OPCACHE_MODE warns naming the value, and the next source applies") {
    auto result = cli.run({"--json", "config"}, hermetic({{"OPCACHE_MODE", "forse"}}));
    CHECK(result.exit_code == 0);
    CHECK(result.err ==
          "opcache: warning: environment variable OPCACHE_MODE=\"forse\" is invalid (expected enable, force or "
          "disable); ignored\n");
    CHECK(json::parse(result.out)["mode"] == setting("force", conf.string() + " [cache] mode"));
  }
  SUBCASE("a misspelt --mode is a usage error (exit 2)") {
    auto result = cli.run({"--mode", "forse", "config"});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "forse"));
    CHECK(result.out == "");
  }
  SUBCASE("a negative --min-idle is a usage error (exit 2)") {
    auto result = cli.run({"--min-idle", "-5", "config"});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "-5"));
  }
  SUBCASE("a missing --config is a usage error naming it") {
    const auto missing = dir / "missing.conf";
    auto result = cli.run({"--config", missing.string(), "config"});
    CHECK(result.exit_code == 2);
    CHECK(result.err == "opcache: error: config file " + missing.string() + " (from --config) does not exist\n");
  }
}

TEST_CASE("cli::gc --dry-run lists what aging would remove and removes nothing, gc removes it") {
  TempDir dir;
  AgingCli cli(dir);
  write_text(cli.cache() / "op_cache.ini", "[op_compiler_cache]\nmax_op_cache_size=1\nremain_cache_size_ratio=50\n");
  // Each entry is about 300 KB; with the default min idle (30 min) the
  // automatic aging after each put removes nothing.
  auto keys = put_big_entries(cli, 6);
  auto entries = cli.entries();
  REQUIRE(entries.size() == 6);
  std::int64_t total = 0;
  for (const auto& entry : entries) {
    CHECK(entry["bundle_bytes"].get<std::int64_t>() > 300 * 1024);
    total += entry["bundle_bytes"].get<std::int64_t>();
  }
  REQUIRE(total > (1 << 20));
  auto stats = cli.run_json({"stats"});
  CHECK(stats["counters"].value("evictions", 0) == 0);

  // Least recently used first; one ~300 KB entry fits in 512 KiB, two do not.
  auto lru = lru_order(entries);
  std::vector<std::string> expected_removed;
  std::int64_t expected_bytes = 0;
  for (std::size_t i = 0; i < 5; ++i) {
    expected_removed.push_back(lru[i]["key"].get<std::string>());
    expected_bytes += lru[i]["bundle_bytes"].get<std::int64_t>();
  }
  const std::string survivor = lru[5]["key"].get<std::string>();
  CHECK(survivor == keys[5]);

  auto dry = cli.run_json({"--min-idle", "0", "gc", "--dry-run"});
  CHECK(dry["dry_run"] == true);
  CHECK(dry["aging_enabled"] == true);
  CHECK(dry["limit_bytes"] == 1 << 20);
  CHECK(dry["min_idle_ms"] == 0);
  CHECK(dry["entries_before"] == 6);
  CHECK(dry["bytes_before"] == total);
  CHECK(removed_keys(dry) == expected_removed);
  CHECK(dry["entries_removed"] == 5);
  CHECK(dry["bytes_removed"] == expected_bytes);
  CHECK(dry["bytes_after"] == total - expected_bytes);
  CHECK(dry["stopped_because"] == "reached the target size");
  CHECK(cli.keys() == std::set<std::string>(keys.begin(), keys.end()));
  CHECK(cli.run_json({"stats"})["counters"].value("evictions", 0) == 0);

  // Without --min-idle nothing is idle long enough.
  auto patient = cli.run_json({"gc"});
  CHECK(patient["entries_removed"] == 0);
  CHECK(contains(patient["stopped_because"].get<std::string>(), "(min idle 1800 s)"));
  CHECK(cli.keys().size() == 6);

  // The text form of a dry run names each entry it would remove.
  auto text = cli.run({"--min-idle", "0", "gc", "-n"});
  CHECK(text.exit_code == 0);
  for (const auto& key : expected_removed) {
    CHECK(contains(text.out, "would remove " + key));
  }
  CHECK_FALSE(contains(text.out, survivor));

  auto real = cli.run_json({"--min-idle", "0", "gc"});
  CHECK(real["dry_run"] == false);
  CHECK(removed_keys(real) == expected_removed);
  CHECK(real["bytes_after"] == total - expected_bytes);
  CHECK(cli.keys() == std::set<std::string>{survivor});
  stats = cli.run_json({"stats"});
  CHECK(stats["counters"]["evictions"] == 5);
  CHECK(stats["entries"] == 1);
  CHECK(stats["bundle_bytes"] == total - expected_bytes);
  for (const auto& entry : lru) {
    auto digest = entry["digest"].get<std::string>();
    CHECK(fs::exists(cli.cache() / "objects" / digest.substr(0, 2) / digest) == (entry["key"] == survivor));
  }
  auto human = cli.run({"stats"});
  CHECK(contains(human.out, "evictions              5"));
}

TEST_CASE("cli::pin and unpin exit 0 for present keys and 1 for absent ones, pinned entries survive gc") {
  TempDir dir;
  AgingCli cli(dir);
  write_text(cli.cache() / "op_cache.ini", "[op_compiler_cache]\nmax_op_cache_size=1\nremain_cache_size_ratio=50\n");
  auto keys = put_big_entries(cli, 5);
  auto lru = lru_order(cli.entries());
  const std::string oldest = lru[0]["key"].get<std::string>();
  const std::string second = lru[1]["key"].get<std::string>();

  auto pin = cli.run({"pin", oldest, second});
  CHECK(pin.exit_code == 0);
  CHECK(pin.out == "pinned " + oldest + "\npinned " + second + "\n");
  auto absent = cli.run({"pin", k_missing_key});
  CHECK(absent.exit_code == 1);
  CHECK(absent.err == std::string("opcache: not found: ") + k_missing_key + "\n");
  auto mixed = cli.run_json({"pin", oldest, k_missing_key}, 1);
  CHECK(mixed == json{{"pinned", {oldest}}, {"absent", {k_missing_key}}});
  auto bad_key = cli.run({"pin", "not-a-key"});
  CHECK(bad_key.exit_code == 2);

  std::set<std::string> pinned;
  for (const auto& entry : cli.entries()) {
    if (entry["pinned"] == true) {
      pinned.insert(entry["key"].get<std::string>());
    }
  }
  CHECK(pinned == std::set<std::string>{oldest, second});

  // The two pinned (~600 KB) stay over the 512 KiB target; everything else goes.
  auto gc = cli.run_json({"--min-idle", "0", "gc"});
  CHECK(removed_keys(gc) == std::vector<std::string>{lru[2]["key"].get<std::string>(), lru[3]["key"].get<std::string>(),
                                                     lru[4]["key"].get<std::string>()});
  CHECK(gc["stopped_because"] == "no more unpinned entries");
  CHECK(cli.keys() == std::set<std::string>{oldest, second});

  auto unpin = cli.run({"unpin", oldest});
  CHECK(unpin.exit_code == 0);
  CHECK(unpin.out == "unpinned " + oldest + "\n");
  CHECK(cli.run({"unpin", k_missing_key}).exit_code == 1);

  // Two entries (~600 KB) are within the 1 MB limit: nothing to do.
  auto within = cli.run_json({"--min-idle", "0", "gc"});
  CHECK(within["entries_removed"] == 0);
  CHECK(within["stopped_because"] == "the store is within its limit");

  // Two more take it over the limit; the unpinned oldest goes first, the pinned one stays.
  auto more = put_big_entries(cli, 2, 10);
  auto after = cli.run_json({"--min-idle", "0", "gc"});
  CHECK(removed_keys(after) == std::vector<std::string>{oldest, more[0], more[1]});
  CHECK(after["stopped_because"] == "reached the target size");
  CHECK(cli.keys() == std::set<std::string>{second});
  CHECK(cli.run_json({"stats"})["counters"]["evictions"] == 6);
}

TEST_CASE("cli::clear removes every entry, pinned ones too, and exits 0") {
  TempDir dir;
  AgingCli cli(dir);
  std::vector<std::string> keys;
  std::int64_t total = 0;
  for (int i = 0; i < 3; ++i) {
    auto kernel = make_kernel(dir / ("k" + std::to_string(i)), i == 1 ? "relu" : "square", 8 + i);
    auto document = cli.run_json(cli.put_args(kernel));
    keys.push_back(document["key"].get<std::string>());
  }
  for (const auto& entry : cli.entries()) {
    total += entry["bundle_bytes"].get<std::int64_t>();
  }
  REQUIRE(cli.run({"pin", keys[0]}).exit_code == 0);

  auto cleared = cli.run_json({"clear"});
  CHECK(cleared == json{{"entries_removed", 3}, {"bytes_removed", total}});
  CHECK(cli.entries().empty());
  auto ls = cli.run({"ls"});
  CHECK(ls.exit_code == 0);
  CHECK(contains(ls.out, "0 entries"));
  auto stats = cli.run_json({"stats"});
  CHECK(stats["entries"] == 0);
  CHECK(stats["bundle_bytes"] == 0);
  std::size_t objects = 0;
  for (const auto& item : fs::recursive_directory_iterator(cli.cache() / "objects")) {
    objects += item.is_regular_file() ? 1 : 0;
  }
  CHECK(objects == 0);

  auto again = cli.run({"clear"});
  CHECK(again.exit_code == 0);
  CHECK(again.out == "removed 0 entries (0 B)\n");
  // Still usable.
  auto kernel = make_kernel(dir / "k9", "neg", 5);
  CHECK(cli.put(kernel) != "");
  CHECK(cli.entries().size() == 1);
}

TEST_CASE("cli::put and get note on stderr when the transparent paths would bypass the cache, and still work") {
  TempDir dir;
  AgingCli cli(dir);
  auto kernel = make_kernel(dir / "k", "square", 12);
  const std::string bypass_tail = " — exec and get_or_build would not use the cache for square; this explicit command "
                                  "uses it anyway\n";

  std::vector<std::string> put_disabled{"--mode", "disable"};
  auto put_args = cli.put_args(kernel);
  put_disabled.insert(put_disabled.end(), put_args.begin(), put_args.end());
  auto put = cli.run(put_disabled);
  CHECK(put.exit_code == 0);
  CHECK(put.err == "opcache: note: mode is disable (from --mode)" + bypass_tail);
  auto entries = cli.entries();
  REQUIRE(entries.size() == 1);
  const std::string key = entries[0]["key"].get<std::string>();

  auto get = cli.run({"--op-debug-list", "relu, square", "get", key, "--out", (dir / "out1").string()});
  CHECK(get.exit_code == 0);
  CHECK(get.err == "opcache: note: op_debug_list contains square (from --op-debug-list)" + bypass_tail);
  for (const auto& file : kernel.files()) {
    CHECK(read_text(dir / "out1" / file.filename()) == read_text(file));
  }

  auto by_env = cli.run({"get", key, "--out", (dir / "out2").string()}, hermetic({{"OPCACHE_OP_DEBUG_LIST", "square"}}));
  CHECK(by_env.exit_code == 0);
  CHECK(by_env.err == "opcache: note: op_debug_list contains square (from OPCACHE_OP_DEBUG_LIST)" + bypass_tail);

  auto by_level = cli.run({"get", key, "--out", (dir / "out3").string()}, hermetic({{"OPCACHE_OP_DEBUG_LEVEL", "1"}}));
  CHECK(by_level.exit_code == 0);
  CHECK(by_level.err == "opcache: note: op_debug_level=1 (from OPCACHE_OP_DEBUG_LEVEL)" + bypass_tail);

  // Another op type in the list: no note.
  auto unlisted = cli.run({"--op-debug-list", "relu", "get", key, "--out", (dir / "out4").string()});
  CHECK(unlisted.exit_code == 0);
  CHECK(unlisted.err == "");
  CHECK(cli.run_json({"stats"})["counters"]["hits"] == 3 + 1);
}

TEST_CASE("cli::put ages the store automatically once it grows past the limit") {
  TempDir dir;
  AgingCli cli(dir);
  write_text(cli.cache() / "op_cache.ini", "[op_compiler_cache]\nmax_op_cache_size=1\nremain_cache_size_ratio=50\n");
  // 4 × ~300 KB is over 1 MB, but nothing has been idle for 30 minutes.
  auto keys = put_big_entries(cli, 4);
  CHECK(cli.keys().size() == 4);
  CHECK(cli.run_json({"stats"})["counters"].value("evictions", 0) == 0);

  // With --min-idle 0 the next put evicts the least recently used entries
  // until the store is at most 512 KiB: only the newest entry fits.
  auto kernel = make_kernel(dir / "k5", "neg", 77);
  auto blob = random_file(dir / "k5" / "blob.bin", 300 * 1024, 77);
  auto args = cli.put_args(kernel, {blob});
  args.insert(args.begin(), {"--min-idle", "0", "--json"});
  auto put = cli.run(args);
  INFO("stderr: ", put.err);
  REQUIRE(put.exit_code == 0);
  const std::string newest = json::parse(put.out)["key"].get<std::string>();
  CHECK(cli.keys() == std::set<std::string>{newest});
  CHECK(cli.run_json({"stats"})["counters"]["evictions"] == 4);
}

TEST_CASE("cli::get leaves the access time alone and gc does nothing when max_op_cache_size is -1") {
  TempDir dir;
  AgingCli cli(dir);
  auto kernel = make_kernel(dir / "k", "relu", 21);
  const std::string key = cli.put(kernel);
  const auto stored_access = cli.entries()[0]["last_access_ms"].get<std::int64_t>();

  write_text(cli.cache() / "op_cache.ini", "[op_compiler_cache]\nmax_op_cache_size=-1\nremain_cache_size_ratio=50\n");
  std::int64_t now_ms = 0;
  // Wait until the wall clock has moved on, so an update would be visible.
  while ((now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count()) <= stored_access + 5) {
  }
  auto get = cli.run({"get", key, "--out", (dir / "out").string()});
  CHECK(get.exit_code == 0);
  auto entry = cli.entries()[0];
  CHECK(entry["hits"] == 1);
  CHECK(entry["last_access_ms"] == stored_access);

  auto gc = cli.run({"--min-idle", "0", "gc"});
  CHECK(gc.exit_code == 0);
  CHECK(gc.out == "aging is disabled (max_op_cache_size = -1)\n");
  CHECK(cli.keys() == std::set<std::string>{key});

  // With aging enabled again a hit moves the access time forward.
  fs::remove(cli.cache() / "op_cache.ini");
  CHECK(cli.run({"get", key, "--out", (dir / "out2").string()}).exit_code == 0);
  entry = cli.entries()[0];
  CHECK(entry["hits"] == 2);
  CHECK(entry["last_access_ms"].get<std::int64_t>() >= now_ms);
}
