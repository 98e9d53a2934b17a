// The built `opcache` CLI bound to one cache directory, run as a separate
// process with an environment that cannot leak the user's settings in.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test {

/// Options that keep the CLI away from the user's environment (no cache dir,
/// config file, remotes, mode, signing or trust settings, rank variables,
/// CANN aging limits, nor any other variable of the settings tables);
/// `env` is then added.
ProcessOptions hermetic(std::map<std::string, std::string> env = {});

/// `opcache --cache-dir <cache> …`, checked and parsed for tests.
class CliRunner {
 public:
  /// Files of the test (descriptors) go to `dir`, the cache is `dir/cache`.
  explicit CliRunner(const TempDir& dir) : CliRunner(dir.path(), dir.path() / "cache") {}
  CliRunner(std::filesystem::path dir, std::filesystem::path cache) : m_dir(std::move(dir)), m_cache(std::move(cache)) {}

  const std::filesystem::path& cache() const { return m_cache; }
  const std::filesystem::path& dir() const { return m_dir; }

  /// `opcache --cache-dir <cache> args...`
  ProcessResult run(const std::vector<std::string>& args, const ProcessOptions& options = hermetic()) const;

  /// `opcache --cache-dir <cache> --json args...`: REQUIREs `expected_exit`
  /// and JSON on stdout, which it returns parsed.
  nlohmann::json run_json(const std::vector<std::string>& args, int expected_exit = 0,
                          const ProcessOptions& options = hermetic()) const;

  /// Writes the descriptor of `kernel` under dir()/desc and returns its path.
  std::filesystem::path descriptor_file(const KernelTriple& kernel) const;

  /// Stores `kernel` in `scenario` (`put --json`, plus `extra` arguments)
  /// and returns the document.
  nlohmann::json put(const KernelTriple& kernel, const std::string& scenario = k_test_scenario,
                     std::vector<std::string> extra = {}, const ProcessOptions& options = hermetic()) const;

  /// The arguments joined with spaces, for messages.
  static std::string join(const std::vector<std::string>& args);

 private:
  std::filesystem::path m_dir;
  std::filesystem::path m_cache;
};

}  // namespace opcache::test
