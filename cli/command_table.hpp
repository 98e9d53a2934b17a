// Which function registers which command. A process registers only the
// family of the command it runs (CLI11 builds every option of every command
// it is told about: 22 % of an `opcache exec` hit's instructions when all
// twenty commands were registered); help, errors and a missing command get
// every family.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/context.hpp"

namespace opcache::cli {

/// Registers one family of commands on `app` (cmd_*.cpp; context.hpp).
using Registrar = RegisterCommands*;

/// One cmd_*.cpp: the command names its registrar adds, and the registrar.
struct CommandFamily {
  std::vector<std::string_view> names;
  Registrar registrar;
  /// When set, the program beside this one that runs these commands
  /// (cli/sibling_program.hpp); `registrar` then only lists them for --help.
  const char* program = nullptr;
};

/// Every family of `opcache`, in the order `opcache --help` lists them.
/// `serve` is run by the opcache-serve program.
const std::vector<CommandFamily>& command_families();

/// The family of `families` that names `word`, or null.
const CommandFamily* family_named(const std::vector<CommandFamily>& families, std::string_view word);

/// The command word of `argv`: the first argument that is not an option nor
/// the value of one of `app`'s options that take a value (`--cache-dir DIR`);
/// empty when there is none or `--` comes first. `app` holds only the global
/// options at this point.
std::string find_command_word(const CLI::App& app, int argc, const char* const* argv);

/// The families to register for `word`: the one that names it, or all of
/// them when none does (so that CLI11 reports unknown words and prints the
/// full help).
std::vector<Registrar> registrars_for(const std::vector<CommandFamily>& families, std::string_view word);

}  // namespace opcache::cli
