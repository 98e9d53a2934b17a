// Reading a CANN install tree as the vendor lays it out: where the toolkit
// is (ASCEND_TOOLKIT_HOME, ASCEND_HOME_PATH, the default path), and the
// `Version=` line of each component's version.info
// (../shared/docs/ascend-formats.md, "What decides which toolchain compiled a
// kernel"). Nothing here is hashed; store/scenario_detect decides what of it
// enters a scenario.
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

/// One component's version as read from its version.info.
struct CannComponent {
  std::string name;             ///< "compiler", "opp", "runtime", "opp_kernel" or "toolkit"
  std::filesystem::path file;   ///< the version.info it was read from
  std::string version;          ///< the `Version=` value, trimmed, non-empty
};

/// A CANN install found on this machine.
struct CannInstall {
  std::filesystem::path root;   ///< the toolkit root as configured (not resolved)
  std::string root_source;      ///< "$ASCEND_TOOLKIT_HOME", "$ASCEND_HOME_PATH" or "default path"
  /// The components present, in the order compiler, opp, runtime, opp_kernel,
  /// toolkit (`<root>/version.info`). At least compiler or toolkit is present.
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

/// Finds the install: ASCEND_TOOLKIT_HOME, else ASCEND_HOME_PATH, else
/// `default_root` (empty values count as unset), and reads the components
/// present. `usage` error, starting "toolchain=auto: " and naming every place
/// looked at and what to set, when the root chosen is not a directory or has
/// neither compiler/version.info nor version.info. Reads only; thread-safe.
Result<CannInstall> find_cann_install(const base::EnvLookup& env,
                                      const std::filesystem::path& default_root = k_default_cann_root);

}  // namespace opcache::store
