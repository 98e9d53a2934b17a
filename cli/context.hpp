// Shared pieces of the `opcache` command: global options, output in text or
// JSON, exit codes, and the options several subcommands take.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "opcache/opcache.hpp"

namespace opcache::cli {

/// Stable exit codes (docs/cli.md). Values equal ErrorCode where both exist.
enum ExitCode : int {
  k_exit_ok = 0,
  k_exit_not_found = 1,
  k_exit_usage = 2,
  k_exit_integrity = 3,
  k_exit_remote = 4,
  k_exit_io = 5,
  k_exit_timeout = 6,
  k_exit_build_failed = 7,
  k_exit_internal = 8,
  k_exit_untrusted = 9,
};

/// The exit code for an error.
int exit_code_for(const Error& error);

/// The option names a command line uses before its `--`, so that only those
/// of the settings table's ~40 flags are registered with CLI11: registering
/// all of them cost an `opcache exec` hit 14 % of its instructions (an
/// Option, its checks and strings per flag), the same as computing its key.
/// Every name counts as used when help is asked for (it lists them all) or
/// when a word could hide one (a short option with its value attached, `-Cdir`).
class NamedOptions {
 public:
  /// The names in argv[1..argc) before the first "--"; "--name=value" counts as "--name".
  NamedOptions(int argc, const char* const* argv);
  /// Every name counts as used.
  static NamedOptions everything();

  /// Whether any name of a CLI11 name list ("--cache-dir,-C") is used.
  bool any_of(std::string_view names) const;

 private:
  NamedOptions() = default;
  bool m_everything = false;
  std::set<std::string, std::less<>> m_names;
};

/// Options given before or after any subcommand: one per settable row of
/// the settings table (opcache::setting_descriptors()), and --json.
class GlobalOptions {
 public:
  bool json = false;

  /// Adds the options `named` uses to the top-level command: each row's
  /// flag, checked while parsing. A repeatable option takes exactly one value
  /// per occurrence, so positional arguments after it stay positional.
  void add_to(CLI::App& app, const NamedOptions& named = NamedOptions::everything());

  /// A StoreConfig holding every setting given on the command line.
  StoreConfig store_config() const;

 private:
  // Setting name → the value given (the last one wins), or every value of a
  // repeatable setting in command-line order. Map nodes keep the addresses CLI11 writes to.
  std::map<std::string, std::optional<std::string>> m_single;
  std::map<std::string, std::vector<std::string>> m_repeated;
};

/// State shared by all subcommands of one invocation.
class Context {
 public:
  GlobalOptions options;

  /// Opens the store named by the global options.
  Result<Store> open_store() const;

  /// Prints `document` as one line of JSON on stdout.
  void print_json(const nlohmann::json& document) const;
  /// Prints text on stdout (nothing in --json mode).
  void print_text(const std::string& text) const;
  /// Prints "opcache: <message>" on stderr (also in --json mode).
  void note(const std::string& message) const;

  /// For explicit put/get: tells the user when the transparent paths would
  /// have bypassed the cache for this op type (the command still proceeds).
  void note_bypass(const Store& store, const std::string& op_type) const;

  /// Reports `error` (stderr line, and a JSON object in --json mode) and
  /// returns its exit code.
  int fail(const Error& error) const;
};

/// --scenario SPEC | --scenario-file FILE, resolved to a Scenario.
class ScenarioOption {
 public:
  /// Adds both options to `command`; `required` makes one of them mandatory.
  void add_to(CLI::App& command, bool required);
  bool given() const { return !m_spec.empty() || !m_file.empty(); }
  Result<Scenario> resolve() const;
  /// resolve() that also reports where every input came from (`opcache scenario --explain`).
  Result<ExplainedScenario> explain() const;

 private:
  std::string m_spec;
  std::string m_file;
};

/// The CLI11 check of an integer option: a decimal from `min` to `max` as
/// base::parse_integer reads it, refused as `--NAME: "VALUE" must be an
/// integer from MIN to MAX` (exit 2). Its help shows the range
/// ("INTEGER 1..256", "INTEGER>=0").
CLI::Validator integer_in(std::int64_t min, std::int64_t max = std::numeric_limits<std::int64_t>::max());

/// Reads a descriptor file ("-" for standard input) as text. A missing file
/// is a usage error (exit 2), not "not found" (exit 1 means a cache miss).
Result<std::string> read_descriptor_text(const std::string& path);

/// "1.5 KiB", "12.0 MiB", "17 B".
std::string format_bytes(std::int64_t bytes);

/// "850 ms", "1.5 s", "2.5 min", "3.1 h".
std::string format_duration_ms(std::int64_t ms);

/// A hit rate (0..1) as "75.0 %", or "n/a" when there were no lookups.
std::string format_hit_rate(std::optional<double> rate);

/// One line of `opcache stats`: the label padded to 22 columns, then the value.
std::string format_row(const std::string& label, const std::string& value);

/// JSON of an index entry, for --json output.
nlohmann::json entry_to_json(const Entry& entry);

/// A subcommand: its CLI11 node and what runs when it was given.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

/// Registers one family of subcommands on `app` and returns them: one
/// function per family, one cmd_*.cpp each (command_table.cpp says which
/// names each registers).
using RegisterCommands = std::vector<Command>(CLI::App& app, Context& context);

RegisterCommands register_key_command;
RegisterCommands register_put_command;
RegisterCommands register_get_commands;
RegisterCommands register_list_commands;
RegisterCommands register_maintenance_commands;
RegisterCommands register_version_command;
RegisterCommands register_config_command;
RegisterCommands register_aging_commands;
RegisterCommands register_exec_command;
/// `serve` itself, with every server setting: registered by opcache-serve only
/// (cli/serve_main.cpp; it links the server).
RegisterCommands register_serve_command;
/// What `serve` does, in both programs' --help.
inline constexpr const char* k_serve_summary = "Run the team cache server (HTTP API v1, docs/protocol.md)";
/// `serve` in `opcache --help`: the command opcache-serve runs.
RegisterCommands register_serve_summary;
RegisterCommands register_layout_commands;
RegisterCommands register_transfer_commands;
RegisterCommands register_trust_commands;
RegisterCommands register_explain_command;
RegisterCommands register_scenario_command;
RegisterCommands register_revoke_commands;

}  // namespace opcache::cli
