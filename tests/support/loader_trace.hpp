// The CLI run with the dynamic loader's own trace (LD_DEBUG=files), which
// names every object it maps, at start-up or by dlopen(): how the tests see
// that a library loaded on demand (libcurl, SQLite) stays unmapped.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"

namespace opcache::test {

/// Runs `opcache args…` (hermetic environment) with the loader's trace
/// written under `trace_dir` (emptied first); returns the run and the trace
/// (every file the loader wrote, concatenated).
std::pair<ProcessResult, std::string> run_traced(const std::vector<std::string>& args,
                                                 const std::filesystem::path& trace_dir);

/// A kernel stored in `dir`/cache by `opcache put`, run under the loader's trace.
struct TracedPut {
  KernelTriple kernel;
  std::vector<std::string> cache;  // "--cache-dir", `dir`/cache: for the next commands
  ProcessResult result;
  std::string trace;
  std::string key;  // empty when the put failed
};

/// Makes a kernel in `dir`/kernel and stores it with `opcache put` under the
/// loader's trace (written under `dir`/trace).
TracedPut put_kernel_traced(const std::filesystem::path& dir);

/// Whether `trace` shows an object whose file name contains `soname_prefix` mapped.
bool trace_maps(const std::string& trace, const std::string& soname_prefix);

}  // namespace opcache::test
