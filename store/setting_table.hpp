// The settings table: one row per setting, like ccache's Config item table.
// Each row says how the setting is named on every surface (public part:
// opcache::SettingDescriptor), where StoreConfig holds an explicit value, how
// a value is validated, how it lands in store::Settings and how
// `opcache config` shows it. Adding a setting means adding a row here (and
// its typed fields in StoreConfig and Settings).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "opcache/opcache.hpp"

namespace opcache::store {

struct Settings;

/// A value and the place it was taken from ("--mode", "OPCACHE_MODE",
/// "/x/opcache.conf [cache] mode", "default", ...).
template <typename T>
struct Setting {
  T value;
  std::string source;
};

/// Where StoreConfig holds an explicit value of a row (monostate: nowhere).
using ConfigField = std::variant<std::monostate, std::filesystem::path StoreConfig::*,
                                 std::optional<std::string> StoreConfig::*, std::optional<std::int64_t> StoreConfig::*,
                                 std::vector<std::string> StoreConfig::*, bool StoreConfig::*, int StoreConfig::*>;

/// One row of the table.
struct SettingSpec {
  SettingDescriptor info;
  ConfigField field;
  /// Checks a value in text form: "" when valid, else what was expected
  /// ("expected enable, force or disable"). nullptr accepts anything.
  std::string (*check)(const std::string& text) = nullptr;
  /// Stores the value resolved by flag > environment > [cache] key > default
  /// into `settings`; nullptr when the row is resolved elsewhere (cache_dir,
  /// config_file, CANN's aging pair, remotes).
  void (*resolved)(Settings& settings, Setting<std::string> value) = nullptr;
  /// The value and source `opcache config` shows; nullptr when not shown.
  Setting<std::string> (*show)(const Settings& settings) = nullptr;
};

/// Every row, in `opcache config` order. Static storage; thread-safe.
std::span<const SettingSpec> setting_specs() noexcept;

/// The row named `name` (SettingDescriptor::name), or nullptr.
const SettingSpec* find_setting(std::string_view name) noexcept;

/// The settable names, comma-separated, for "allowed: ..." messages.
std::string settable_names();

/// The first CLI name of a row's flag ("--cache-dir" of "--cache-dir,-C").
std::string primary_flag(const SettingSpec& spec);

/// The explicit value StoreConfig holds for a row, as text (integers in
/// decimal, flags "true"); std::nullopt when unset (empty paths, empty
/// optionals, empty lists, false flags).
std::optional<std::string> explicit_text(const StoreConfig& config, const SettingSpec& spec);

/// Applies one text value to StoreConfig's field of `spec` (validated by
/// `spec.check` first). `usage` error naming the setting and the value.
Status assign_setting(StoreConfig& config, const SettingSpec& spec, const std::string& text);

/// The value of an integer that the row's check accepted (base::parse_integer);
/// 0 for text that is no integer. Pure.
std::int64_t integer_of_checked(const std::string& text);

}  // namespace opcache::store
