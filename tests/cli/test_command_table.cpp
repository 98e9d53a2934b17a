// The CLI registers only the family of the command it runs
// (cli/command_table.hpp): every command must still be found by its name,
// values of global options must not be taken for the command, and help and
// unknown words must still see every command.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/support/cli_runner.hpp"
#include "tests/support/process.hpp"

using opcache::test::hermetic;
using opcache::test::run_cli;

namespace {

const std::vector<std::string> k_commands = {"key",  "put",   "get",   "has",    "ls",     "rm",   "stats",
                                             "verify", "gc",  "pin",   "unpin",  "clear",  "exec", "import",
                                             "export", "push", "pull", "serve",  "scenario", "config", "version", "revoke", "unrevoke"};

}  // namespace

TEST_CASE("cli::command table: every command is found by its name, and the full help lists them all") {
  for (const auto& command : k_commands) {
    CAPTURE(command);
    auto help = run_cli({command, "--help"}, hermetic());
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("opcache " + command) != std::string::npos);
  }
  auto all = run_cli({"--help"}, hermetic());
  CHECK(all.exit_code == 0);
  for (const auto& command : k_commands) {
    CAPTURE(command);
    CHECK(all.out.find("\n  " + command + " ") != std::string::npos);
  }
}

TEST_CASE("cli::command table: a global option's value is not the command, -- ends the search, unknown words fail") {
  // "exec" is the cache directory here, "version" the command.
  auto version = run_cli({"--cache-dir", "exec", "--json", "version"}, hermetic());
  CHECK(version.exit_code == 0);
  CHECK(version.out.find("\"version\"") != std::string::npos);
  auto attached = run_cli({"--cache-dir=get", "version"}, hermetic());
  CHECK(attached.exit_code == 0);

  auto unknown = run_cli({"frobnicate"}, hermetic());
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("frobnicate") != std::string::npos);
  auto none = run_cli({"--json"}, hermetic());
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("a command is required") != std::string::npos);
}
