#include "tests/support/cli_runner.hpp"

#include <doctest/doctest.h>

namespace opcache::test {

ProcessOptions hermetic(std::map<std::string, std::string> env) {
  ProcessOptions options;
  options.unset_env = {"OPCACHE_DIR",          "OPCACHE_CONFIG",         "OPCACHE_REMOTE",       "OPCACHE_TOKEN",
                       "RANK_SIZE",            "LOCAL_WORLD_SIZE",       "RANK_ID",              "XDG_CACHE_HOME",
                       "OPCACHE_VOLATILE_FIELDS", "OPCACHE_MODE",        "OPCACHE_MIN_IDLE",     "OPCACHE_OP_DEBUG_LEVEL",
                       "OPCACHE_OP_DEBUG_LIST", "OPCACHE_WAIT_TIMEOUT",  "MS_COMPILER_CACHE_PATH", "OPCACHE_SIGNING_KEY",
                       "OPCACHE_TRUSTED_KEYS", "OPCACHE_REQUIRE_SIGNATURE",
                       // CANN's aging limits, which the settings table also reads
                       "ASCEND_MAX_OP_CACHE_SIZE", "ASCEND_REMAIN_CACHE_SIZE_RATIO"};
  const auto& common = hermetic_variables();  // also the server's OPCACHE_SERVE_* variables
  options.unset_env.insert(options.unset_env.end(), common.begin(), common.end());
  options.env = std::move(env);
  return options;
}

ProcessResult CliRunner::run(const std::vector<std::string>& args, const ProcessOptions& options) const {
  std::vector<std::string> full{"--cache-dir", m_cache.string()};
  full.insert(full.end(), args.begin(), args.end());
  return run_cli(full, options);
}

nlohmann::json CliRunner::run_json(const std::vector<std::string>& args, int expected_exit,
                                   const ProcessOptions& options) const {
  std::vector<std::string> full{"--json"};
  full.insert(full.end(), args.begin(), args.end());
  auto result = run(full, options);
  INFO("opcache --json ", join(args), "\nstdout: ", result.out, "\nstderr: ", result.err);
  REQUIRE(result.exit_code == expected_exit);
  auto document = nlohmann::json::parse(result.out, nullptr, /*allow_exceptions=*/false);
  REQUIRE(!document.is_discarded());
  return document;
}

std::filesystem::path CliRunner::descriptor_file(const KernelTriple& kernel) const {
  auto path = m_dir / "desc" / (kernel.stem + ".desc.json");
  write_text(path, kernel.descriptor_json);
  return path;
}

nlohmann::json CliRunner::put(const KernelTriple& kernel, const std::string& scenario, std::vector<std::string> extra,
                              const ProcessOptions& options) const {
  std::vector<std::string> args{"put", "--desc", descriptor_file(kernel).string(), "--scenario", scenario};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const auto& file : kernel.files()) {
    args.push_back(file.string());
  }
  auto document = run_json(args, 0, options);
  REQUIRE(document.contains("key"));
  return document;
}

std::string CliRunner::join(const std::vector<std::string>& args) {
  std::string text;
  for (const auto& arg : args) {
    text += (text.empty() ? "" : " ") + arg;
  }
  return text;
}

}  // namespace opcache::test
