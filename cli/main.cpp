// The `opcache` command line: parses arguments with CLI11 and dispatches to
// one subcommand. Exit codes are documented in docs/cli.md.
#include <exception>
#include <iostream>

#include "cli/command_table.hpp"
#include "cli/context.hpp"

namespace {

using opcache::cli::Command;

int run(int argc, char** argv) {
  opcache::cli::Context context;
  CLI::App app{"opcache — a compile cache for accelerator operator kernels", "opcache"};
  // At most one; none is reported below, so that an unknown word is named
  // ("frobnicate was not expected") instead of "a subcommand is required".
  app.require_subcommand(0, 1);
  app.fallthrough();
  app.footer(
      "Exit status: 0 ok, 1 not found, 2 usage or configuration error, 3 integrity failure,\n"
      "4 remote failure, 5 local I/O error, 6 timeout, 8 internal error.\n"
      "Run `opcache COMMAND --help` for the options of a command.");
  context.options.add_to(app);

  std::vector<Command> commands;
  const std::string word = opcache::cli::find_command_word(app, argc, argv);
  for (auto registrar : opcache::cli::registrars_for(word)) {
    auto added = registrar(app, context);
    commands.insert(commands.end(), added.begin(), added.end());
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return context.fail(opcache::Error::usage(std::string(e.what()) + " (run `opcache --help` or `opcache COMMAND --help`)"));
  }
  for (const auto& command : commands) {
    if (command.app->parsed()) {
      return command.run();
    }
  }
  return context.fail(opcache::Error::usage("a command is required (run `opcache --help` to list them)"));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "opcache: internal error: " << e.what() << '\n';
    return opcache::cli::k_exit_internal;
  }
}
