#include "store/settings.hpp"

#include "store/cache_root.hpp"
#include "base/file_io.hpp"
#include "base/ini.hpp"
#include "base/try.hpp"
#include "store/volatile_fields.hpp"

namespace opcache::store {

namespace {

constexpr const char* k_default = "default";

using base::IniSections;

// An INI file as section -> key -> value; std::nullopt when it does not exist.
Result<std::optional<IniSections>> read_ini(const std::filesystem::path& path) {
  auto text = base::read_file(path);
  if (!text) {
    if (text.error().code() == ErrorCode::not_found) {
      return std::optional<IniSections>();
    }
    return text.error();
  }
  OPCACHE_TRY_ASSIGN(auto sections, base::parse_ini_sections(*text, path.string()));
  return std::optional<IniSections>(std::move(sections));
}

// Resolves the rows of the settings table one source at a time: flag >
// environment > config file [cache] key > default, collecting warnings.
class Resolver {
 public:
  Resolver(const EnvLookup& env, const std::optional<IniSections>& config, std::string config_path,
           std::vector<std::string>& warnings)
      : m_env(env), m_config(config), m_config_path(std::move(config_path)), m_warnings(warnings) {}

  Result<Setting<std::string>> resolve(const SettingSpec& spec, const SettingOverrides& overrides) {
    if (auto flag = explicit_text(overrides, spec)) {
      const auto name = primary_flag(spec);
      if (auto problem = problem_of(spec, *flag); !problem.empty()) {
        const bool quoted = spec.info.type != SettingType::integer;
        return Error::usage(name + (quoted ? " \"" + *flag + "\"" : " " + *flag) + " is invalid: " + problem);
      }
      return Setting<std::string>{*flag, name};
    }
    if (auto value = from_env(spec)) {
      return *value;
    }
    if (auto text = config_text(spec.info.config_key)) {
      const std::string key(spec.info.config_key);
      if (accept(spec, *text, m_config_path + ": [cache] " + key)) {
        return Setting<std::string>{*text, m_config_path + " [cache] " + key};
      }
    }
    return Setting<std::string>{std::string(spec.info.default_value), k_default};
  }

  // The row's environment variable when it is set, non-empty and valid.
  std::optional<Setting<std::string>> from_env(const SettingSpec& spec) {
    const std::string name(spec.info.env);
    auto value = name.empty() ? std::nullopt : m_env(name.c_str());
    if (!value || value->empty() || !accept(spec, *value, "environment variable " + name)) {
      return std::nullopt;
    }
    return Setting<std::string>{*value, name};
  }

 private:
  static std::string problem_of(const SettingSpec& spec, const std::string& text) {
    return spec.check == nullptr ? std::string() : spec.check(text);
  }

  // True when `text` is valid; otherwise warns "<where>="<text>" is invalid (...); ignored".
  bool accept(const SettingSpec& spec, const std::string& text, const std::string& where) {
    auto problem = problem_of(spec, text);
    if (!problem.empty()) {
      m_warnings.push_back(where + "=\"" + text + "\" is invalid (" + problem + "); ignored");
    }
    return problem.empty();
  }

  std::optional<std::string> config_text(std::string_view key) const {
    if (!m_config || key.empty()) {
      return std::nullopt;
    }
    auto section = m_config->find("cache");
    if (section == m_config->end()) {
      return std::nullopt;
    }
    auto it = section->second.find(std::string(key));
    if (it == section->second.end()) {
      return std::nullopt;
    }
    return it->second;
  }

  const EnvLookup& m_env;
  const std::optional<IniSections>& m_config;
  std::string m_config_path;
  std::vector<std::string>& m_warnings;
};

bool is_config_key(const std::string& key) {
  for (const auto& spec : setting_specs()) {
    if (!spec.info.config_key.empty() && spec.info.config_key == key) {
      return true;
    }
  }
  return false;
}

void warn_unknown_config_keys(const IniSections& config, const std::string& path, std::vector<std::string>& warnings) {
  for (const auto& [section, values] : config) {
    if (section != "cache") {
      if (section.rfind("remote", 0) != 0 && section != "serve") {
        warnings.push_back(path + ": unknown section [" + section + "] ignored");
      }
      continue;
    }
    for (const auto& [key, value] : values) {
      if (!is_config_key(key)) {
        warnings.push_back(path + ": unknown key [cache] " + key + " ignored");
      }
    }
  }
}

// CANN's op_cache.ini: counts only when both values are present and valid.
bool aging_from_op_cache_ini(const std::filesystem::path& root, Settings& settings) {
  const auto path = root / "op_cache.ini";
  auto ini = read_ini(path);
  if (!ini) {
    settings.warnings.push_back(ini.error().message() + "; op_cache.ini ignored");
    return false;
  }
  if (!*ini) {
    return false;
  }
  auto section = (*ini)->find("op_compiler_cache");
  if (section == (*ini)->end()) {
    return false;
  }
  const auto& values = section->second;
  if (values.count("max_op_cache_size") == 0 && values.count("remain_cache_size_ratio") == 0) {
    return false;  // e.g. a CANN-generated file holding only version keys
  }
  const std::string where = path.string() + ": [op_compiler_cache] ";
  // The keys are the table's row names; their checks are the rows' checks.
  auto read_value = [&](const char* key) -> std::optional<std::int64_t> {
    auto it = values.find(key);
    if (it == values.end()) {
      settings.warnings.push_back(where + key + " is missing; the file counts only with both values, ignored");
      return std::nullopt;
    }
    if (auto problem = find_setting(key)->check(it->second); !problem.empty()) {
      settings.warnings.push_back(where + key + "=\"" + it->second + "\" is invalid (" + problem +
                                  "); the file is ignored");
      return std::nullopt;
    }
    return integer_of_checked(it->second);
  };
  const auto size = read_value("max_op_cache_size");
  const auto ratio = read_value("remain_cache_size_ratio");
  if (!size || !ratio) {
    return false;
  }
  settings.max_op_cache_size_mb = {*size, path.string()};
  settings.remain_cache_size_ratio = {*ratio, path.string()};
  return true;
}

// CANN's aging pair: op_cache.ini > ASCEND_* environment > default.
void resolve_aging_pair(const std::filesystem::path& root, Resolver& resolver, Settings& settings) {
  if (aging_from_op_cache_ini(root, settings)) {
    return;
  }
  auto from_env_or_default = [&resolver](const char* name) {
    const auto& spec = *find_setting(name);
    auto value = resolver.from_env(spec).value_or(
        Setting<std::string>{std::string(spec.info.default_value), k_default});
    return Setting<std::int64_t>{integer_of_checked(value.value), value.source};
  };
  settings.max_op_cache_size_mb = from_env_or_default("max_op_cache_size");
  settings.remain_cache_size_ratio = from_env_or_default("remain_cache_size_ratio");
}

// The config file: --config, else OPCACHE_CONFIG (both must exist), else
// <cache dir>/opcache.conf when present. Records it in settings.config_file.
Result<std::optional<IniSections>> load_config(const SettingOverrides& overrides, const EnvLookup& env,
                                                std::filesystem::path& path, Settings& settings) {
  std::string source;
  if (!overrides.config_file.empty()) {
    path = overrides.config_file;
    source = "--config";
  } else if (auto value = env("OPCACHE_CONFIG"); value && !value->empty()) {
    path = *value;
    source = "OPCACHE_CONFIG";
  } else {
    path = settings.cache_dir.value / "opcache.conf";
    source = k_default;
  }
  auto loaded = read_ini(path);
  if (!loaded) {
    return loaded.error().with_context("config file");
  }
  if (!*loaded && source != k_default) {
    return Error::usage("config file " + path.string() + " (from " + source + ") does not exist");
  }
  settings.config_file = {*loaded ? path.string() : std::string(), *loaded ? source : k_default};
  if (*loaded) {
    warn_unknown_config_keys(**loaded, path.string(), settings.warnings);
  }
  return loaded;
}

}  // namespace

const char* to_string(CacheMode mode) noexcept {
  switch (mode) {
    case CacheMode::enable: return "enable";
    case CacheMode::force: return "force";
    case CacheMode::disable: return "disable";
  }
  return "enable";
}

std::optional<CacheMode> parse_cache_mode(const std::string& text) {
  if (text == "enable") {
    return CacheMode::enable;
  }
  if (text == "force") {
    return CacheMode::force;
  }
  if (text == "disable") {
    return CacheMode::disable;
  }
  return std::nullopt;
}

AgingPolicy Settings::aging() const {
  AgingPolicy policy;
  policy.max_bytes = max_op_cache_size_mb.value < 0 ? -1 : max_op_cache_size_mb.value << 20;
  policy.remain_ratio = static_cast<int>(remain_cache_size_ratio.value);
  policy.min_idle_ms = min_idle_s.value * 1000;
  return policy;
}

std::optional<std::string> Settings::bypass_reason(const std::string& op_type) const {
  if (op_debug_level.value != 0) {
    return "op_debug_level=" + std::to_string(op_debug_level.value) + " (from " + op_debug_level.source + ")";
  }
  for (const auto& listed : op_debug_list.value) {
    if (listed == op_type) {
      return "op_debug_list contains " + op_type + " (from " + op_debug_list.source + ")";
    }
  }
  return std::nullopt;
}

std::vector<std::string> split_setting_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    auto first = item.find_first_not_of(" \t");
    auto last = item.find_last_not_of(" \t");
    if (first != std::string::npos) {
      items.push_back(item.substr(first, last - first + 1));
    }
    if (end == std::string::npos) {
      break;
    }
    start = end + 1;
  }
  return items;
}

Result<Settings> resolve_settings(const SettingOverrides& overrides, const EnvLookup& env) {
  Settings settings;
  std::optional<std::filesystem::path> cache_dir;
  if (!overrides.cache_dir.empty()) {
    cache_dir = overrides.cache_dir;
  }
  OPCACHE_TRY_ASSIGN(auto root, resolve_cache_root(cache_dir, env));
  settings.cache_dir = {root.path, root.source};

  std::filesystem::path config_path;
  OPCACHE_TRY_ASSIGN(auto config, load_config(overrides, env, config_path, settings));
  Resolver resolver(env, config, config_path.string(), settings.warnings);
  // In table order, so that warnings come in the order `opcache config` shows the settings.
  for (const auto& spec : setting_specs()) {
    if (spec.info.name == "max_op_cache_size") {
      resolve_aging_pair(root.path, resolver, settings);  // the CANN pair has its own precedence
    } else if (spec.resolved != nullptr) {
      OPCACHE_TRY_ASSIGN(auto value, resolver.resolve(spec, overrides));
      spec.resolved(settings, std::move(value));
    }
  }
  return settings;
}

}  // namespace opcache::store
