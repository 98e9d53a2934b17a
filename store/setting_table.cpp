#include "store/setting_table.hpp"

#include <cstdint>

#include "base/value_parse.hpp"
#include "store/exec_policy.hpp"
#include "store/settings.hpp"
#include "store/trust.hpp"
#include "store/volatile_fields.hpp"

namespace opcache::store {

namespace {

// Validation of one integer setting: range and meaning, for messages.
struct IntegerRule {
  std::int64_t min;
  std::int64_t max;
  std::optional<std::int64_t> extra_allowed;  // an out-of-range value that is still valid (-1 = "disabled")
  const char* expectation;
};

constexpr IntegerRule k_size_rule{1, 1ll << 40, -1, "a size in MB (1 or more), or -1 to disable aging"};
constexpr IntegerRule k_ratio_rule{1, 100, std::nullopt, "an integer from 1 to 100"};
constexpr IntegerRule k_seconds_rule{0, 1ll << 40, std::nullopt, "a number of seconds (0 or more)"};
constexpr IntegerRule k_debug_level_rule{0, 1000, std::nullopt, "an integer, 0 to use the cache"};
// Out-of-range levels are clamped to 1..19 when bundles are written.
constexpr IntegerRule k_compression_rule{INT32_MIN, INT32_MAX, std::nullopt, "an integer (zstd level 1..19)"};

template <const IntegerRule& rule>
std::string check_integer(const std::string& text) {
  auto value = base::parse_integer(text);
  if (value && ((*value >= rule.min && *value <= rule.max) || *value == rule.extra_allowed)) {
    return {};
  }
  return std::string("expected ") + rule.expectation;
}

std::string check_mode(const std::string& text) {
  return parse_cache_mode(text) ? "" : "expected enable, force or disable";
}

std::string check_volatile_fields(const std::string& text) {
  auto filter = VolatileFieldFilter::from_setting(text);
  return filter ? std::string() : filter.error().message();
}

// Every yes/no setting (flags, the environment, files, StoreConfig::set)
// takes base::parse_bool's words.
std::string check_bool(const std::string& text) {
  auto parsed = base::parse_bool(text);
  return parsed ? "" : "expected true or false (or 1/0, on/off, yes/no)";
}

// A value check_bool accepted.
bool bool_of(const std::string& text) {
  auto parsed = base::parse_bool(text);
  return parsed && *parsed;
}

std::string check_signature_requirement(const std::string& text) {
  return parse_signature_requirement(text) ? "" : "expected off, remote or all";
}

std::string check_compiler_check(const std::string& text) {
  auto check = parse_compiler_check(text);
  return check ? "" : check.error().message();
}

std::string check_base_dir(const std::string& text) {
  return text.empty() || (text.front() == '/' && text.find('\0') == std::string::npos)
             ? ""
             : "expected an absolute directory (or nothing, for none)";
}

std::string check_exec_env(const std::string& text) {
  auto names = parse_exec_environment(text);
  return names ? "" : names.error().message();
}

// An unset requirement defaults to `remote` once trusted keys are configured
// (the table resolves trusted_keys before this row).
Setting<SignatureRequirement> resolve_requirement(Setting<std::string> value, const Settings& settings) {
  if (auto requirement = parse_signature_requirement(value.value)) {
    return {*requirement, std::move(value.source)};
  }
  const bool trusted = !settings.trusted_keys.value.empty();
  return {default_requirement(trusted), trusted ? "default (trusted_keys is set)" : "default"};
}

Setting<std::string> text_or(const Setting<std::string>& setting, const char* when_empty) {
  return {setting.value.empty() ? when_empty : setting.value, setting.source};
}

std::int64_t integer_of(const Setting<std::string>& value) {
  return integer_of_checked(value.value);
}

Setting<std::int64_t> integer_setting(Setting<std::string> value) {
  return {integer_of(value), std::move(value.source)};
}

Setting<std::string> seconds(const Setting<std::int64_t>& setting) {
  return {std::to_string(setting.value) + " s", setting.source};
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    out += (out.empty() ? "" : ",") + item;
  }
  return out;
}

// A setting that decides whether to trust the cache directory cannot come
// from a file inside it (anyone who may write there could write it): the
// default config file, <cache dir>/opcache.conf, does not set shared_group.
void resolve_shared_group(Settings& s, Setting<std::string> value) {
  const auto inside = (s.cache_dir.value / "opcache.conf").string() + " ";
  if (value.source.rfind(inside, 0) == 0) {
    if (bool_of(value.value)) {
      s.warnings.push_back(value.source +
                           " is ignored: a file inside the cache directory cannot set "
                           "shared_group; use --shared-group, OPCACHE_SHARED_GROUP or a config file elsewhere");
    }
    value = {"false", "default"};
  }
  s.shared_group = {bool_of(value.value), std::move(value.source)};
}

// The table. Rows with a `show` function appear in `opcache config`, in this order.
const SettingSpec k_specs[] = {
    {{"cache_dir", "cache_dir", SettingType::path, true, "--cache-dir,-C",
      "Cache directory (default: $OPCACHE_DIR, else $XDG_CACHE_HOME/opcache, else ~/.cache/opcache)", "OPCACHE_DIR", "",
      "~/.cache/opcache"},
     &StoreConfig::cache_dir,
     nullptr,
     nullptr,
     [](const Settings& s) {
       return Setting<std::string>{s.cache_dir.value.string(), s.cache_dir.source};
     }},
    {{"config_file", "config_file", SettingType::path, true, "--config",
      "INI config file (default: $OPCACHE_CONFIG, else <cache dir>/opcache.conf)", "OPCACHE_CONFIG", "",
      "<cache dir>/opcache.conf"},
     &StoreConfig::config_file,
     nullptr,
     nullptr,
     [](const Settings& s) {
       return Setting<std::string>{s.config_file.value.empty() ? "(none)" : s.config_file.value, s.config_file.source};
     }},
    {{"mode", "mode", SettingType::text, true, "--mode",
      "Cache mode for exec/get_or_build: enable, force (rebuild and replace) or disable", "OPCACHE_MODE", "mode",
      "enable"},
     &StoreConfig::mode,
     check_mode,
     [](Settings& s, Setting<std::string> value) {
       s.mode = {parse_cache_mode(value.value).value_or(CacheMode::enable), std::move(value.source)};
     },
     [](const Settings& s) {
       return Setting<std::string>{to_string(s.mode.value), s.mode.source};
     }},
    {{"max_op_cache_size", "max_op_cache_size", SettingType::integer, false, "", "", "ASCEND_MAX_OP_CACHE_SIZE", "",
      "500"},
     std::monostate(),
     check_integer<k_size_rule>,
     nullptr,
     [](const Settings& s) {
       const auto& size = s.max_op_cache_size_mb;
       return Setting<std::string>{std::to_string(size.value) + (size.value < 0 ? " (aging disabled)" : " MB"),
                                   size.source};
     }},
    {{"remain_cache_size_ratio", "remain_cache_size_ratio", SettingType::integer, false, "", "",
      "ASCEND_REMAIN_CACHE_SIZE_RATIO", "", "50"},
     std::monostate(),
     check_integer<k_ratio_rule>,
     nullptr,
     [](const Settings& s) {
       return Setting<std::string>{std::to_string(s.remain_cache_size_ratio.value) + " %",
                                   s.remain_cache_size_ratio.source};
     }},
    {{"min_idle_s", "min_idle", SettingType::integer, true, "--min-idle",
      "Aging removes only entries idle this many seconds (default 1800)", "OPCACHE_MIN_IDLE", "min_idle", "1800"},
     &StoreConfig::min_idle_s,
     check_integer<k_seconds_rule>,
     [](Settings& s, Setting<std::string> value) { s.min_idle_s = integer_setting(std::move(value)); },
     [](const Settings& s) { return seconds(s.min_idle_s); }},
    {{"op_debug_level", "op_debug_level", SettingType::integer, true, "--op-debug-level",
      "Non-zero bypasses the cache in exec (CANN op_debug_level)", "OPCACHE_OP_DEBUG_LEVEL", "op_debug_level", "0"},
     &StoreConfig::op_debug_level,
     check_integer<k_debug_level_rule>,
     [](Settings& s, Setting<std::string> value) { s.op_debug_level = integer_setting(std::move(value)); },
     [](const Settings& s) {
       return Setting<std::string>{std::to_string(s.op_debug_level.value), s.op_debug_level.source};
     }},
    {{"op_debug_list", "op_debug_list", SettingType::comma_list, true, "--op-debug-list",
      "Op types for which exec bypasses the cache, e.g. MatMul,Conv2D", "OPCACHE_OP_DEBUG_LIST", "op_debug_list", ""},
     &StoreConfig::op_debug_list,
     nullptr,
     [](Settings& s, Setting<std::string> value) {
       s.op_debug_list = {split_setting_list(value.value), std::move(value.source)};
     },
     [](const Settings& s) {
       const auto& list = s.op_debug_list;
       return Setting<std::string>{list.value.empty() ? "(empty)" : join(list.value), list.source};
     }},
    {{"volatile_fields", "volatile_fields", SettingType::comma_list, true, "--volatile-fields",
      "Descriptor fields dropped before hashing: \"+a,b\" adds to the built-in list, \"a,b\" replaces it, "
      "\"none\" disables",
      "OPCACHE_VOLATILE_FIELDS", "volatile_fields", ""},
     &StoreConfig::volatile_fields,
     check_volatile_fields,
     [](Settings& s, Setting<std::string> value) { s.volatile_fields = std::move(value); },
     [](const Settings& s) {
       const auto& fields = s.volatile_fields;
       return Setting<std::string>{fields.value.empty() ? "(built-in list)" : fields.value, fields.source};
     }},
    {{"wait_timeout_s", "wait_timeout", SettingType::integer, true, "--wait-timeout",
      "Seconds exec waits for another process building the same kernel (default 3600)", "OPCACHE_WAIT_TIMEOUT",
      "wait_timeout", "3600"},
     &StoreConfig::wait_timeout_s,
     check_integer<k_seconds_rule>,
     [](Settings& s, Setting<std::string> value) { s.wait_timeout_s = integer_setting(std::move(value)); },
     [](const Settings& s) { return seconds(s.wait_timeout_s); }},
    {{"signing_key", "signing_key", SettingType::path, true, "--signing-key",
      "Ed25519 private key (PEM, mode 0600) that signs every entry this process writes "
      "(make one with `opcache trust keygen`)",
      "OPCACHE_SIGNING_KEY", "signing_key", ""},
     &StoreConfig::signing_key,
     nullptr,
     [](Settings& s, Setting<std::string> value) { s.signing_key = std::move(value); },
     [](const Settings& s) { return text_or(s.signing_key, "(none)"); }},
    {{"trusted_keys", "trusted_keys", SettingType::path, true, "--trusted-keys",
      "File of trusted signers' public keys, one NAME:BASE64 a line; setting it makes require_signature "
      "default to remote",
      "OPCACHE_TRUSTED_KEYS", "trusted_keys", ""},
     &StoreConfig::trusted_keys,
     nullptr,
     [](Settings& s, Setting<std::string> value) { s.trusted_keys = std::move(value); },
     [](const Settings& s) { return text_or(s.trusted_keys, "(none)"); }},
    {{"require_signature", "require_signature", SettingType::text, true, "--require-signature",
      "Where entries need a valid signature by a trusted key: off, remote (entries from remotes) or all "
      "(local reads too); default remote when trusted_keys is set, else off",
      "OPCACHE_REQUIRE_SIGNATURE", "require_signature", ""},
     &StoreConfig::require_signature,
     check_signature_requirement,
     [](Settings& s, Setting<std::string> value) { s.require_signature = resolve_requirement(std::move(value), s); },
     [](const Settings& s) {
       return Setting<std::string>{to_string(s.require_signature.value), s.require_signature.source};
     }},
    {{"team_single_flight", "team_single_flight", SettingType::text, true, "--team-single-flight",
      "Build each kernel once per team: on a miss, take a build lease from the first http(s) remote with "
      "upload, or wait for the machine that holds it (true or false; default true)",
      "OPCACHE_TEAM_SINGLE_FLIGHT", "team_single_flight", "true"},
     &StoreConfig::team_single_flight,
     check_bool,
     [](Settings& s, Setting<std::string> value) {
       s.team_single_flight = {bool_of(value.value), std::move(value.source)};
     },
     [](const Settings& s) {
       return Setting<std::string>{s.team_single_flight.value ? "true" : "false", s.team_single_flight.source};
     }},
    // Remotes are resolved by remote/remote_config (OPCACHE_REMOTE, [remote "NAME"] sections).
    // The URL schemes are not listed here: opcache::setting_descriptors() (api/store.cpp) appends
    // those of remote/'s scheme table, which store/ may not include.
    {{"remotes", "", SettingType::repeated, true, "--remote",
      "Remote cache, repeatable, in lookup order: URL[|read-only][|upload][|timeout=MS]... "
      "(default: $OPCACHE_REMOTE, else [remote] sections of the config file)",
      "OPCACHE_REMOTE", "", ""},
     &StoreConfig::remotes},
    {{"no_remote", "", SettingType::flag, true, "--no-remote", "Use no remote, whatever the environment and config say",
      "", "", "false"},
     &StoreConfig::no_remote,
     check_bool},
    {{"token_file", "", SettingType::path, true, "--token-file",
      "File holding the bearer token for http(s) remotes (default: the token itself in $OPCACHE_TOKEN)", "OPCACHE_TOKEN", "", ""},
     &StoreConfig::token_file},
    {{"shared_group", "shared_group", SettingType::flag, true, "--shared-group",
      "A team shares the cache directory through its group: accept it when another user owns it and the group may "
      "write it, and create files group-writable (directories setgid)",
      "OPCACHE_SHARED_GROUP", "shared_group", "false"},
     &StoreConfig::shared_group,
     check_bool,
     resolve_shared_group,
     [](const Settings& s) {
       return Setting<std::string>{s.shared_group.value ? "true" : "false", s.shared_group.source};
     }},
    {{"compiler_check", "compiler_check", SettingType::text, true, "--compiler-check",
      "How exec identifies the compiler it runs: content (a digest of the executable), mtime, none, "
      "string:TEXT or command:CMD (%compiler% is the compiler's path; default content)",
      "OPCACHE_COMPILER_CHECK", "compiler_check", "content"},
     &StoreConfig::compiler_check,
     check_compiler_check,
     [](Settings& s, Setting<std::string> value) {
       auto check = parse_compiler_check(value.value);  // checked by check_compiler_check
       s.compiler_check = {check ? *check : CompilerCheck{}, std::move(value.source)};
     },
     [](const Settings& s) { return Setting<std::string>{to_string(s.compiler_check.value), s.compiler_check.source}; }},
    {{"exec_env", "exec_env", SettingType::comma_list, true, "--exec-env",
      "Environment variables whose values exec keys on: \"+A,B\" adds to the built-in list (CPATH, "
      "NVCC_APPEND_FLAGS, ASCEND_OPP_PATH...), \"A,B\" replaces it, \"none\" keys on none",
      "OPCACHE_EXEC_ENV", "exec_env", ""},
     &StoreConfig::exec_env,
     check_exec_env,
     [](Settings& s, Setting<std::string> value) {
       auto names = parse_exec_environment(value.value);  // checked by check_exec_env
       s.exec_env = {names ? *names : default_exec_environment(), std::move(value.source)};
     },
     [](const Settings& s) {
       const auto& names = s.exec_env.value;
       const bool builtin = names == default_exec_environment();
       return Setting<std::string>{builtin ? "(built-in list)" : names.empty() ? "(none)" : join(names), s.exec_env.source};
     }},
    {{"base_dir", "base_dir", SettingType::text, true, "--base-dir",
      "A directory below which exec keys absolute paths relative to it (in the command line and in the files the "
      "command reads), so that two checkouts of one tree share entries (default: none)",
      "OPCACHE_BASE_DIR", "base_dir", ""},
     &StoreConfig::base_dir,
     check_base_dir,
     [](Settings& s, Setting<std::string> value) {
       std::string normal = value.value.empty() ? "" : std::filesystem::path(value.value).lexically_normal().string();
       while (normal.size() > 1 && normal.back() == '/') {
         normal.pop_back();
       }
       s.base_dir = {std::move(normal), std::move(value.source)};
     },
     [](const Settings& s) { return Setting<std::string>{s.base_dir.value.empty() ? "(none)" : s.base_dir.value, s.base_dir.source}; }},
    {{"compression_level", "", SettingType::integer, true, "--compression-level",
      "zstd level for new bundles, 1..19 (default 3)", "", "", "3"},
     &StoreConfig::compression_level,
     check_integer<k_compression_rule>},
    {{"revocation_check_interval_s", "revocation_check_interval", SettingType::integer, true,
      "--revocation-check-interval",
      "Seconds between two reads of each remote's revocation list by the processes of this cache directory "
      "(0: on every use; default 300); opcache pull always reads it",
      "OPCACHE_REVOCATION_CHECK_INTERVAL", "revocation_check_interval", "300"},
     &StoreConfig::revocation_check_interval_s,
     check_integer<k_seconds_rule>,
     [](Settings& s, Setting<std::string> value) { s.revocation_check_interval_s = integer_setting(std::move(value)); },
     [](const Settings& s) { return seconds(s.revocation_check_interval_s); }},
};

// Text of one StoreConfig field; nullopt when it holds no explicit value.
struct ExplicitText {
  std::optional<std::string> operator()(std::monostate) const { return std::nullopt; }
  std::optional<std::string> operator()(std::filesystem::path StoreConfig::*field) const {
    const auto& path = config.*field;
    return path.empty() ? std::nullopt : std::optional<std::string>(path.string());
  }
  std::optional<std::string> operator()(std::optional<std::string> StoreConfig::*field) const { return config.*field; }
  std::optional<std::string> operator()(std::optional<std::int64_t> StoreConfig::*field) const {
    const auto& value = config.*field;
    return value ? std::optional<std::string>(std::to_string(*value)) : std::nullopt;
  }
  std::optional<std::string> operator()(std::vector<std::string> StoreConfig::*field) const {
    const auto& values = config.*field;
    return values.empty() ? std::nullopt : std::optional<std::string>(join(values));
  }
  std::optional<std::string> operator()(bool StoreConfig::*field) const {
    return config.*field ? std::optional<std::string>("true") : std::nullopt;
  }
  std::optional<std::string> operator()(int StoreConfig::*field) const { return std::to_string(config.*field); }

  const StoreConfig& config;
};

// Stores already validated text into one StoreConfig field.
struct AssignText {
  void operator()(std::monostate) const {}
  void operator()(std::filesystem::path StoreConfig::*field) const { config.*field = text; }
  void operator()(std::optional<std::string> StoreConfig::*field) const { config.*field = text; }
  void operator()(std::optional<std::int64_t> StoreConfig::*field) const { config.*field = integer_of_checked(text); }
  void operator()(std::vector<std::string> StoreConfig::*field) const { (config.*field).push_back(text); }
  void operator()(bool StoreConfig::*field) const { config.*field = bool_of(text); }
  void operator()(int StoreConfig::*field) const { config.*field = static_cast<int>(integer_of_checked(text)); }

  StoreConfig& config;
  const std::string& text;
};

}  // namespace

std::int64_t integer_of_checked(const std::string& text) {
  auto value = base::parse_integer(text);
  return value ? *value : 0;
}

std::span<const SettingSpec> setting_specs() noexcept {
  return k_specs;
}

const SettingSpec* find_setting(std::string_view name) noexcept {
  for (const auto& spec : k_specs) {
    if (spec.info.name == name) {
      return &spec;
    }
  }
  return nullptr;
}

std::string settable_names() {
  std::string names;
  for (const auto& spec : k_specs) {
    if (spec.info.settable) {
      names += (names.empty() ? "" : ", ") + std::string(spec.info.name);
    }
  }
  return names;
}

std::string primary_flag(const SettingSpec& spec) {
  const auto flag = spec.info.flag;
  return std::string(flag.substr(0, flag.find(',')));
}

std::optional<std::string> explicit_text(const StoreConfig& config, const SettingSpec& spec) {
  return std::visit(ExplicitText{config}, spec.field);
}

Status assign_setting(StoreConfig& config, const SettingSpec& spec, const std::string& text) {
  if (!spec.info.settable || std::holds_alternative<std::monostate>(spec.field)) {
    return Error::usage("setting " + std::string(spec.info.name) + " cannot be set here (only through " +
                        std::string(spec.info.env) + " or op_cache.ini)");
  }
  if (spec.check != nullptr) {
    if (auto problem = spec.check(text); !problem.empty()) {
      return Error::usage(std::string(spec.info.name) + " \"" + text + "\" is invalid: " + problem);
    }
  }
  std::visit(AssignText{config, text}, spec.field);
  return {};
}

}  // namespace opcache::store
