#include "tests/support/single_flight.hpp"

#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"

namespace opcache::test {

namespace fs = std::filesystem;
using nlohmann::json;

std::int64_t ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::string descriptor_for(const std::string& op_type, int index) {
  json descriptor = {{"op_type", op_type},
                     {"inputs", {{{"shape", {index + 1, 16}}, {"dtype", "float16"}, {"format", "ND"}}}},
                     {"outputs", {{{"shape", {index + 1, 16}}, {"dtype", "float16"}, {"format", "ND"}}}},
                     {"attrs", json::object()}};
  return descriptor.dump();
}

fs::path compile_shared_object(const TempDir& dir) {
  return compile_object(dir / "src", "sf_kernel",
                        "int sf_kernel(const float* x, float* y) { y[0] = x[0] * 3.0f + 1.0f; return 0; }\n");
}

const char* source_name(BuildSource source) {
  return source == BuildSource::hit ? "hit" : source == BuildSource::built ? "built" : "bypassed";
}

StoreConfig config_for(const fs::path& cache, std::optional<std::string> mode) {
  StoreConfig config;
  config.cache_dir = cache;
  config.mode = std::move(mode);
  return config;
}

std::vector<std::string> exec_argv(const fs::path& cache, const fs::path& desc, const fs::path& out,
                                   const std::vector<std::string>& outputs, const std::string& script,
                                   const std::vector<std::string>& script_args, JsonOutput json_output,
                                   const std::vector<std::string>& extra) {
  std::vector<std::string> argv{cli_path(), "--cache-dir", cache.string()};
  if (json_output == JsonOutput::yes) {
    argv.push_back("--json");
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("exec");
  for (const std::string& arg : {std::string("--desc"), desc.string(), std::string("--scenario"),
                                 std::string(k_test_scenario), std::string("--out"), out.string(),
                                 std::string("--key-on"), std::string("descriptor")}) {
    argv.push_back(arg);
  }
  for (const auto& name : outputs) {
    argv.push_back("--output");
    argv.push_back(name);
  }
  for (const std::string& arg : {std::string("--"), std::string("sh"), std::string("-c"), script}) {
    argv.push_back(arg);
  }
  argv.insert(argv.end(), script_args.begin(), script_args.end());
  return argv;
}

std::string json_source(const std::string& stdout_text) {
  auto document = json::parse(stdout_text, nullptr, false);
  return document.is_object() ? document.value("source", std::string("?")) : std::string("unparsable");
}

fs::path flight_lock(const fs::path& cache, const fs::path& desc) {
  auto key = run_cli({"--cache-dir", cache.string(), "key", "--desc", desc.string(), "--scenario", k_test_scenario});
  REQUIRE_MESSAGE(key.exit_code == 0, "opcache key --desc ", desc.string(), ": ", key.err);
  return cache / "locks" / (key.out.substr(0, key.out.find('\n')) + ".lock");
}

}  // namespace opcache::test
