// refcc — the system C compiler: finding it, naming its version (part of the
// cache key) and compiling generated C into a relocatable object.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "opcache/result.hpp"

namespace opcache::refcc {

/// The C compiler refcc runs.
struct Compiler {
  std::vector<std::string> command;  ///< e.g. {"cc"} or {"ccache", "gcc"}
  std::string identity;              ///< first line of `<command> --version`
};

/// The flags every kernel is compiled with (after the command). Fixed: they
/// are covered by the codegen version in the toolchain string.
const std::vector<std::string>& compile_flags();

/// Finds the compiler: `command` if non-empty, else $CC, else "cc" (split at
/// spaces), and runs it with --version. `build_failed` when it cannot run.
/// Thread-safe.
Result<Compiler> detect_compiler(const std::string& command);

/// Compiles `source` into the object file `object` (its directory must
/// exist). The source is written as `<name>.c` into a private temporary
/// directory and compiled from there by relative name, so the object bytes do
/// not depend on where or by which process it was built. A compiler failure is
/// `build_failed` with the compiler's standard error. Thread-safe.
Status compile_c(const Compiler& compiler, const std::string& source, const std::string& name,
                 const std::filesystem::path& object);

}  // namespace opcache::refcc
