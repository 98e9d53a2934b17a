// `serve` as `opcache` lists it: `opcache serve …` runs the opcache-serve
// program with the same arguments (cli/program.cpp), which has the command
// itself (cli/cmd_serve.cpp) and prints its options for `opcache serve --help`.
#include "cli/context.hpp"

namespace opcache::cli {

std::vector<Command> register_serve_summary(CLI::App& app, Context& /*context*/) {
  app.add_subcommand("serve", k_serve_summary)->allow_extras();
  return {};  // never parsed here: program_main hands the command line to opcache-serve first
}

}  // namespace opcache::cli
