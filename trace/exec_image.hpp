// What the kernel itself opens to run a program, which no system call of the
// tracee names: the interpreter of a "#!" script and the program interpreter
// (the dynamic loader) of a dynamically linked ELF executable.
#pragma once

#include <optional>
#include <string>

namespace opcache::trace {

/// How many interpreters deep the kernel follows (a script whose interpreter
/// is itself a script...) before it refuses with ELOOP.
inline constexpr int k_max_interpreter_depth = 5;

/// The interpreter the kernel loads to run `program` (a path this process
/// can open): the path after "#!" of a script, or the PT_INTERP of a 64-bit
/// ELF executable, as written there (it may be relative: to the working
/// directory of the process that runs it). std::nullopt when there is none
/// (a statically linked program) or `program` cannot be read.
std::optional<std::string> program_interpreter(const std::string& program);

}  // namespace opcache::trace
