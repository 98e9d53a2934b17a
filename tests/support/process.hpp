// Running real programs from tests: the CLI, the C compiler, helpers.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace opcache::test {

struct ProcessResult {
  int exit_code = -1;  ///< exit status, or 128 + signal number
  std::string out;     ///< standard output
  std::string err;     ///< standard error
};

struct ProcessOptions {
  std::map<std::string, std::string> env;  ///< added to (or replacing in) the environment
  std::vector<std::string> unset_env;      ///< removed from the environment
  std::string stdin_data;
  std::string cwd;
};

/// Runs argv[0] (searched in PATH) with arguments, waits, captures output.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

/// Runs the built `opcache` CLI (OPCACHE_CLI_PATH) with `args`.
ProcessResult run_cli(const std::vector<std::string>& args, const ProcessOptions& options = {});

/// Path of the built CLI.
std::string cli_path();

}  // namespace opcache::test
