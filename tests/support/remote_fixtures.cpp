#include "tests/support/remote_fixtures.hpp"

#include <cstdlib>
#include <stdexcept>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "store/bundle_writer.hpp"
#include "base/byte_stream.hpp"
#include "store/scenario.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test {

namespace fs = std::filesystem;

namespace {

TestKernel bundle_kernel(const std::string& descriptor_json, std::vector<fs::path> files, std::int64_t build_ms = 0) {
  auto no_env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
  auto scenario = store::parse_scenario_spec(k_test_scenario, no_env);
  REQUIRE(scenario.ok());
  store::BundleInput input;
  input.descriptor = nlohmann::json::parse(descriptor_json);
  input.scenario = store::scenario_to_json(*scenario);
  for (const auto& file : files) {
    input.members.push_back({file.filename().string(), file, ""});
  }
  input.build_ms = build_ms;
  base::StringSink sink;
  auto written = store::write_bundle(input, sink);
  REQUIRE_MESSAGE(written.ok(), (written.ok() ? "" : written.error().message()));
  TestKernel kernel;
  kernel.key = written->manifest.key;
  kernel.descriptor_json = descriptor_json;
  kernel.files = std::move(files);
  kernel.bundle = sink.data();
  return kernel;
}

// The descriptor of an elementwise op on one vector of `length` `dtype`s.
nlohmann::json vector_descriptor(const std::string& op_type, int length, const std::string& dtype) {
  const nlohmann::json tensor = {
      {"shape", nlohmann::json::array({length})}, {"dtype", dtype}, {"format", "ND"}};
  return {{"op_type", op_type},
          {"inputs", nlohmann::json::array({tensor})},
          {"outputs", nlohmann::json::array({tensor})},
          {"attrs", nlohmann::json::object()}};
}

}  // namespace

std::map<std::string, std::string> TestKernel::contents() const {
  std::map<std::string, std::string> out;
  for (const auto& file : files) {
    out[file.filename().string()] = read_text(file);
  }
  return out;
}

TestKernel make_test_kernel(const fs::path& dir, const std::string& op, int length) {
  auto triple = make_kernel(dir / (op + "_" + std::to_string(length)), op, length);
  return bundle_kernel(triple.descriptor_json, triple.files());
}

TestKernel make_cheap_kernel(const fs::path& dir, int index, std::int64_t build_ms) {
  const fs::path home = dir / ("cheap_" + std::to_string(index));
  const nlohmann::json descriptor = vector_descriptor("add", index + 1, "float16");
  const std::string stem = "add_" + std::to_string(index);
  write_text(home / (stem + ".o"), "object code of kernel " + std::to_string(index) + std::string(200, 'x'));
  write_text(home / (stem + ".json"), nlohmann::json{{"kernelName", stem}, {"blockDim", 1}}.dump());
  return bundle_kernel(descriptor.dump(), {home / (stem + ".o"), home / (stem + ".json")}, build_ms);
}

TestKernel make_large_kernel(const fs::path& dir, int index, std::size_t bytes) {
  const fs::path home = dir / ("large_" + std::to_string(index));
  const nlohmann::json descriptor = vector_descriptor("large", index + 1, "float32");
  std::string object(bytes, '\0');
  std::uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(index + 1);
  for (char& byte : object) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    byte = static_cast<char>(state & 0xff);
  }
  write_text(home / "large.o", object);
  return bundle_kernel(descriptor.dump(), {home / "large.o"});
}

void publish_then_revoke(Store& writer, Store& reader, const TestKernel& kernel, const fs::path& out,
                         const std::string& reason) {
  put_kernel(writer, kernel);
  REQUIRE(writer.push(Store::TransferOptions{}).ok());
  REQUIRE(reader.get(kernel.key, out).value().has_value());
  Store::RevokeOptions revoke;
  revoke.keys = {kernel.key};
  revoke.reason = reason;
  auto revoked = writer.revoke(revoke);
  REQUIRE_MESSAGE(revoked.ok(), (revoked.ok() ? "" : revoked.error().message()));
  CHECK(*revoked == std::vector<bool>{true});
}

void check_refused_until_unrevoked(Store& writer, const TestKernel& kernel, const std::function<bool()>& on_remote) {
  put_kernel(writer, kernel);
  auto refused = writer.push(Store::TransferOptions{});
  CHECK((!refused.ok() || refused->failed == 1));
  CHECK_FALSE(on_remote());
  Store::RevokeOptions revoke;
  revoke.keys = {kernel.key};
  auto unrevoked = writer.unrevoke(revoke);
  REQUIRE(unrevoked.ok());
  CHECK(*unrevoked == std::vector<bool>{true});
  REQUIRE(writer.push(Store::TransferOptions{}).ok());
  CHECK(on_remote());
}

fs::path write_bundle_file(const fs::path& dir, const TestKernel& kernel) {
  const fs::path path = dir / (kernel.key + ".bundle");
  write_text(path, kernel.bundle);
  return path;
}

Scenario test_scenario() {
  auto scenario = parse_scenario(k_test_scenario);
  REQUIRE(scenario.ok());
  return *scenario;
}

std::function<void(const std::string&)> WarningLog::sink() {
  return [state = m_state](const std::string& message) {
    std::lock_guard lock(state->mutex);
    state->messages.push_back(message);
  };
}

std::vector<std::string> WarningLog::all() const {
  std::lock_guard lock(m_state->mutex);
  return m_state->messages;
}

bool WarningLog::contains(const std::string& text) const {
  for (const auto& message : all()) {
    if (message.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::string WarningLog::joined() const {
  std::string out;
  for (const auto& message : all()) {
    out += message + "\n";
  }
  return out;
}

Store open_remote_store(const fs::path& dir, const std::vector<std::string>& remotes, WarningLog* warnings,
                        const fs::path& token_file) {
  // Nothing from the developer's environment: only what the test says.
  for (const char* name :
       {"OPCACHE_REMOTE", "OPCACHE_TOKEN", "OPCACHE_CONFIG", "OPCACHE_MODE", "OPCACHE_TEAM_SINGLE_FLIGHT"}) {
    ::unsetenv(name);
  }
  StoreConfig config;
  config.cache_dir = dir;
  config.remotes = remotes;
  config.no_remote = remotes.empty();
  config.token_file = token_file;
  if (warnings != nullptr) {
    config.on_warning = warnings->sink();
  }
  auto store = Store::open(config);
  REQUIRE_MESSAGE(store.ok(), (store.ok() ? "" : store.error().message()));
  return std::move(store).value();
}

std::string put_kernel(Store& store, const TestKernel& kernel) {
  auto put = store.put(kernel.descriptor_json, test_scenario(), kernel.files);
  REQUIRE_MESSAGE(put.ok(), (put.ok() ? "" : put.error().message()));
  REQUIRE(put->key == kernel.key);
  return put->key;
}

bool holds(Store& store, const std::string& key) {
  auto contains = store.contains(key);
  REQUIRE(contains.ok());
  return *contains;
}

BuildSource get_or_build_one_file(Store& store, const TestKernel& kernel, const fs::path& out) {
  auto got = store.get_or_build(kernel.descriptor_json, test_scenario(), out, [](const fs::path& work) {
    write_text(work / "kernel.o", "built here");
    return Status{};
  });
  REQUIRE_MESSAGE(got.ok(), got.error().message());
  return got->source;
}

std::size_t count_files(const fs::path& dir) {
  std::size_t count = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file()) {
      ++count;
    }
  }
  return count;
}

std::int64_t counter(Store& store, const std::string& name) {
  auto stats = store.stats();
  REQUIRE(stats.ok());
  auto it = stats->counters.find(name);
  return it == stats->counters.end() ? 0 : it->second;
}

ProcessOptions hermetic_cli() {
  ProcessOptions options;
  options.unset_env = {"OPCACHE_DIR",         "OPCACHE_CONFIG",   "OPCACHE_REMOTE",         "OPCACHE_TOKEN",
                       "RANK_SIZE",           "LOCAL_WORLD_SIZE", "XDG_CACHE_HOME",         "OPCACHE_VOLATILE_FIELDS",
                       "OPCACHE_MODE",        "OPCACHE_MIN_IDLE", "OPCACHE_OP_DEBUG_LEVEL", "OPCACHE_OP_DEBUG_LIST",
                       "OPCACHE_WAIT_TIMEOUT"};
  return options;
}

std::size_t breaker_files(const std::filesystem::path& cache) {
  std::size_t count = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(cache / "remotes", ec)) {
    count += entry.path().extension() == ".breaker" ? 1 : 0;
  }
  return count;
}

}  // namespace opcache::test
