#include "store/settings.hpp"

#include <ini.h>

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>

#include "store/cache_root.hpp"
#include "base/file_io.hpp"
#include "base/try.hpp"
#include "store/volatile_fields.hpp"

namespace opcache::store {

namespace {

constexpr const char* k_default = "default";
constexpr std::int64_t k_default_max_mb = 500;
constexpr std::int64_t k_default_ratio = 50;
constexpr std::int64_t k_default_min_idle_s = 1800;
constexpr std::int64_t k_default_wait_timeout_s = 3600;

// An INI file as section -> key -> value.
using IniValues = std::map<std::string, std::map<std::string, std::string>>;

std::optional<std::int64_t> parse_integer(const std::string& text) {
  if (text.empty()) {
    return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) {
    return std::nullopt;
  }
  return value;
}

Result<std::optional<IniValues>> read_ini(const std::filesystem::path& path) {
  auto text = base::read_file(path);
  if (!text) {
    if (text.error().code() == ErrorCode::not_found) {
      return std::optional<IniValues>();
    }
    return text.error();
  }
  IniValues values;
  auto handler = [](void* user, const char* section, const char* name, const char* value) -> int {
    (*static_cast<IniValues*>(user))[section][name] = value;
    return 1;
  };
  int line = ini_parse_string(text->c_str(), handler, &values);
  if (line != 0) {
    return Error::usage(path.string() + ": line " + std::to_string(line) + " is not INI syntax (key = value)");
  }
  return std::optional<IniValues>(std::move(values));
}

// Validation of one integer setting: range and meaning, for messages.
struct IntegerRule {
  std::int64_t min;
  std::int64_t max;
  std::optional<std::int64_t> extra_allowed;  // an out-of-range value that is still valid (-1 = "disabled")
  const char* expectation;
};

bool satisfies(const IntegerRule& rule, std::int64_t value) {
  return (value >= rule.min && value <= rule.max) || value == rule.extra_allowed;
}

const IntegerRule k_max_size_rule{1, 1ll << 40, -1, "a size in MB (1 or more), or -1 to disable aging"};
const IntegerRule k_ratio_rule{1, 100, std::nullopt, "an integer from 1 to 100"};
const IntegerRule k_seconds_rule{0, 1ll << 40, std::nullopt, "a number of seconds (0 or more)"};
const IntegerRule k_debug_level_rule{0, 1000, std::nullopt, "an integer, 0 to use the cache"};

// Resolves settings one source at a time, collecting warnings.
class Resolver {
 public:
  Resolver(const EnvLookup& env, const std::optional<IniValues>& config, std::string config_path,
           std::vector<std::string>& warnings)
      : m_env(env), m_config(config), m_config_path(std::move(config_path)), m_warnings(warnings) {}

  // flag > env > config [cache] key > default.
  Result<Setting<std::int64_t>> integer(const std::optional<std::int64_t>& flag, const char* flag_name,
                                        const char* env_name, const char* config_key, std::int64_t fallback,
                                        const IntegerRule& rule) {
    if (flag) {
      if (!satisfies(rule, *flag)) {
        return Error::usage(std::string(flag_name) + " " + std::to_string(*flag) + " is invalid: expected " +
                            rule.expectation);
      }
      return Setting<std::int64_t>{*flag, flag_name};
    }
    if (auto value = from_env(env_name, rule)) {
      return *value;
    }
    if (auto value = from_config(config_key, rule)) {
      return *value;
    }
    return Setting<std::int64_t>{fallback, k_default};
  }

  std::optional<Setting<std::int64_t>> from_env(const char* name, const IntegerRule& rule) {
    auto text = m_env(name);
    if (!text || text->empty()) {
      return std::nullopt;
    }
    auto value = parse_integer(*text);
    if (!value || !satisfies(rule, *value)) {
      m_warnings.push_back("environment variable " + std::string(name) + "=\"" + *text + "\" is invalid (expected " +
                           rule.expectation + "); ignored");
      return std::nullopt;
    }
    return Setting<std::int64_t>{*value, name};
  }

  std::optional<Setting<std::int64_t>> from_config(const char* key, const IntegerRule& rule) {
    auto text = config_text(key);
    if (!text) {
      return std::nullopt;
    }
    auto value = parse_integer(*text);
    if (!value || !satisfies(rule, *value)) {
      m_warnings.push_back(m_config_path + ": [cache] " + key + "=\"" + *text + "\" is invalid (expected " +
                           rule.expectation + "); ignored");
      return std::nullopt;
    }
    return Setting<std::int64_t>{*value, config_source(key)};
  }

  // flag > env > config > default for free text; `validate` returns an error text or "".
  Result<Setting<std::string>> text(const std::optional<std::string>& flag, const char* flag_name,
                                    const char* env_name, const char* config_key, const std::string& fallback,
                                    const std::function<std::string(const std::string&)>& validate) {
    if (flag) {
      if (auto problem = validate(*flag); !problem.empty()) {
        return Error::usage(std::string(flag_name) + " \"" + *flag + "\" is invalid: " + problem);
      }
      return Setting<std::string>{*flag, flag_name};
    }
    if (auto value = m_env(env_name); value && !value->empty()) {
      if (auto problem = validate(*value); problem.empty()) {
        return Setting<std::string>{*value, env_name};
      } else {
        m_warnings.push_back("environment variable " + std::string(env_name) + "=\"" + *value + "\" is invalid (" +
                             problem + "); ignored");
      }
    }
    if (auto value = config_text(config_key)) {
      if (auto problem = validate(*value); problem.empty()) {
        return Setting<std::string>{*value, config_source(config_key)};
      } else {
        m_warnings.push_back(m_config_path + ": [cache] " + config_key + "=\"" + *value + "\" is invalid (" +
                             problem + "); ignored");
      }
    }
    return Setting<std::string>{fallback, k_default};
  }

 private:
  std::optional<std::string> config_text(const char* key) const {
    if (!m_config) {
      return std::nullopt;
    }
    auto section = m_config->find("cache");
    if (section == m_config->end()) {
      return std::nullopt;
    }
    auto it = section->second.find(key);
    if (it == section->second.end()) {
      return std::nullopt;
    }
    return it->second;
  }

  std::string config_source(const char* key) const { return m_config_path + " [cache] " + key; }

  const EnvLookup& m_env;
  const std::optional<IniValues>& m_config;
  std::string m_config_path;
  std::vector<std::string>& m_warnings;
};

const char* const k_known_config_keys[] = {"mode", "min_idle", "op_debug_level", "op_debug_list", "volatile_fields",
                                           "wait_timeout"};

void warn_unknown_config_keys(const IniValues& config, const std::string& path, std::vector<std::string>& warnings) {
  for (const auto& [section, values] : config) {
    if (section != "cache") {
      if (section.rfind("remote", 0) != 0 && section != "serve") {
        warnings.push_back(path + ": unknown section [" + section + "] ignored");
      }
      continue;
    }
    for (const auto& [key, value] : values) {
      bool known = false;
      for (const char* name : k_known_config_keys) {
        known = known || key == name;
      }
      if (!known) {
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
  auto read_value = [&](const char* key, const IntegerRule& rule) -> std::optional<std::int64_t> {
    auto it = values.find(key);
    if (it == values.end()) {
      settings.warnings.push_back(where + key + " is missing; the file counts only with both values, ignored");
      return std::nullopt;
    }
    auto value = parse_integer(it->second);
    if (!value || !satisfies(rule, *value)) {
      settings.warnings.push_back(where + key + "=\"" + it->second + "\" is invalid (expected " + rule.expectation +
                                  "); the file is ignored");
      return std::nullopt;
    }
    return value;
  };
  const auto size = read_value("max_op_cache_size", k_max_size_rule);
  const auto ratio = read_value("remain_cache_size_ratio", k_ratio_rule);
  if (!size || !ratio) {
    return false;
  }
  settings.max_op_cache_size_mb = {*size, path.string()};
  settings.remain_cache_size_ratio = {*ratio, path.string()};
  return true;
}

std::vector<std::string> split_list(const std::string& text) {
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

Result<Settings> resolve_settings(const SettingOverrides& overrides, const EnvLookup& env) {
  Settings settings;
  OPCACHE_TRY_ASSIGN(auto root, resolve_cache_root(overrides.cache_dir, env));
  settings.cache_dir = {root.path, root.source};

  // The config file: explicit ones must exist; the default one may not.
  std::optional<IniValues> config;
  std::filesystem::path config_path;
  std::string config_source;
  if (overrides.config_file) {
    config_path = *overrides.config_file;
    config_source = "--config";
  } else if (auto value = env("OPCACHE_CONFIG"); value && !value->empty()) {
    config_path = *value;
    config_source = "OPCACHE_CONFIG";
  } else {
    config_path = root.path / "opcache.conf";
    config_source = k_default;
  }
  auto loaded = read_ini(config_path);
  if (!loaded) {
    return loaded.error().with_context("config file");
  }
  config = std::move(*loaded);
  if (!config && config_source != k_default) {
    return Error::usage("config file " + config_path.string() + " (from " + config_source + ") does not exist");
  }
  settings.config_file = {config ? config_path.string() : std::string(), config ? config_source : k_default};
  if (config) {
    warn_unknown_config_keys(*config, config_path.string(), settings.warnings);
  }

  Resolver resolver(env, config, config_path.string(), settings.warnings);

  OPCACHE_TRY_ASSIGN(auto mode_text,
                     resolver.text(overrides.mode, "--mode", "OPCACHE_MODE", "mode", "enable",
                                   [](const std::string& value) {
                                     return parse_cache_mode(value) ? "" : "expected enable, force or disable";
                                   }));
  settings.mode = {*parse_cache_mode(mode_text.value), mode_text.source};

  if (!aging_from_op_cache_ini(root.path, settings)) {
    settings.max_op_cache_size_mb = resolver.from_env("ASCEND_MAX_OP_CACHE_SIZE", k_max_size_rule)
                                        .value_or(Setting<std::int64_t>{k_default_max_mb, k_default});
    settings.remain_cache_size_ratio = resolver.from_env("ASCEND_REMAIN_CACHE_SIZE_RATIO", k_ratio_rule)
                                           .value_or(Setting<std::int64_t>{k_default_ratio, k_default});
  }
  OPCACHE_TRY_ASSIGN(settings.min_idle_s, resolver.integer(overrides.min_idle_s, "--min-idle", "OPCACHE_MIN_IDLE",
                                                           "min_idle", k_default_min_idle_s, k_seconds_rule));
  OPCACHE_TRY_ASSIGN(settings.op_debug_level,
                     resolver.integer(overrides.op_debug_level, "--op-debug-level", "OPCACHE_OP_DEBUG_LEVEL",
                                      "op_debug_level", 0, k_debug_level_rule));
  OPCACHE_TRY_ASSIGN(auto debug_list, resolver.text(overrides.op_debug_list, "--op-debug-list",
                                                    "OPCACHE_OP_DEBUG_LIST", "op_debug_list", "",
                                                    [](const std::string&) { return std::string(); }));
  settings.op_debug_list = {split_list(debug_list.value), debug_list.source};
  OPCACHE_TRY_ASSIGN(settings.volatile_fields,
                     resolver.text(overrides.volatile_fields, "--volatile-fields", "OPCACHE_VOLATILE_FIELDS",
                                   "volatile_fields", "", [](const std::string& value) {
                                     auto filter = VolatileFieldFilter::from_setting(value);
                                     return filter ? std::string() : filter.error().message();
                                   }));
  OPCACHE_TRY_ASSIGN(settings.wait_timeout_s,
                     resolver.integer(overrides.wait_timeout_s, "--wait-timeout", "OPCACHE_WAIT_TIMEOUT",
                                      "wait_timeout", k_default_wait_timeout_s, k_seconds_rule));
  return settings;
}

}  // namespace opcache::store
