// The settings that decide what `opcache exec` keys on besides the
// descriptor and scenario: compiler_check (how the compiler is identified)
// and exec_env (which environment variables count). Their grammar and the
// built-in list; the table rows are in setting_table.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "opcache/opcache.hpp"

namespace opcache::store {

/// Parses compiler_check: "content", "mtime", "none", "string:TEXT" or
/// "command:CMD" (TEXT and CMD non-empty). `usage` error saying what is
/// expected otherwise.
Result<CompilerCheck> parse_compiler_check(std::string_view text);

/// The text form parse_compiler_check() reads back.
std::string to_string(const CompilerCheck& check);

/// The variables exec keys on when exec_env is unset: those that change what
/// gcc, clang, nvcc or CANN's op compiler does (docs/formats.md).
const std::vector<std::string>& default_exec_environment();

/// Parses exec_env: "" is the built-in list, "none" is empty, "+A,B" adds to
/// the built-in list, "A,B" replaces it. Names are [A-Za-z_][A-Za-z0-9_]*;
/// `usage` error naming the first bad one. Sorted, without duplicates.
Result<std::vector<std::string>> parse_exec_environment(std::string_view text);

}  // namespace opcache::store
