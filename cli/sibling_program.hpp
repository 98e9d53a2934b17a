// Running a program installed beside this one: `opcache serve` becomes
// opcache-serve. Beside means in the directory of /proc/self/exe (build/
// in a build tree, /usr/bin in the package), so a build tree and an
// installed copy never run each other's server, and the current directory
// is never searched.
#pragma once

#include <filesystem>

#include "opcache/result.hpp"

namespace opcache::cli {

/// The path of `program` beside the running executable; an I/O error when
/// /proc/self/exe cannot be read (no /proc), never a guess.
Result<std::filesystem::path> sibling_program_path(const char* program);

/// Replaces this process with `program` (found beside it), given
/// argv[1..argc) unchanged and its path as argv[0]: same PID, same standard
/// streams, same environment. Returns only on failure, with the reason: a
/// usage error naming the missing path and how to build or install it, or
/// an I/O error.
Error run_sibling_program(const char* program, int argc, char** argv);

}  // namespace opcache::cli
