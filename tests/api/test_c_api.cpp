// The C ABI (include/opcache/opcache.h), called in-process as a C compiler
// driver or a ctypes binding would.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/opcache.h"
#include "opcache/opcache.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::test::read_text;
using opcache::test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_scenario_spec = "device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1";
constexpr const char* k_scenario_json =
    R"({"device_mode":"single","phase":"train","toolchain":"8.0.RC2","soc":"Ascend910B1"})";

// Owns a handle for the duration of a test.
struct Handle {
  explicit Handle(const fs::path& dir) {
    opcache_status status = opcache_open(dir.c_str(), &store);
    REQUIRE_MESSAGE(status == OPCACHE_OK, opcache_last_error());
    REQUIRE(store != nullptr);
  }
  ~Handle() { opcache_close(store); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  opcache_store* store = nullptr;
};

bool is_key(const char* text) { return std::regex_match(text, std::regex("[0-9a-f]{64}")); }

std::string last_error() { return opcache_last_error(); }

}  // namespace

TEST_CASE("C API opcache_version equals opcache::k_version_string") {
  const char* version = opcache_version();
  REQUIRE(version != nullptr);
  CHECK(std::string(version) == opcache::k_version_string);
  CHECK(std::regex_match(version, std::regex(R"(\d+\.\d+\.\d+)")));
  CHECK(OPCACHE_KEY_BUFFER == 65);
}

TEST_CASE("C API opcache_status_name names every status and unknown values") {
  CHECK(std::string(opcache_status_name(OPCACHE_OK)) == "ok");
  CHECK(std::string(opcache_status_name(OPCACHE_NOT_FOUND)) == "not_found");
  CHECK(std::string(opcache_status_name(OPCACHE_USAGE)) == "usage");
  CHECK(std::string(opcache_status_name(OPCACHE_CORRUPT)) == "corrupt");
  CHECK(std::string(opcache_status_name(OPCACHE_REMOTE)) == "remote");
  CHECK(std::string(opcache_status_name(OPCACHE_IO)) == "io");
  CHECK(std::string(opcache_status_name(OPCACHE_TIMEOUT)) == "timeout");
  CHECK(std::string(opcache_status_name(OPCACHE_BUILD_FAILED)) == "build_failed");
  CHECK(std::string(opcache_status_name(OPCACHE_INTERNAL)) == "internal");
  CHECK(std::string(opcache_status_name(OPCACHE_UNTRUSTED)) == "untrusted");
  CHECK(std::string(opcache_status_name(static_cast<opcache_status>(42))) == "unknown");
  CHECK(std::string(opcache_status_name(static_cast<opcache_status>(-1))) == "unknown");
  // The values are part of the ABI and mirror opcache::ErrorCode.
  CHECK(OPCACHE_NOT_FOUND == static_cast<int>(opcache::ErrorCode::not_found));
  CHECK(OPCACHE_USAGE == static_cast<int>(opcache::ErrorCode::usage));
  CHECK(OPCACHE_CORRUPT == static_cast<int>(opcache::ErrorCode::corrupt));
  CHECK(OPCACHE_IO == static_cast<int>(opcache::ErrorCode::io));
  CHECK(OPCACHE_INTERNAL == static_cast<int>(opcache::ErrorCode::internal));
  CHECK(OPCACHE_UNTRUSTED == static_cast<int>(opcache::ErrorCode::untrusted));
}

TEST_CASE("C API opcache_open creates the store, opcache_close releases it and ignores NULL") {
  TempDir temp;
  opcache_store* store = nullptr;
  REQUIRE(opcache_open((temp / "cache").c_str(), &store) == OPCACHE_OK);
  REQUIRE(store != nullptr);
  CHECK(last_error().empty());
  CHECK(fs::is_directory(temp / "cache" / "objects"));
  // The index is created by its first use, not by opening.
  CHECK_FALSE(fs::exists(temp / "cache" / "index.db"));
  char* stats = nullptr;
  REQUIRE(opcache_stats_json(store, &stats) == OPCACHE_OK);
  opcache_string_free(stats);
  CHECK(fs::is_regular_file(temp / "cache" / "index.db"));
  opcache_close(store);
  opcache_close(nullptr);

  CHECK(opcache_open((temp / "cache").c_str(), nullptr) == OPCACHE_USAGE);
  CHECK(last_error().find("out") != std::string::npos);

  // A cache dir that cannot be created (a regular file is in the way) fails cleanly.
  opcache::test::write_text(temp / "file", "x");
  store = reinterpret_cast<opcache_store*>(0x1);
  opcache_status status = opcache_open((temp / "file" / "cache").c_str(), &store);
  CHECK(status != OPCACHE_OK);
  CHECK(store == nullptr);
  CHECK_FALSE(last_error().empty());
}

TEST_CASE("C API opcache_key gives the same key for the spec and JSON scenario forms") {
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "square", 16);
  Handle handle(temp / "cache");
  char from_spec[OPCACHE_KEY_BUFFER];
  char from_json[OPCACHE_KEY_BUFFER];
  std::memset(from_spec, 'x', sizeof from_spec);
  std::memset(from_json, 'x', sizeof from_json);
  REQUIRE(opcache_key(handle.store, kernel.descriptor_json.c_str(), k_scenario_spec, from_spec) == OPCACHE_OK);
  REQUIRE(opcache_key(handle.store, kernel.descriptor_json.c_str(), k_scenario_json, from_json) == OPCACHE_OK);
  CHECK(from_spec[64] == '\0');
  CHECK(is_key(from_spec));
  CHECK(std::string(from_spec) == std::string(from_json));

  // The same key as the C++ API.
  opcache::StoreConfig config;
  config.cache_dir = temp / "cache";
  auto cpp = opcache::Store::open(config);
  REQUIRE(cpp.ok());
  auto scenario = opcache::parse_scenario(k_scenario_spec);
  REQUIRE(scenario.ok());
  auto cpp_key = cpp->key(kernel.descriptor_json, *scenario);
  REQUIRE(cpp_key.ok());
  CHECK(*cpp_key == from_spec);

  // Another scenario gives another key.
  char multi[OPCACHE_KEY_BUFFER];
  REQUIRE(opcache_key(handle.store, kernel.descriptor_json.c_str(),
                      "device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1", multi) == OPCACHE_OK);
  CHECK(std::string(multi) != from_spec);
}

TEST_CASE("C API put, has, get and remove return the documented statuses and write byte-exact files") {
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "relu", 16);
  Handle handle(temp / "cache");
  const auto paths = kernel.files();
  std::vector<std::string> path_strings;
  for (const auto& path : paths) {
    path_strings.push_back(path.string());
  }
  std::vector<const char*> files;
  for (const auto& path : path_strings) {
    files.push_back(path.c_str());
  }

  char key[OPCACHE_KEY_BUFFER];
  REQUIRE(opcache_key(handle.store, kernel.descriptor_json.c_str(), k_scenario_spec, key) == OPCACHE_OK);
  CHECK(opcache_has(handle.store, key) == OPCACHE_NOT_FOUND);
  auto miss_dir = temp / "miss";
  CHECK(opcache_get(handle.store, key, miss_dir.c_str()) == OPCACHE_NOT_FOUND);
  CHECK(last_error().find(key) != std::string::npos);

  char put_key[OPCACHE_KEY_BUFFER] = {};
  REQUIRE(opcache_put(handle.store, kernel.descriptor_json.c_str(), k_scenario_json, files.data(), files.size(), 1200,
                      put_key) == OPCACHE_OK);
  CHECK(last_error().empty());
  CHECK(std::string(put_key) == key);
  CHECK(opcache_has(handle.store, key) == OPCACHE_OK);
  // Already present: still OK, key_out may be NULL.
  CHECK(opcache_put(handle.store, kernel.descriptor_json.c_str(), k_scenario_spec, files.data(), files.size(), 0,
                    nullptr) == OPCACHE_OK);

  auto out = temp / "out" / "kernel_meta";
  REQUIRE(opcache_get(handle.store, key, out.c_str()) == OPCACHE_OK);
  for (const auto& path : paths) {
    auto written = out / path.filename();
    REQUIRE(fs::is_regular_file(written));
    CHECK(read_text(written) == read_text(path));
  }
  CHECK(std::distance(fs::directory_iterator(out), fs::directory_iterator()) == 3);

  CHECK(opcache_remove(handle.store, key) == OPCACHE_OK);
  CHECK(opcache_has(handle.store, key) == OPCACHE_NOT_FOUND);
  CHECK(opcache_remove(handle.store, key) == OPCACHE_NOT_FOUND);
  CHECK(opcache_get(handle.store, key, (temp / "gone").c_str()) == OPCACHE_NOT_FOUND);

  // The build time feeds "compile time saved": two hits on a 1200 ms build.
  REQUIRE(opcache_put(handle.store, kernel.descriptor_json.c_str(), k_scenario_spec, files.data(), files.size(), 1200,
                      nullptr) == OPCACHE_OK);
  REQUIRE(opcache_get(handle.store, key, out.c_str()) == OPCACHE_OK);
  // Hits are batched per handle and written when the handle closes (or after
  // a second); another handle sees them after that.
  opcache_close(handle.store);
  handle.store = nullptr;
  opcache::StoreConfig config;
  config.cache_dir = temp / "cache";
  auto cpp = opcache::Store::open(config);
  REQUIRE(cpp.ok());
  auto stats = cpp->stats();
  REQUIRE(stats.ok());
  CHECK(stats->counters.at("compile_ms_saved") == 2 * 1200);
  CHECK(stats->counters.at("hits") == 2);
}

TEST_CASE("C API reports bad JSON, bad scenarios and bad keys as OPCACHE_USAGE with a message") {
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "neg", 16);
  Handle handle(temp / "cache");
  const std::string object = kernel.object.string();
  const char* files[] = {object.c_str()};
  char key[OPCACHE_KEY_BUFFER];

  CHECK(opcache_key(handle.store, R"({"op_type": )", k_scenario_spec, key) == OPCACHE_USAGE);
  CHECK(last_error().find("descriptor") != std::string::npos);
  CHECK(opcache_key(handle.store, R"({"shape": [1]})", k_scenario_spec, key) == OPCACHE_USAGE);
  CHECK(last_error().find("op_type") != std::string::npos);
  CHECK(opcache_put(handle.store, "not json", k_scenario_spec, files, 1, 0, key) == OPCACHE_USAGE);
  CHECK(last_error().find("descriptor") != std::string::npos);

  CHECK(opcache_key(handle.store, kernel.descriptor_json.c_str(), "device=single,phase=fly,toolchain=x,soc=y", key) ==
        OPCACHE_USAGE);
  CHECK(last_error().find("phase") != std::string::npos);
  CHECK(opcache_key(handle.store, kernel.descriptor_json.c_str(), "device=single,phase=train,soc=y", key) ==
        OPCACHE_USAGE);
  CHECK(last_error().find("toolchain") != std::string::npos);
  CHECK(opcache_key(handle.store, kernel.descriptor_json.c_str(), R"({"phase": "train", )", key) == OPCACHE_USAGE);
  CHECK_FALSE(last_error().empty());

  CHECK(opcache_get(handle.store, "not-a-key", (temp / "out").c_str()) == OPCACHE_USAGE);
  CHECK(last_error().find("not-a-key") != std::string::npos);
  CHECK(opcache_has(handle.store, "ABCDEF") == OPCACHE_USAGE);
  CHECK(opcache_remove(handle.store, "../x") == OPCACHE_USAGE);

  // A successful call clears the message.
  CHECK(opcache_key(handle.store, kernel.descriptor_json.c_str(), k_scenario_spec, key) == OPCACHE_OK);
  CHECK(last_error().empty());

  // A file that does not exist is not found, and names the file.
  const std::string missing = (temp / "missing.o").string();
  const char* missing_files[] = {missing.c_str()};
  CHECK(opcache_put(handle.store, kernel.descriptor_json.c_str(), k_scenario_spec, missing_files, 1, 0, nullptr) ==
        OPCACHE_NOT_FOUND);
  CHECK(last_error().find("missing.o") != std::string::npos);
}

TEST_CASE("C API NULL arguments are OPCACHE_USAGE, never a crash") {
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "square", 8);
  Handle handle(temp / "cache");
  const char* descriptor = kernel.descriptor_json.c_str();
  const std::string object = kernel.object.string();
  const char* files[] = {object.c_str()};
  const char* files_with_null[] = {object.c_str(), nullptr};
  char key[OPCACHE_KEY_BUFFER];
  const std::string out = (temp / "out").string();
  REQUIRE(opcache_key(handle.store, descriptor, k_scenario_spec, key) == OPCACHE_OK);

  auto usage = [](opcache_status status) {
    CHECK(status == OPCACHE_USAGE);
    CHECK_FALSE(last_error().empty());
  };
  usage(opcache_key(nullptr, descriptor, k_scenario_spec, key));
  usage(opcache_key(handle.store, nullptr, k_scenario_spec, key));
  usage(opcache_key(handle.store, descriptor, nullptr, key));
  usage(opcache_key(handle.store, descriptor, k_scenario_spec, nullptr));
  usage(opcache_put(nullptr, descriptor, k_scenario_spec, files, 1, 0, nullptr));
  usage(opcache_put(handle.store, nullptr, k_scenario_spec, files, 1, 0, nullptr));
  usage(opcache_put(handle.store, descriptor, nullptr, files, 1, 0, nullptr));
  usage(opcache_put(handle.store, descriptor, k_scenario_spec, nullptr, 1, 0, nullptr));
  usage(opcache_put(handle.store, descriptor, k_scenario_spec, files_with_null, 2, 0, nullptr));
  usage(opcache_get(nullptr, key, out.c_str()));
  usage(opcache_get(handle.store, nullptr, out.c_str()));
  usage(opcache_get(handle.store, key, nullptr));
  usage(opcache_has(nullptr, key));
  usage(opcache_has(handle.store, nullptr));
  usage(opcache_remove(nullptr, key));
  usage(opcache_remove(handle.store, nullptr));

  // Nothing was stored by the rejected calls, and the handle still works.
  CHECK(opcache_has(handle.store, key) == OPCACHE_NOT_FOUND);
  CHECK(opcache_put(handle.store, descriptor, k_scenario_spec, files, 1, 0, nullptr) == OPCACHE_OK);
  CHECK(opcache_has(handle.store, key) == OPCACHE_OK);
}

TEST_CASE("C API opcache_last_error is per thread") {
  TempDir temp;
  Handle handle(temp / "cache");
  CHECK(opcache_has(handle.store, "bad") == OPCACHE_USAGE);
  const std::string here = last_error();
  CHECK_FALSE(here.empty());
  std::string there = "unset";
  std::thread([&there] { there = opcache_last_error(); }).join();
  CHECK(there.empty());
  CHECK(last_error() == here);
}

TEST_CASE("C API opcache_open_ex takes the settings table's keys, in their JSON types, and names bad ones") {
  TempDir temp;
  const std::string cache = (temp / "cache").string();
  auto open_ex = [](const std::string& options) {
    opcache_store* store = nullptr;
    opcache_status status = opcache_open_ex(options.c_str(), &store);
    opcache_close(store);
    return status;
  };
  CHECK(open_ex(R"({"cache_dir":")" + cache + R"(","mode":"force","wait_timeout_s":5,"no_remote":true,)"
                R"("remotes":["file://)" + (temp / "remote").string() + R"("],"compression_level":9})") == OPCACHE_OK);

  CHECK(open_ex(R"({"cache_dir":")" + cache + R"(","colour":"blue"})") == OPCACHE_USAGE);
  CHECK(last_error().find("unknown option \"colour\" (allowed: cache_dir, config_file, mode, min_idle_s,") !=
        std::string::npos);
  CHECK(last_error().find("signing_key, trusted_keys, require_signature, team_single_flight, remotes, no_remote, token_file, shared_group, "
                          "compiler_check, exec_env, base_dir, compression_level, revocation_check_interval_s)") != std::string::npos);

  CHECK(open_ex(R"({"cache_dir":")" + cache + R"(","wait_timeout_s":"5"})") == OPCACHE_USAGE);
  CHECK(last_error() == "opcache_open_ex option \"wait_timeout_s\" must be an integer");
  CHECK(open_ex(R"({"cache_dir":")" + cache + R"(","no_remote":1})") == OPCACHE_USAGE);
  CHECK(last_error() == "opcache_open_ex option \"no_remote\" must be a boolean");
  CHECK(open_ex(R"({"cache_dir":")" + cache + R"(","remotes":[1]})") == OPCACHE_USAGE);
  CHECK(last_error() == "opcache_open_ex option \"remotes\" must be an array of strings");
  CHECK(open_ex(R"({"cache_dir":")" + cache + R"(","min_idle_s":-1})") == OPCACHE_USAGE);
  CHECK(last_error().find("min_idle_s \"-1\" is invalid: expected a number of seconds (0 or more)") !=
        std::string::npos);
  // CANN's aging pair is not settable: only op_cache.ini and ASCEND_* set it.
  CHECK(open_ex(R"({"cache_dir":")" + cache + R"(","max_op_cache_size":1})") == OPCACHE_USAGE);
}

TEST_CASE("C API opcache_get_or_build_json writes the files in place and names them, the key and the source") {
  TempDir temp;
  Handle handle(temp / "cache");
  const std::string descriptor = R"({"op_type":"scale","inputs":[{"shape":[4],"dtype":"float16"}]})";
  struct Builds {
    int count = 0;
  } builds;
  auto build = [](const char* work_dir, void* user_data) -> int {
    ++static_cast<Builds*>(user_data)->count;
    // More members than two, so that the work directory's order is unlikely to be the names' order.
    for (const char* name : {"scale.o", "scale.json", "z_tail.bin", "a_head.bin", "scale.info"}) {
      opcache::test::write_text(fs::path(work_dir) / name, name == std::string("scale.o") ? "object" : name);
    }
    return 0;
  };
  const fs::path out = temp / "kernel_meta";
  opcache::test::write_text(out / "other.o", "someone else's");  // not listed: not this kernel's
  char key[OPCACHE_KEY_BUFFER];
  REQUIRE(opcache_key(handle.store, descriptor.c_str(), k_scenario_spec, key) == OPCACHE_OK);
  for (const char* expected : {"built", "hit"}) {
    char* report = nullptr;
    REQUIRE_MESSAGE(opcache_get_or_build_json(handle.store, descriptor.c_str(), k_scenario_spec, out.c_str(), build,
                                              &builds, &report) == OPCACHE_OK,
                    last_error());
    REQUIRE(report != nullptr);
    auto parsed = nlohmann::json::parse(report);
    opcache_string_free(report);
    CHECK(parsed["source"] == expected);
    CHECK(parsed["key"] == key);
    std::vector<std::string> files = parsed["files"];  // sorted by file name, built or hit
    CHECK(files == std::vector<std::string>{(out / "a_head.bin").string(), (out / "scale.info").string(),
                                            (out / "scale.json").string(), (out / "scale.o").string(),
                                            (out / "z_tail.bin").string()});
    CHECK(read_text(out / "scale.o") == "object");
  }
  CHECK(builds.count == 1);
  CHECK(std::distance(fs::directory_iterator(out), fs::directory_iterator()) == 6);  // no staging left behind
  // A kernel put with its files in another order is reported by name too.
  const std::string put_descriptor = R"({"op_type":"scale","inputs":[{"shape":[16],"dtype":"float16"}]})";
  const fs::path staged = temp / "staged";
  opcache::test::write_text(staged / "z.o", "z");
  opcache::test::write_text(staged / "a.json", "a");
  const std::string z = (staged / "z.o").string(), a = (staged / "a.json").string();
  const char* put_files[] = {z.c_str(), a.c_str()};
  REQUIRE(opcache_put(handle.store, put_descriptor.c_str(), k_scenario_spec, put_files, 2, 0, key) == OPCACHE_OK);
  char* put_report = nullptr;
  REQUIRE(opcache_get_or_build_json(handle.store, put_descriptor.c_str(), k_scenario_spec, (temp / "put_out").c_str(),
                                    build, &builds, &put_report) == OPCACHE_OK);
  auto put_parsed = nlohmann::json::parse(put_report);
  opcache_string_free(put_report);
  CHECK(put_parsed["source"] == "hit");
  CHECK(put_parsed["files"] == nlohmann::json{(temp / "put_out" / "a.json").string(), (temp / "put_out" / "z.o").string()});
  // A failing build: its status, and no report.
  char* report = reinterpret_cast<char*>(0x1);
  auto failing = [](const char*, void*) -> int { return 3; };
  const std::string other = R"({"op_type":"scale","inputs":[{"shape":[8],"dtype":"float16"}]})";
  CHECK(opcache_get_or_build_json(handle.store, other.c_str(), k_scenario_spec, out.c_str(), failing, nullptr,
                                  &report) == OPCACHE_BUILD_FAILED);
  CHECK(report == nullptr);
  CHECK(opcache_get_or_build_json(handle.store, other.c_str(), k_scenario_spec, out.c_str(), failing, nullptr,
                                  nullptr) == OPCACHE_USAGE);
}

TEST_CASE("C API opcache_get_or_build_inputs_json keys declared inputs: an edit is a miss, unchanged a hit") {
  TempDir temp;
  Handle handle(temp / "cache");
  const std::string descriptor = R"({"op_type":"tiled_mul","inputs":[{"shape":[32],"dtype":"float16"}]})";
  const fs::path header = temp / "src" / "tiling.h";
  const fs::path templates = temp / "src" / "templates";
  opcache::test::write_text(header, "#define TILE 16\n");
  opcache::test::write_text(templates / "body.tpl", "loop\n");
  const std::string header_path = header.string(), templates_path = templates.string();
  const char* inputs[] = {header_path.c_str(), templates_path.c_str()};
  struct Compiles {
    fs::path header;
    int count = 0;
  } compiles{header};
  auto build = [](const char* work_dir, void* user_data) -> int {
    auto* state = static_cast<Compiles*>(user_data);
    ++state->count;
    opcache::test::write_text(fs::path(work_dir) / "tiled_mul.o", read_text(state->header));
    return 0;
  };
  // One call: its "source" and "key", REQUIREd to succeed.
  auto call = [&](const char* out, const char* const* declared, size_t count) {
    char* report = nullptr;
    REQUIRE_MESSAGE(opcache_get_or_build_inputs_json(handle.store, descriptor.c_str(), k_scenario_spec,
                                                     (temp / out).c_str(), declared, count, build, &compiles,
                                                     &report) == OPCACHE_OK,
                    last_error());
    auto parsed = nlohmann::json::parse(report);
    opcache_string_free(report);
    return std::make_pair(parsed["source"].get<std::string>(), parsed["key"].get<std::string>());
  };

  auto [first_source, first_key] = call("out1", inputs, 2);
  CHECK(first_source == "built");
  CHECK(call("out2", inputs, 2) == std::make_pair(std::string("hit"), first_key));
  CHECK(compiles.count == 1);
  CHECK(read_text(temp / "out2" / "tiled_mul.o") == "#define TILE 16\n");

  opcache::test::write_text(header, "#define TILE 32\n");
  auto [edited_source, edited_key] = call("out3", inputs, 2);
  CHECK(edited_source == "built");
  CHECK(edited_key != first_key);
  opcache::test::write_text(templates / "tail.tpl", "tail\n");  // a new file in a declared directory
  auto [added_source, added_key] = call("out4", inputs, 2);
  CHECK(added_source == "built");
  CHECK(added_key != edited_key);
  CHECK(compiles.count == 3);

  // No inputs (NULL, 0): opcache_get_or_build_json's key, opcache_key's.
  char plain_key[OPCACHE_KEY_BUFFER];
  REQUIRE(opcache_key(handle.store, descriptor.c_str(), k_scenario_spec, plain_key) == OPCACHE_OK);
  CHECK(call("out5", nullptr, 0).second == plain_key);
}

TEST_CASE("C API opcache_get_or_build_inputs_json refuses missing inputs, NULL entries and the reserved member") {
  TempDir temp;
  Handle handle(temp / "cache");
  const std::string descriptor = R"({"op_type":"tiled_mul"})";
  const std::string missing = (temp / "missing.h").string();
  const std::string out = (temp / "out").string();
  int builds = 0;
  auto build = [](const char*, void* user_data) -> int {
    ++*static_cast<int*>(user_data);
    return 0;
  };
  auto refused = [&](const std::string& text, const char* const* inputs, size_t count, const std::string& needle) {
    char* report = reinterpret_cast<char*>(0x1);
    CHECK(opcache_get_or_build_inputs_json(handle.store, text.c_str(), k_scenario_spec, out.c_str(), inputs, count,
                                           build, &builds, &report) == OPCACHE_USAGE);
    CHECK(report == nullptr);
    CHECK_MESSAGE(last_error().find(needle) != std::string::npos, last_error());
  };
  const char* missing_inputs[] = {missing.c_str()};
  refused(descriptor, missing_inputs, 1, "declared input \"" + missing + "\" does not exist");
  const char* null_entry[] = {nullptr};
  refused(descriptor, null_entry, 1, "inputs[0] is NULL");
  refused(descriptor, nullptr, 2, "inputs must not be NULL when input_count is 2");
  opcache::test::write_text(temp / "tiling.h", "#define TILE 16\n");
  const std::string header = (temp / "tiling.h").string();
  const char* present[] = {header.c_str()};
  refused(R"({"op_type":"tiled_mul","declared_inputs":[]})", present, 1, "\"declared_inputs\" is reserved");
  CHECK(builds == 0);
  char* report = nullptr;
  CHECK(opcache_get_or_build_inputs_json(handle.store, descriptor.c_str(), k_scenario_spec, out.c_str(), present, 1,
                                         build, &builds, nullptr) == OPCACHE_USAGE);
  CHECK(opcache_get_or_build_inputs_json(nullptr, descriptor.c_str(), k_scenario_spec, out.c_str(), present, 1, build,
                                         &builds, &report) == OPCACHE_USAGE);
  CHECK(builds == 0);
}

namespace c_api_report_test {

// Owns a scenario handle for the duration of a test.
struct ScenarioHandle {
  explicit ScenarioHandle(const char* text) {
    REQUIRE_MESSAGE(opcache_scenario_parse(text, &scenario, &environment) == OPCACHE_OK, opcache_last_error());
    REQUIRE(scenario != nullptr);
  }
  ~ScenarioHandle() { opcache_scenario_free(scenario); }
  ScenarioHandle(const ScenarioHandle&) = delete;
  ScenarioHandle& operator=(const ScenarioHandle&) = delete;
  opcache_scenario* scenario = nullptr;
  unsigned environment = 99;
};

// The paths of a report's packed file list, in order.
std::vector<std::string> report_files(const opcache_build_report& report) {
  std::vector<std::string> paths;
  for (size_t at = 0; at < report.files_size;) {
    paths.emplace_back(report.files + at);
    at += paths.back().size() + 1;
  }
  return paths;
}

}  // namespace c_api_report_test

TEST_CASE("C API opcache_scenario_parse resolves a scenario once and says what it read from the environment") {
  using c_api_report_test::ScenarioHandle;
  const std::string canonical = R"({"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC2"})";
  for (const char* text : {k_scenario_spec, k_scenario_json}) {
    ScenarioHandle parsed(text);
    CHECK(parsed.environment == 0u);  // the text alone decides it
    char* json = nullptr;
    REQUIRE(opcache_scenario_json(parsed.scenario, &json) == OPCACHE_OK);
    CHECK(std::string(json) == canonical);
    opcache_string_free(json);
  }
  // The canonical JSON is every field explicit: it parses to itself, reading nothing.
  ScenarioHandle again(canonical.c_str());
  CHECK(again.environment == 0u);
  // No device: RANK_SIZE / LOCAL_WORLD_SIZE decide it.
  ScenarioHandle from_environment("phase=train,toolchain=8.0.RC2,soc=Ascend910B1");
  CHECK(from_environment.environment == OPCACHE_SCENARIO_FROM_ENVIRONMENT);
  ScenarioHandle json_from_environment(R"({"phase":"train","toolchain":"8.0.RC2","soc":"Ascend910B1"})");
  CHECK(json_from_environment.environment == OPCACHE_SCENARIO_FROM_ENVIRONMENT);
  // environment_out may be NULL.
  opcache_scenario* quiet = nullptr;
  REQUIRE(opcache_scenario_parse(k_scenario_spec, &quiet, nullptr) == OPCACHE_OK);
  opcache_scenario_free(quiet);
  opcache_scenario_free(nullptr);
  // Failures: opcache_key's status and message, and no handle.
  opcache_scenario* bad = reinterpret_cast<opcache_scenario*>(0x1);
  CHECK(opcache_scenario_parse("device=multi,phase=sleep,toolchain=8.0.RC2,soc=Ascend910B1", &bad, nullptr) ==
        OPCACHE_USAGE);
  CHECK(bad == nullptr);
  CHECK(last_error().find("phase") != std::string::npos);
  CHECK(opcache_scenario_parse(nullptr, &bad, nullptr) == OPCACHE_USAGE);
  CHECK(opcache_scenario_parse(k_scenario_spec, nullptr, nullptr) == OPCACHE_USAGE);
  char* json = nullptr;
  CHECK(opcache_scenario_json(nullptr, &json) == OPCACHE_USAGE);
}

TEST_CASE("C API opcache_get_or_build_report reports the key, source and files sorted by name without JSON") {
  using c_api_report_test::report_files;
  using c_api_report_test::ScenarioHandle;
  TempDir temp;
  Handle handle(temp / "cache");
  ScenarioHandle scenario(k_scenario_spec);
  const std::string descriptor = R"({"op_type":"scale","inputs":[{"shape":[32],"dtype":"float16"}]})";
  int builds = 0;
  auto build = [](const char* work_dir, void* user_data) -> int {
    ++*static_cast<int*>(user_data);
    for (const char* name : {"scale.o", "z_tail.bin", "a_head.bin", "scale.json"}) {
      opcache::test::write_text(fs::path(work_dir) / name, name);
    }
    return 0;
  };
  const fs::path out = temp / "kernel_meta";
  opcache::test::write_text(out / "other.o", "someone else's");  // not listed: not this kernel's
  char key[OPCACHE_KEY_BUFFER];
  REQUIRE(opcache_key(handle.store, descriptor.c_str(), k_scenario_spec, key) == OPCACHE_OK);
  for (opcache_source expected : {OPCACHE_SOURCE_BUILT, OPCACHE_SOURCE_HIT}) {
    opcache_build_report report;
    REQUIRE_MESSAGE(opcache_get_or_build_report(handle.store, descriptor.c_str(), scenario.scenario, out.c_str(),
                                                nullptr, 0, build, &builds, &report) == OPCACHE_OK,
                    last_error());
    CHECK(report.source == expected);
    CHECK(std::string(report.key) == key);
    CHECK(report.file_count == 4);
    CHECK(report_files(report) == std::vector<std::string>{(out / "a_head.bin").string(), (out / "scale.json").string(),
                                                           (out / "scale.o").string(), (out / "z_tail.bin").string()});
    REQUIRE(report.note != nullptr);
    CHECK(std::string(report.note).empty());
    if (expected == OPCACHE_SOURCE_HIT) {
      CHECK(report.build_ms == 0);
    }
    CHECK(read_text(out / "scale.o") == "scale.o");
  }
  CHECK(builds == 1);
  CHECK(std::distance(fs::directory_iterator(out), fs::directory_iterator()) == 5);  // no staging left behind

  // A failing build: its status, and a zeroed report.
  opcache_build_report failed;
  failed.files = "stale";
  auto failing = [](const char*, void*) -> int { return 3; };
  const std::string other = R"({"op_type":"scale","inputs":[{"shape":[8],"dtype":"float16"}]})";
  CHECK(opcache_get_or_build_report(handle.store, other.c_str(), scenario.scenario, out.c_str(), nullptr, 0, failing,
                                    nullptr, &failed) == OPCACHE_BUILD_FAILED);
  CHECK(failed.files == nullptr);
  CHECK(failed.file_count == 0);
  // NULL arguments.
  CHECK(opcache_get_or_build_report(handle.store, other.c_str(), scenario.scenario, out.c_str(), nullptr, 0, build,
                                    &builds, nullptr) == OPCACHE_USAGE);
  CHECK(opcache_get_or_build_report(handle.store, other.c_str(), nullptr, out.c_str(), nullptr, 0, build, &builds,
                                    &failed) == OPCACHE_USAGE);
  CHECK(last_error().find("opcache_get_or_build_report") != std::string::npos);
  CHECK(builds == 1);
}

TEST_CASE("C API opcache_get_or_build_report keys declared inputs as opcache_get_or_build_inputs_json does") {
  using c_api_report_test::ScenarioHandle;
  TempDir temp;
  Handle handle(temp / "cache");
  ScenarioHandle scenario(k_scenario_spec);
  const std::string descriptor = R"({"op_type":"tiled_mul"})";
  const fs::path header = temp / "tiling.h";
  opcache::test::write_text(header, "#define TILE 16\n");
  const std::string header_path = header.string();
  const char* inputs[] = {header_path.c_str()};
  int builds = 0;
  auto build = [](const char* work_dir, void* user_data) -> int {
    ++*static_cast<int*>(user_data);
    opcache::test::write_text(fs::path(work_dir) / "tiled_mul.o", "object");
    return 0;
  };
  auto call = [&](const char* out) {
    opcache_build_report report;
    REQUIRE_MESSAGE(opcache_get_or_build_report(handle.store, descriptor.c_str(), scenario.scenario,
                                                (temp / out).c_str(), inputs, 1, build, &builds, &report) == OPCACHE_OK,
                    last_error());
    return std::make_pair(report.source, std::string(report.key));
  };
  auto [first_source, first_key] = call("out1");
  CHECK(first_source == OPCACHE_SOURCE_BUILT);
  // The same key as the JSON call's.
  char* json = nullptr;
  REQUIRE(opcache_get_or_build_inputs_json(handle.store, descriptor.c_str(), k_scenario_spec, (temp / "out2").c_str(),
                                           inputs, 1, build, &builds, &json) == OPCACHE_OK);
  CHECK(nlohmann::json::parse(json)["key"] == first_key);
  opcache_string_free(json);
  CHECK(call("out3") == std::make_pair(OPCACHE_SOURCE_HIT, first_key));
  opcache::test::write_text(header, "#define TILE 32\n");
  auto [edited_source, edited_key] = call("out4");
  CHECK(edited_source == OPCACHE_SOURCE_BUILT);
  CHECK(edited_key != first_key);
  CHECK(builds == 2);
  opcache_build_report report;
  CHECK(opcache_get_or_build_report(handle.store, descriptor.c_str(), scenario.scenario, (temp / "out5").c_str(),
                                    nullptr, 2, build, &builds, &report) == OPCACHE_USAGE);
  CHECK(last_error().find("opcache_get_or_build_report: inputs must not be NULL") != std::string::npos);
}
