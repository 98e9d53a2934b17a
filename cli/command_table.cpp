#include "cli/command_table.hpp"

#include <algorithm>
#include <set>

namespace opcache::cli {

const std::vector<CommandFamily>& command_families() {
  static const std::vector<CommandFamily> families = {
      {{"key"}, register_key_command},
      {{"put"}, register_put_command},
      {{"get", "has"}, register_get_commands},
      {{"ls", "rm"}, register_list_commands},
      {{"stats", "verify"}, register_maintenance_commands},
      {{"gc", "pin", "unpin", "clear"}, register_aging_commands},
      {{"exec"}, register_exec_command},
      {{"explain"}, register_explain_command},
      {{"import", "export"}, register_layout_commands},
      {{"push", "pull"}, register_transfer_commands},
      {{"trust", "sign"}, register_trust_commands},
      {{"serve"}, register_serve_summary, "opcache-serve"},
      {{"scenario"}, register_scenario_command},
      {{"config"}, register_config_command},
      {{"version"}, register_version_command},
      {{"revoke", "unrevoke"}, register_revoke_commands},
  };
  return families;
}

namespace {

// "--cache-dir", "-C", … for every option of `app` that takes a value.
std::set<std::string> options_with_values(const CLI::App& app) {
  std::set<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_items_expected_min() == 0) {
      continue;  // a flag
    }
    for (const auto& name : option->get_lnames()) names.insert("--" + name);
    for (const auto& name : option->get_snames()) names.insert("-" + name);
  }
  return names;
}

}  // namespace

std::string find_command_word(const CLI::App& app, int argc, const char* const* argv) {
  const std::set<std::string> takes_value = options_with_values(app);
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (argument == "--") {
      return {};
    }
    if (argument.size() > 1 && argument[0] == '-') {
      const bool value_attached = argument.find('=') != std::string_view::npos;
      if (!value_attached && takes_value.count(std::string(argument)) > 0) {
        ++i;  // its value
      }
      continue;
    }
    return std::string(argument);
  }
  return {};
}

const CommandFamily* family_named(const std::vector<CommandFamily>& families, std::string_view word) {
  for (const auto& family : families) {
    if (std::find(family.names.begin(), family.names.end(), word) != family.names.end()) {
      return &family;
    }
  }
  return nullptr;
}

std::vector<Registrar> registrars_for(const std::vector<CommandFamily>& families, std::string_view word) {
  if (const CommandFamily* family = family_named(families, word)) {
    return {family->registrar};
  }
  std::vector<Registrar> registrars;
  for (const auto& family : families) {
    registrars.push_back(family.registrar);
  }
  return registrars;
}

}  // namespace opcache::cli
