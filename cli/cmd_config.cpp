// opcache config: every effective setting and where it came from.
#include "cli/context.hpp"

namespace opcache::cli {

std::vector<Command> register_config_command(CLI::App& app, Context& context) {
  auto* command = app.add_subcommand("config", "Print every effective setting and where it came from");
  command->footer(
      "Sources, highest first: command-line flag, environment variable, config file ([cache] section of\n"
      "opcache.conf), default. Aging size and ratio follow CANN: <cache dir>/op_cache.ini, then\n"
      "ASCEND_MAX_OP_CACHE_SIZE / ASCEND_REMAIN_CACHE_SIZE_RATIO, then 500 MB / 50 %.\n"
      "See docs/configuration.md.");
  return {{command, [&context] {
             auto store = context.open_store();
             if (!store) {
               return context.fail(store.error());
             }
             auto settings = store->settings();
             if (context.options.json) {
               nlohmann::json document = nlohmann::json::object();
               for (const auto& setting : settings) {
                 document[setting.name] = {{"value", setting.value}, {"source", setting.source}};
               }
               document["remotes"] = store->remote_names();
               context.print_json(document);
               return static_cast<int>(k_exit_ok);
             }
             for (const auto& remote : store->remote_names()) {
               settings.push_back({"remote", remote, ""});
             }
             for (const auto& setting : settings) {
               char line[1024];
               std::snprintf(line, sizeof line, "%-24s %-32s (%s)", setting.name.c_str(), setting.value.c_str(),
                             setting.source.c_str());
               context.print_text(line);
             }
             return static_cast<int>(k_exit_ok);
           }}};
}

}  // namespace opcache::cli
