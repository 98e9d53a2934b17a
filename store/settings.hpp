// Effective settings of a store and where each one came from:
// flag > environment > config file > default, except the CANN aging pair,
// which follows CANN: op_cache.ini > ASCEND_* environment > default.
// Invalid values in the environment or in files produce a warning naming the
// source, key and value, and the next source applies; invalid flags are errors.
// Documented in docs/configuration.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "opcache/opcache.hpp"
#include "opcache/result.hpp"
#include "store/aging.hpp"
#include "store/scenario.hpp"
#include "store/setting_table.hpp"
#include "store/trust.hpp"

namespace opcache::store {

/// How the transparent paths (get_or_build, exec) use the cache.
enum class CacheMode {
  enable,   ///< read and write
  force,    ///< rebuild what this process compiles and replace the stored entry
  disable,  ///< never read or write
};

const char* to_string(CacheMode mode) noexcept;

/// Values given explicitly (CLI flags, opcache_open_ex JSON, or a
/// StoreConfig filled by C++ code); they win over the environment and files.
/// Validated by resolve_settings (usage errors name the flag).
using SettingOverrides = StoreConfig;

/// Every effective setting.
struct Settings {
  Setting<std::filesystem::path> cache_dir;
  Setting<std::string> config_file;  ///< "" when no config file is used
  Setting<CacheMode> mode;
  Setting<std::int64_t> max_op_cache_size_mb;  ///< -1 disables aging
  Setting<std::int64_t> remain_cache_size_ratio;
  Setting<std::int64_t> min_idle_s;
  Setting<std::int64_t> op_debug_level;
  Setting<std::vector<std::string>> op_debug_list;
  Setting<std::string> volatile_fields;  ///< "" means the built-in list
  Setting<std::int64_t> wait_timeout_s;
  Setting<std::string> signing_key;   ///< path of the signing key; "" when none
  Setting<std::string> trusted_keys;  ///< path of the trusted-keys file; "" when none
  Setting<SignatureRequirement> require_signature;
  Setting<bool> team_single_flight{true, "default"};  ///< remote/team_flight.hpp
  Setting<bool> shared_group;            ///< see store/cache_root.hpp Sharing
  Setting<CompilerCheck> compiler_check{{}, "default"};     ///< store/exec_policy.hpp
  Setting<std::vector<std::string>> exec_env{{}, "default"};  ///< sorted names; store/exec_policy.hpp
  Setting<std::string> base_dir{"", "default"};  ///< absolute and lexically normal, or "" (none); store/exec_key.hpp
  Setting<std::int64_t> revocation_check_interval_s{300, "default"};  ///< remote/remote_set.hpp check_revocations
  std::vector<std::string> warnings;     ///< problems found in the environment and files

  AgingPolicy aging() const;
  /// Why the cache is bypassed for `op_type` ("op_debug_level=2", "op_debug_list
  /// contains MatMul"), or nullopt when it is not.
  std::optional<std::string> bypass_reason(const std::string& op_type) const;
};

/// Resolves every setting. The config file is --config / OPCACHE_CONFIG, else
/// <cache dir>/opcache.conf when it exists; op_cache.ini is read from the
/// cache dir. Errors: `usage` for invalid overrides or an explicit config file
/// that cannot be read.
Result<Settings> resolve_settings(const SettingOverrides& overrides, const EnvLookup& env);

/// The items of a comma-separated setting, trimmed of blanks; empty items dropped.
std::vector<std::string> split_setting_list(const std::string& text);

/// Parses a mode name ("enable", "force", "disable").
std::optional<CacheMode> parse_cache_mode(const std::string& text);

}  // namespace opcache::store
