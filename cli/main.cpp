// `opcache`: every command of docs/cli.md. `opcache serve` hands its command
// line to the team server program, opcache-serve (cli/serve_main.cpp).
#include "cli/command_table.hpp"
#include "cli/program.hpp"

int main(int argc, char** argv) {
  return opcache::cli::program_main(argc, argv, opcache::cli::command_families());
}
