// Reading a CANN install tree as the vendor lays it out: where the toolkit
// is (ASCEND_TOOLKIT_HOME, ASCEND_HOME_PATH, the default path), which OPP
// the op compiler loads (ASCEND_OPP_PATH, else `<root>/opp`), the `Version=`
// line of each component's version.info, and the custom operator packages
// (`<opp>/vendors/*`, ASCEND_CUSTOM_OPP_PATH) with the load priority of
// `<opp>/vendors/config.ini` (../shared/docs/ascend-formats.md, "What
// decides which toolchain compiled a kernel"). Nothing here is hashed;
// store/scenario_detect decides what of it enters a scenario.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/environment.hpp"
#include "opcache/result.hpp"

namespace opcache::store {

/// The toolkit's default root when neither variable is set (a symlink to the
/// versioned directory on a vendor install).
inline constexpr const char* k_default_cann_root = "/usr/local/Ascend/ascend-toolkit/latest";

/// The driver's version file (read for `opcache scenario --explain` only).
inline constexpr const char* k_default_driver_version_file = "/usr/local/Ascend/driver/version.info";

/// The source of an OPP named by the variable rather than found under the root.
inline constexpr const char* k_opp_path_variable = "$ASCEND_OPP_PATH";

/// The source of a custom operator package named by ASCEND_CUSTOM_OPP_PATH.
inline constexpr const char* k_custom_opp_path_variable = "$ASCEND_CUSTOM_OPP_PATH";

/// Where the toolkit root is and how it was chosen.
struct CannRoot {
  std::filesystem::path path;  ///< as configured (not resolved)
  std::string source;          ///< "$ASCEND_TOOLKIT_HOME", "$ASCEND_HOME_PATH" or "default path"
};

/// One component's version as read from its version.info.
struct CannComponent {
  std::string name;             ///< "compiler", "opp", "runtime", "opp_kernel" or "toolkit"
  std::filesystem::path file;   ///< the version.info it was read from
  std::string version;          ///< the `Version=` value, trimmed, non-empty
  std::string source;           ///< how `file` was found: the root's source, or k_opp_path_variable for the opp
};

/// A CANN install found on this machine.
struct CannInstall {
  std::filesystem::path root;   ///< the toolkit root as configured (not resolved)
  std::string root_source;      ///< "$ASCEND_TOOLKIT_HOME", "$ASCEND_HOME_PATH" or "default path"
  std::filesystem::path opp;    ///< the OPP the op compiler loads: $ASCEND_OPP_PATH when set, else `<root>/opp`
  std::string opp_source;       ///< k_opp_path_variable, or `root_source` for `<root>/opp`
  /// The components present, in the order compiler, opp (`<opp>/version.info`),
  /// runtime, opp_kernel, toolkit (`<root>/version.info`). At least compiler
  /// or toolkit is present.
  std::vector<CannComponent> components;

  /// The component named `name`, or nullptr when absent.
  const CannComponent* component(const std::string& name) const;
};

/// The `Version=` value of a version.info file: the first line whose name
/// before '=' is "Version" (spaces around the name and value ignored; other
/// lines such as timestamps are ignored). std::nullopt when the file does not
/// exist. `usage` error naming the file when it exists but cannot be read,
/// is larger than 64 KiB, or has no non-empty `Version=` line.
Result<std::optional<std::string>> read_version_info(const std::filesystem::path& file);

/// The toolkit root: ASCEND_TOOLKIT_HOME, else ASCEND_HOME_PATH, else
/// `default_root` (empty values count as unset). Reads nothing.
CannRoot choose_cann_root(const base::EnvLookup& env, const std::filesystem::path& default_root = k_default_cann_root);

/// Finds the install at choose_cann_root() and reads the components present;
/// the opp's version.info is the one of ASCEND_OPP_PATH when that is set and
/// not empty (a missing one, as a missing `<root>/opp/version.info`, gives no
/// opp component). `usage` error, starting "toolchain=auto: " and naming
/// every place looked at and what to set, when the root chosen is not a
/// directory or has neither compiler/version.info nor version.info, or a
/// version.info present is unreadable. Reads only; thread-safe.
Result<CannInstall> find_cann_install(const base::EnvLookup& env,
                                      const std::filesystem::path& default_root = k_default_cann_root);

/// The component whose version toolchain=auto keeps in `toolchain` (the
/// compiler's, else the toolkit's) of the install at choose_cann_root(), for
/// checking an explicit toolchain against it. std::nullopt when there is no
/// install there or its version file is unreadable: an explicit toolchain
/// needs no install. Reads at most two version files; thread-safe.
std::optional<CannComponent> installed_toolchain(const base::EnvLookup& env,
                                                 const std::filesystem::path& default_root = k_default_cann_root);

/// A custom operator package the op compiler loads.
struct CustomOpPackage {
  std::string name;                    ///< its directory's name
  std::filesystem::path directory;     ///< as found (not resolved)
  std::string source;                  ///< "a vendor of the OPP of <opp source>" or k_custom_opp_path_variable
  std::optional<std::string> version;  ///< the `Version=` of its version.info, when it has one
};

/// The custom operator packages of an install.
struct CustomOpPackages {
  /// Every directory of `<opp>/vendors`, sorted by name (symlinks to
  /// directories included; files such as config.ini are not packages).
  std::vector<CustomOpPackage> vendors;
  /// The `load_priority` value of `<opp>/vendors/config.ini`, trimmed, when
  /// the file has one: the order in which the vendors' operators are looked up.
  std::optional<std::string> vendor_priority;
  std::filesystem::path vendor_config;  ///< `<opp>/vendors/config.ini`
  /// Each directory named by ASCEND_CUSTOM_OPP_PATH (colon-separated), in
  /// its order, which is the load priority; empty items and items that are
  /// not an existing directory are skipped, as the op compiler skips them.
  std::vector<CustomOpPackage> custom;
};

/// Lists the custom operator packages of `install` and of
/// ASCEND_CUSTOM_OPP_PATH, reading each package's version.info (a missing
/// one, or one without a `Version=` line, leaves `version` empty) and the
/// `load_priority=` line of vendors/config.ini. `usage` error, starting
/// "toolchain=auto: " and naming the file or directory and what to set, when
/// one of them exists but cannot be read or is over 64 KiB. Reads only;
/// thread-safe.
Result<CustomOpPackages> find_custom_op_packages(const base::EnvLookup& env, const CannInstall& install);

}  // namespace opcache::store
