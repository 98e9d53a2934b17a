// The public C++ API (include/opcache/opcache.hpp), used as a compiler would.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/canonical_json.hpp"
#include "base/json_parse.hpp"
#include "base/sha256.hpp"
#include "opcache/opcache.hpp"
#include "store/descriptor.hpp"
#include "store/key.hpp"
#include "store/scenario.hpp"
#include "store/volatile_fields.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::ErrorCode;
using opcache::Store;
using opcache::StoreConfig;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::test_scenario;
namespace fs = std::filesystem;

namespace {

// The built-in volatile field list must not be overridden from outside.
void use_builtin_volatile_fields() { ::unsetenv("OPCACHE_VOLATILE_FIELDS"); }

Store open_store(const fs::path& dir, StoreConfig config = {}) {
  config.cache_dir = dir;
  auto store = Store::open(config);
  REQUIRE_MESSAGE(store.ok(), (store.ok() ? "" : store.error().message()));
  return std::move(store).value();
}

std::string key_ok(const Store& store, const std::string& descriptor, const opcache::Scenario& scenario) {
  auto key = store.key(descriptor, scenario);
  REQUIRE_MESSAGE(key.ok(), (key.ok() ? "" : key.error().message()));
  return *key;
}

// The key through the internal store/ path: parse, strip with the built-in
// list, derive.
std::string store_layer_key(const std::string& descriptor, const opcache::Scenario& scenario) {
  auto parsed = opcache::base::parse_json(descriptor, "descriptor");
  REQUIRE(parsed.ok());
  auto filter = opcache::store::VolatileFieldFilter::compile(opcache::store::VolatileFieldFilter::default_patterns());
  REQUIRE(filter.ok());
  auto normalized = opcache::store::normalize_descriptor(*parsed, *filter, "descriptor");
  REQUIRE(normalized.ok());
  auto key = opcache::store::derive_key(normalized->normalized, opcache::store::scenario_to_json(scenario));
  REQUIRE(key.ok());
  return *key;
}

// The key from first principles (design.md): SHA-256 of the prefix, the
// canonical descriptor and the canonical scenario.
std::string preimage_key(const std::string& stripped_descriptor, const opcache::Scenario& scenario) {
  auto parsed = opcache::base::parse_json(stripped_descriptor, "descriptor");
  REQUIRE(parsed.ok());
  auto canonical = opcache::base::canonical_json(*parsed);
  REQUIRE(canonical.ok());
  return opcache::base::sha256_hex("opcache-key-v1\n" + *canonical + "\n" + opcache::scenario_canonical_json(scenario));
}

nlohmann::json with(const std::string& descriptor, const std::string& field, const nlohmann::json& value) {
  auto json = nlohmann::json::parse(descriptor);
  json[field] = value;
  return json;
}

}  // namespace

TEST_CASE("opcache::Store opens a store at cache_dir and creates its layout, and its index on first use") {
  TempDir temp;
  auto dir = temp / "cache";
  Store store = open_store(dir);
  CHECK(store.root() == dir);
  CHECK(fs::is_directory(dir / "objects"));
  CHECK(fs::is_directory(dir / "tmp"));
  // Not before: an exec miss creates it while its command runs (StoreWarmup).
  CHECK_FALSE(fs::exists(dir / "index.db"));
  CHECK(store.stats().ok());
  CHECK(fs::is_regular_file(dir / "index.db"));
  // A second handle on the same root works too.
  Store second = open_store(dir);
  CHECK(second.root() == dir);
  // Moving a handle keeps it usable.
  Store moved = std::move(second);
  CHECK(moved.root() == dir);
  CHECK(moved.stats().ok());
}

TEST_CASE("opcache::Store::key equals store::derive_key of the descriptor with volatile fields removed") {
  use_builtin_volatile_fields();
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "square", 16);
  Store store = open_store(temp / "cache");
  const auto scenario = test_scenario();

  const std::string key = key_ok(store, kernel.descriptor_json, scenario);
  CHECK(key.size() == 64);
  CHECK(key == store_layer_key(kernel.descriptor_json, scenario));
  CHECK(key == preimage_key(kernel.descriptor_json, scenario));

  // Volatile fields (job ids, pids, kernel names) do not change the key ...
  CHECK(key_ok(store, with(kernel.descriptor_json, "job_id", 12345).dump(), scenario) == key);
  auto noisy = with(kernel.descriptor_json, "job_id", 7);
  noisy["attrs"]["pid"] = 4242;
  noisy["kernel_name"] = "square_99999_0__kernel0";
  CHECK(key_ok(store, noisy.dump(), scenario) == key);
  CHECK(store_layer_key(noisy.dump(), scenario) == key);
  auto canonical = store.canonical_descriptor(noisy.dump());
  REQUIRE(canonical.ok());
  CHECK(canonical->find("job_id") == std::string::npos);
  CHECK(canonical->find("kernel_name") == std::string::npos);
  CHECK(canonical->find("4242") == std::string::npos);

  // ... nor do key order and whitespace ...
  auto pretty = nlohmann::json::parse(kernel.descriptor_json).dump(4);
  CHECK(key_ok(store, pretty, scenario) == key);

  // ... but a shape, a dtype or the scenario do.
  auto reshaped = nlohmann::json::parse(kernel.descriptor_json);
  reshaped["inputs"][0]["shape"] = {32};
  CHECK(key_ok(store, reshaped.dump(), scenario) != key);
  auto retyped = nlohmann::json::parse(kernel.descriptor_json);
  retyped["outputs"][0]["dtype"] = "float16";
  CHECK(key_ok(store, retyped.dump(), scenario) != key);
  auto other_scenario = scenario;
  other_scenario.device_mode = opcache::DeviceMode::multi;
  CHECK(key_ok(store, kernel.descriptor_json, other_scenario) != key);
  other_scenario = scenario;
  other_scenario.extra["python"] = "3.11";
  CHECK(key_ok(store, kernel.descriptor_json, other_scenario) != key);
}

TEST_CASE("opcache::Store with volatile_fields \"none\" hashes every field, job_id included") {
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "relu", 16);
  StoreConfig config;
  config.volatile_fields = "none";
  Store store = open_store(temp / "cache", config);
  const auto scenario = test_scenario();
  const auto plain = key_ok(store, kernel.descriptor_json, scenario);
  const auto with_job = with(kernel.descriptor_json, "job_id", 12345).dump();
  CHECK(key_ok(store, with_job, scenario) != plain);
  CHECK(key_ok(store, with_job, scenario) == preimage_key(with_job, scenario));
  CHECK(plain == preimage_key(kernel.descriptor_json, scenario));

  SUBCASE("a custom list drops exactly the fields it names") {
    StoreConfig custom;
    custom.volatile_fields = "build_tag";
    Store custom_store = open_store(temp / "cache2", custom);
    CHECK(key_ok(custom_store, with(kernel.descriptor_json, "build_tag", "x").dump(), scenario) == plain);
    CHECK(key_ok(custom_store, with_job, scenario) != plain);
  }
  SUBCASE("an invalid pattern is a usage error at open") {
    StoreConfig bad;
    bad.cache_dir = temp / "cache3";
    bad.volatile_fields = "a..b";
    auto opened = Store::open(bad);
    REQUIRE_FALSE(opened.ok());
    CHECK(opened.error().code() == ErrorCode::usage);
    CHECK(opened.error().message().find("a..b") != std::string::npos);
  }
}

TEST_CASE("opcache::Store put, get, contains, list, stats, verify and remove round-trip a kernel") {
  use_builtin_volatile_fields();
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "square", 16);
  Store store = open_store(temp / "cache");
  const auto scenario = test_scenario();
  const auto key = key_ok(store, kernel.descriptor_json, scenario);

  CHECK_FALSE(*store.contains(key));
  auto miss = store.get(key, temp / "miss");
  REQUIRE(miss.ok());
  CHECK_FALSE(miss->has_value());

  // The compiler's descriptor carries a job id; the entry is stored under the stable key.
  opcache::PutOptions options;
  options.build_ms = 2500;
  auto put = store.put(with(kernel.descriptor_json, "job_id", 77).dump(), scenario, kernel.files(), options);
  REQUIRE_MESSAGE(put.ok(), (put.ok() ? "" : put.error().message()));
  CHECK(put->stored);
  CHECK(put->key == key);
  CHECK(put->raw_bytes == static_cast<std::int64_t>(fs::file_size(kernel.object) + fs::file_size(kernel.metadata) +
                                                    fs::file_size(kernel.info)));

  // Another rank with another job id finds it present.
  auto again = store.put(with(kernel.descriptor_json, "job_id", 78).dump(), scenario, kernel.files(), options);
  REQUIRE(again.ok());
  CHECK_FALSE(again->stored);
  CHECK(again->digest == put->digest);

  CHECK(*store.contains(key));
  auto entry = store.lookup(key);
  REQUIRE(entry.ok());
  REQUIRE(entry->has_value());
  CHECK((*entry)->op_type == "square");
  CHECK((*entry)->build_ms == 2500);

  auto out = temp / "kernel_meta";
  auto hit = store.get(key, out);
  REQUIRE(hit.ok());
  REQUIRE(hit->has_value());
  auto expected = kernel.files();
  REQUIRE((*hit)->files.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK((*hit)->files[i] == out / expected[i].filename());
    CHECK(read_text((*hit)->files[i]) == read_text(expected[i]));
  }

  auto listed = store.list();
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK(listed->front().key == key);
  CHECK(listed->front().hits == 1);
  opcache::ListFilter filter;
  filter.op_type = "relu";
  CHECK(store.list(filter)->empty());

  auto stats = store.stats();
  REQUIRE(stats.ok());
  CHECK(stats->totals.entries == 1);
  CHECK(stats->counters.at("stores") == 1);
  CHECK(stats->counters.at("already_present") == 1);
  CHECK(stats->counters.at("hits") == 1);
  CHECK(stats->counters.at("misses") == 1);
  CHECK(stats->counters.at("compile_ms_saved") == 2500);

  auto report = store.verify(false);
  REQUIRE(report.ok());
  CHECK(report->problems.empty());
  CHECK(report->entries_checked == 1);

  auto removed = store.remove(key);
  REQUIRE(removed.ok());
  CHECK(*removed);
  CHECK_FALSE(*store.contains(key));
  CHECK_FALSE(store.lookup(key)->has_value());
  auto after = store.get(key, temp / "after");
  REQUIRE(after.ok());
  CHECK_FALSE(after->has_value());
  removed = store.remove(key);
  REQUIRE(removed.ok());
  CHECK_FALSE(*removed);
}

TEST_CASE("opcache::Store put with replace stores new bytes under the same key") {
  use_builtin_volatile_fields();
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "neg", 16);
  auto rebuilt_dir = temp / "rebuilt";
  fs::create_directories(rebuilt_dir);
  std::vector<fs::path> rebuilt;
  for (const auto& file : kernel.files()) {
    rebuilt.push_back(rebuilt_dir / file.filename());
    fs::copy_file(file, rebuilt.back());
  }
  opcache::test::write_text(rebuilt[2], read_text(kernel.info) + "\n");  // a changed .info
  Store store = open_store(temp / "cache");
  const auto scenario = test_scenario();
  auto first = store.put(kernel.descriptor_json, scenario, kernel.files());
  REQUIRE(first.ok());
  opcache::PutOptions replace;
  replace.replace = opcache::ReplacePolicy::replace;
  auto second = store.put(kernel.descriptor_json, scenario, rebuilt, replace);
  REQUIRE(second.ok());
  CHECK(second->stored);
  CHECK(second->key == first->key);
  CHECK(second->digest != first->digest);
  auto hit = store.get(first->key, temp / "out");
  REQUIRE(hit.ok());
  REQUIRE(hit->has_value());
  CHECK(read_text((*hit)->files[2]) == read_text(rebuilt[2]));
}

TEST_CASE("opcache::Store rejects bad descriptors with a usage error naming the descriptor") {
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "square", 16);
  Store store = open_store(temp / "cache");
  const auto scenario = test_scenario();
  for (const std::string bad : {R"({"op_type": "Add",)", "not json", "[1,2,3]", R"({"inputs": []})",
                                R"({"op_type": ""})", R"({"op_type": 5})", R"({"op_type":"A","op_type":"B"})"}) {
    CAPTURE(bad);
    auto key = store.key(bad, scenario);
    REQUIRE_FALSE(key.ok());
    CHECK(key.error().code() == ErrorCode::usage);
    CHECK(key.error().message().find("descriptor") != std::string::npos);
    auto put = store.put(bad, scenario, kernel.files());
    REQUIRE_FALSE(put.ok());
    CHECK(put.error().code() == ErrorCode::usage);
    CHECK(put.error().message().find("descriptor") != std::string::npos);
  }
  CHECK(store.stats()->totals.entries == 0);
  CHECK(fs::is_empty(temp / "cache" / "tmp"));

  auto bad_key = store.get("XYZ", temp / "out");
  REQUIRE_FALSE(bad_key.ok());
  CHECK(bad_key.error().code() == ErrorCode::usage);
  auto bad_lookup = store.lookup("../etc/passwd");
  REQUIRE_FALSE(bad_lookup.ok());
  CHECK(bad_lookup.error().code() == ErrorCode::usage);
}

TEST_CASE("opcache::Store put of a missing file fails with not_found naming the file and stores nothing") {
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "square", 16);
  Store store = open_store(temp / "cache");
  auto files = kernel.files();
  files.push_back(temp / "src" / "missing.bin");
  auto put = store.put(kernel.descriptor_json, test_scenario(), files);
  REQUIRE_FALSE(put.ok());
  CHECK(put.error().code() == ErrorCode::not_found);
  CHECK(put.error().message().find("missing.bin") != std::string::npos);
  CHECK(store.stats()->totals.entries == 0);
  CHECK(fs::is_empty(temp / "cache" / "tmp"));
}

TEST_CASE("opcache::Store reports a corrupt entry through on_warning and treats it as a miss") {
  use_builtin_volatile_fields();
  TempDir temp;
  auto kernel = opcache::test::make_kernel(temp / "src", "relu", 16);
  std::vector<std::string> warnings;
  StoreConfig config;
  config.on_warning = [&warnings](const std::string& message) { warnings.push_back(message); };
  Store store = open_store(temp / "cache", config);
  auto put = store.put(kernel.descriptor_json, test_scenario(), kernel.files());
  REQUIRE(put.ok());

  auto object = temp / "cache" / "objects" / put->digest.substr(0, 2) / put->digest;
  REQUIRE(fs::exists(object));
  std::string bytes = read_text(object);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01);
  opcache::test::write_text(object, bytes);

  auto out = temp / "out";
  auto got = store.get(put->key, out);
  REQUIRE(got.ok());
  CHECK_FALSE(got->has_value());
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find(put->key) != std::string::npos);
  CHECK(fs::is_empty(out));
  CHECK_FALSE(*store.contains(put->key));
  auto stats = store.stats();
  REQUIRE(stats.ok());
  CHECK(stats->counters.at("corrupt_entries") == 1);
  CHECK(stats->counters.at("misses") == 1);
  CHECK(stats->totals.entries == 0);
}
