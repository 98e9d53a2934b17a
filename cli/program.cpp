// program_main: the global options, the command table, CLI11's parse and
// the hand-over of `serve` to opcache-serve (cli/program.hpp).
#include "cli/program.hpp"

#include <algorithm>
#include <exception>
#include <iostream>
#include <string_view>

#include "cli/context.hpp"
#include "cli/sibling_program.hpp"

namespace opcache::cli {

namespace {

int run(int argc, char** argv, const std::vector<CommandFamily>& families) {
  Context context;
  CLI::App app{"opcache — a compile cache for accelerator operator kernels", "opcache"};
  // At most one; none is reported below, so that an unknown word is named
  // ("frobnicate was not expected") instead of "a subcommand is required".
  app.require_subcommand(0, 1);
  app.fallthrough();
  app.footer(
      "Exit status: 0 ok, 1 not found, 2 usage or configuration error, 3 integrity failure,\n"
      "4 remote failure, 5 local I/O error, 6 timeout, 8 internal error.\n"
      "Run `opcache COMMAND --help` for the options of a command.");
  context.options.add_to(app, NamedOptions(argc, argv));

  const std::string word = find_command_word(app, argc, argv);
  if (const CommandFamily* family = family_named(families, word); family != nullptr && family->program != nullptr) {
    // Returns only when the program could not be started. Nothing is parsed
    // here, so --json is looked for as the program would find it.
    context.options.json = std::any_of(argv + 1, argv + argc, [](const char* argument) {
      return std::string_view(argument) == "--json";
    });
    return context.fail(run_sibling_program(family->program, argc, argv));
  }
  std::vector<Command> commands;
  for (auto registrar : registrars_for(families, word)) {
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
    return context.fail(Error::usage(std::string(e.what()) + " (run `opcache --help` or `opcache COMMAND --help`)"));
  }
  for (const auto& command : commands) {
    if (command.app->parsed()) {
      return command.run();
    }
  }
  return context.fail(Error::usage("a command is required (run `opcache --help` to list them)"));
}

}  // namespace

int program_main(int argc, char** argv, const std::vector<CommandFamily>& families) {
  try {
    return run(argc, argv, families);
  } catch (const std::exception& e) {
    std::cerr << "opcache: internal error: " << e.what() << '\n';
    return k_exit_internal;
  }
}

}  // namespace opcache::cli
