// The body of both programs built from cli/: `opcache` (every command) and
// `opcache-serve` (the team server, `opcache serve`). Parses the command
// line with CLI11 and runs the one command it names. Exit codes are
// documented in docs/cli.md.
#pragma once

#include <vector>

#include "cli/command_table.hpp"

namespace opcache::cli {

/// Runs the command `argv` (argc arguments, program name first) names among
/// `families`. A family that names a
/// program (CommandFamily::program) is not run here: this process becomes
/// that program, with the same arguments. Never throws; an exception that
/// escapes a command is reported as an internal error (exit 8).
int program_main(int argc, char** argv, const std::vector<CommandFamily>& families);

}  // namespace opcache::cli
