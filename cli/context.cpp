#include "cli/context.hpp"

#include <cstdio>
#include <iostream>
#include <iterator>
#include <stdexcept>

#include "base/file_io.hpp"
#include "base/text.hpp"
#include "base/value_parse.hpp"

namespace opcache::cli {

int exit_code_for(const Error& error) { return static_cast<int>(error.code()); }

CLI::Validator integer_in(std::int64_t min, std::int64_t max) {
  const bool unbounded = max == std::numeric_limits<std::int64_t>::max();
  return CLI::Validator(
      [min, max](std::string& value) { return base::integer_refusal(value, min, max); },
      "INTEGER" + (unbounded ? ">=" + std::to_string(min) : " " + std::to_string(min) + ".." + std::to_string(max)));
}

namespace {

// A CLI11 check of one value against its row of the settings table.
CLI::Validator setting_check(const SettingDescriptor& row) {
  return CLI::Validator(
      [name = std::string(row.name)](std::string& value) -> std::string {
        StoreConfig scratch;
        auto status = scratch.set(name, value);
        return status ? std::string() : status.error().message();
      },
      "");
}

}  // namespace

NamedOptions::NamedOptions(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (argument == "--") {
      break;  // the rest is positional (exec's command line)
    }
    if (argument == "-h" || argument == "--help" || argument == "--help-all") {
      m_everything = true;
      return;
    }
    if (argument.substr(0, 2) == "--") {
      m_names.emplace(argument.substr(0, argument.find('=')));
    } else if (argument.size() > 2 && argument[0] == '-') {
      m_everything = true;  // "-Cdir" or "-vq": CLI11 reads names out of it
      return;
    } else if (argument.size() == 2 && argument[0] == '-') {
      m_names.emplace(argument);
    }
  }
}

NamedOptions NamedOptions::everything() {
  NamedOptions named;
  named.m_everything = true;
  return named;
}

bool NamedOptions::any_of(std::string_view names) const {
  if (m_everything) {
    return true;
  }
  for (auto name : base::split_on(names, ',')) {
    if (m_names.count(base::trim_space(name)) > 0) {
      return true;
    }
  }
  return false;
}

void GlobalOptions::add_to(CLI::App& app, const NamedOptions& named) {
  app.add_flag("--json", json, "Machine-readable output: one JSON document on stdout");
  for (const auto& row : setting_descriptors()) {
    if (!row.settable || row.flag.empty() || !named.any_of(row.flag)) {
      continue;
    }
    const std::string name(row.name);
    const std::string flag(row.flag);
    const std::string help(row.help);
    CLI::Option* option = nullptr;
    if (row.type == SettingType::flag) {
      app.add_flag_callback(flag, [&value = m_single[name]] { value = "true"; }, help);
      continue;
    }
    if (row.type == SettingType::repeated) {
      // One value per occurrence, so the positional arguments after it stay positional.
      option = app.add_option(flag, m_repeated[name], help)->allow_extra_args(false);
    } else {
      option = app.add_option(flag, m_single[name], help)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    option->type_name(row.type == SettingType::integer ? "INTEGER" : row.type == SettingType::path ? "PATH" : "TEXT")
        ->check(setting_check(row));
  }
}

StoreConfig GlobalOptions::store_config() const {
  StoreConfig config;
  auto apply = [&config](const std::string& name, const std::string& value) {
    // Checked while parsing; a failure here would be a bug in the table.
    if (auto status = config.set(name, value); !status) {
      throw std::logic_error(status.error().message());
    }
  };
  for (const auto& [name, value] : m_single) {
    if (value) {
      apply(name, *value);
    }
  }
  for (const auto& [name, values] : m_repeated) {
    for (const auto& value : values) {
      apply(name, value);
    }
  }
  return config;
}

Result<Store> Context::open_store() const { return Store::open(options.store_config()); }

void Context::note_bypass(const Store& store, const std::string& op_type) const {
  if (auto reason = store.bypass_reason(op_type)) {
    note("note: " + *reason + " — exec and get_or_build would not use the cache for " + op_type +
         "; this explicit command uses it anyway");
  }
}

void Context::print_json(const nlohmann::json& document) const {
  std::cout << document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

void Context::print_text(const std::string& text) const {
  if (!options.json) {
    std::cout << text << '\n';
  }
}

void Context::note(const std::string& message) const { std::cerr << "opcache: " << message << '\n'; }

int Context::fail(const Error& error) const {
  std::cerr << "opcache: error: " << error.message() << '\n';
  if (options.json) {
    print_json({{"ok", false}, {"error", error_code_name(error.code())}, {"message", error.message()}});
  }
  return exit_code_for(error);
}

void ScenarioOption::add_to(CLI::App& command, bool required) {
  auto* spec = command.add_option("--scenario,-s", m_spec,
                                  "Scenario as FIELD=VALUE pairs: device=single|multi (default from RANK_SIZE/"
                                  "LOCAL_WORLD_SIZE), phase=train|infer, toolchain=VERSION|auto, soc=CHIP|auto (both default "
                                  "to auto: detected from the CANN install and npu-smi), extra.KEY=VALUE; "
                                  "e.g. device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1");
  auto* file = command.add_option("--scenario-file", m_file,
                                  "Scenario as a JSON file: {\"device_mode\":…,\"phase\":…,\"toolchain\":…,\"soc\":…,"
                                  "\"extra\":{…}}");
  spec->excludes(file);
  if (required) {
    auto* group = command.add_option_group("scenario", "One of --scenario or --scenario-file is required");
    group->add_options(spec, file);
    group->require_option(1);
  }
}

Result<Scenario> ScenarioOption::resolve() const {
  if (!m_file.empty()) {
    auto text = base::read_file(m_file);
    if (!text) {
      // A missing input file is a usage error, never confused with a cache miss (exit 1).
      return Error::usage("--scenario-file: " + text.error().message());
    }
    return parse_scenario_json(*text, m_file);
  }
  if (m_spec.empty()) {
    return Error::usage("a scenario is required: pass --scenario FIELD=VALUE,… or --scenario-file FILE");
  }
  return parse_scenario_spec(m_spec);
}

Result<ExplainedScenario> ScenarioOption::explain() const {
  if (!m_file.empty()) {
    auto text = base::read_file(m_file);
    if (!text) {
      return Error::usage("--scenario-file: " + text.error().message());
    }
    const auto first = text->find_first_not_of(" \t\r\n");
    if (first == std::string::npos || (*text)[first] != '{') {
      return Error::usage(m_file + ": a scenario file must hold a JSON object");
    }
    return explain_scenario(*text, m_file);
  }
  if (m_spec.empty()) {
    return Error::usage("a scenario is required: pass --scenario FIELD=VALUE,… or --scenario-file FILE");
  }
  return explain_scenario(m_spec, "--scenario");
}

Result<std::string> read_descriptor_text(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  auto text = base::read_file(path);
  if (!text) {
    // A missing input file is a usage error, never confused with a cache miss (exit 1).
    return Error::usage("--desc: " + text.error().message());
  }
  return text;
}

std::string format_duration_ms(std::int64_t ms) {
  char buffer[64];
  if (ms < 1000) {
    std::snprintf(buffer, sizeof buffer, "%lld ms", static_cast<long long>(ms));
  } else if (ms < 120000) {
    std::snprintf(buffer, sizeof buffer, "%.1f s", ms / 1000.0);
  } else if (ms < 7200000) {
    std::snprintf(buffer, sizeof buffer, "%.1f min", ms / 60000.0);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f h", ms / 3600000.0);
  }
  return buffer;
}

std::string format_hit_rate(std::optional<double> rate) {
  if (!rate) {
    return "n/a";
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f %%", 100.0 * *rate);
  return buffer;
}

std::string format_row(const std::string& label, const std::string& value) {
  char line[64];
  std::snprintf(line, sizeof line, "%-22s ", label.c_str());
  return line + value;
}

std::string format_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buffer[32];
  if (unit == 0) {
    std::snprintf(buffer, sizeof buffer, "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f %s", value, units[unit]);
  }
  return buffer;
}

nlohmann::json entry_to_json(const Entry& entry) {
  return {{"key", entry.key},
          {"digest", entry.digest},
          {"op_type", entry.op_type},
          {"scenario", nlohmann::json::parse(entry.scenario, nullptr, false)},
          {"bundle_bytes", entry.bundle_size},
          {"raw_bytes", entry.raw_size},
          {"created_ms", entry.created_ms},
          {"last_access_ms", entry.last_access_ms},
          {"build_ms", entry.build_ms},
          {"hits", entry.hits},
          {"pinned", entry.pinned}};
}

}  // namespace opcache::cli
