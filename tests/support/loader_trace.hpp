// The CLI run with the dynamic loader's own trace (LD_DEBUG=files), which
// names every object it maps, at start-up or by dlopen(): how the tests see
// that a library loaded on demand (libcurl, SQLite) stays unmapped.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/process.hpp"

namespace opcache::test {

/// Runs `opcache args…` (hermetic environment) with the loader's trace
/// written under `trace_dir` (emptied first); returns the run and the trace
/// (every file the loader wrote, concatenated).
std::pair<ProcessResult, std::string> run_traced(const std::vector<std::string>& args,
                                                 const std::filesystem::path& trace_dir);

/// Whether `trace` shows an object whose file name contains `soname_prefix` mapped.
bool trace_maps(const std::string& trace, const std::string& soname_prefix);

}  // namespace opcache::test
