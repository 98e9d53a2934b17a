// opcache version: what this build is and which formats it speaks.
#include "cli/context.hpp"
#include "store/index.hpp"
#include "store/key.hpp"
#include "store/manifest.hpp"

namespace opcache::cli {

std::vector<Command> register_version_command(CLI::App& app, Context& context) {
  auto* command = app.add_subcommand("version", "Print the version and the format versions it reads and writes");
  return {{command, [&context] {
             std::string key_version(store::k_key_prefix.substr(0, store::k_key_prefix.size() - 1));
             if (context.options.json) {
               context.print_json({{"version", k_version_string},
                                   {"key_derivation", key_version},
                                   {"bundle_format", store::k_bundle_format_version},
                                   {"index_schema", store::k_index_schema_version}});
             } else {
               context.print_text(std::string("opcache ") + k_version_string + " (key " + key_version +
                                  ", bundle format " + std::to_string(store::k_bundle_format_version) +
                                  ", index schema " + std::to_string(store::k_index_schema_version) + ")");
             }
             return static_cast<int>(k_exit_ok);
           }}};
}

}  // namespace opcache::cli
