// `opcache-serve`: the team cache server, the program `opcache serve` runs
// (with the same arguments). A program of its own so that the command-line
// tool does not carry Boost.Beast and the server: building it is most of the
// build's time, and the demo and a compiler wrapper need none of it.
#include "cli/context.hpp"
#include "cli/program.hpp"

int main(int argc, char** argv) {
  static const std::vector<opcache::cli::CommandFamily> families = {
      {{"serve"}, opcache::cli::register_serve_command, nullptr},
  };
  return opcache::cli::program_main(argc, argv, families);
}
