// `opcache-serve`: the team cache server, the program `opcache serve` runs
// (with the same arguments). A program of its own so that the command-line
// tool does not carry Boost.Beast and the server: building it is most of the
// build's time, and the demo and a compiler wrapper need none of it.
// Run directly, the word `serve` may be left out: `opcache-serve --listen
// :8080 --storage DIR` is `opcache serve --listen :8080 --storage DIR`.
#include <algorithm>
#include <string_view>
#include <vector>

#include "cli/context.hpp"
#include "cli/program.hpp"

int main(int argc, char** argv) {
  static const std::vector<opcache::cli::CommandFamily> families = {
      {{"serve"}, opcache::cli::register_serve_command, nullptr},
  };
  std::vector<char*> arguments(argv, argv + argc);
  // An argument `serve` is taken for the word (also as an option's value:
  // `--token-name serve` then needs the word written out).
  const bool named = std::any_of(arguments.begin() + (argc > 0 ? 1 : 0), arguments.end(),
                                 [](const char* argument) { return std::string_view(argument) == "serve"; });
  if (!named && argc > 0) {
    static char serve_word[] = "serve";
    arguments.insert(arguments.begin() + 1, serve_word);
  }
  arguments.push_back(nullptr);
  return opcache::cli::program_main(static_cast<int>(arguments.size()) - 1, arguments.data(), families);
}
