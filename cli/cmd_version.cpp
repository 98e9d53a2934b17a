// opcache version: what this build is and which formats it speaks.
#include "cli/context.hpp"
#include "opcache/formats.hpp"

namespace opcache::cli {

std::vector<Command> register_version_command(CLI::App& app, Context& context) {
  auto* command = app.add_subcommand("version", "Print the version and the format versions it reads and writes");
  return {{command, [&context] {
             const std::string key_version = key_derivation_version();
             if (context.options.json) {
               context.print_json({{"version", k_version_string},
                                   {"key_derivation", key_version},
                                   {"bundle_format", bundle_format_version()},
                                   {"index_schema", index_schema_version()}});
             } else {
               context.print_text(std::string("opcache ") + k_version_string + " (key " + key_version +
                                  ", bundle format " + std::to_string(bundle_format_version()) +
                                  ", index schema " + std::to_string(index_schema_version()) + ")");
             }
             return static_cast<int>(k_exit_ok);
           }}};
}

}  // namespace opcache::cli
