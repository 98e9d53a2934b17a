// Running a program and capturing its output (refcc runs the C compiler,
// the benchmarks compile their kernel corpus).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "opcache/result.hpp"

namespace opcache::base {

/// What a finished program left behind.
struct ProcessOutput {
  int exit_code = -1;  ///< exit status, or 128 + signal number
  std::string out;     ///< standard output (at most k_max_captured bytes)
  std::string err;     ///< standard error (at most k_max_captured bytes)
};

/// Output beyond this many bytes per stream is read and discarded.
inline constexpr std::size_t k_max_captured = 256 * 1024;

/// Runs argv[0] (searched in PATH) with posix_spawn in `cwd` (empty: the
/// current directory), stdin from /dev/null, and waits for it. An error only
/// when the program cannot be started (`build_failed`, naming it); a non-zero
/// exit is reported in the result. Thread-safe (no shared state; the child
/// inherits this process's environment).
Result<ProcessOutput> run_program(const std::vector<std::string>& argv, const std::filesystem::path& cwd = {});

}  // namespace opcache::base
