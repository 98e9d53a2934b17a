// Resolving a scenario's `auto` fields from the environment the op compiler
// would see (docs/formats.md, "Detected scenario fields (`auto`)"):
// toolchain=auto reads the CANN install (store/cann_install), the OPP the
// compiler loads and its custom operator packages, its tuning banks and the
// python3 on PATH; soc=auto asks `npu-smi info`. Values enter
// the scenario; paths, timestamps and host names never do. What costs real
// time (running python3 or npu-smi, reading bank files) is remembered in a
// base::DigestCache keyed by the identity of the file it came from.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/environment.hpp"
#include "base/file_digest.hpp"
#include "opcache/result.hpp"
#include "opcache/scenario.hpp"
#include "store/cann_install.hpp"

namespace opcache::store {

// The names of the detected entries of a scenario's `extra`.
inline constexpr const char* k_extra_cann_compiler = "cann.compiler";
inline constexpr const char* k_extra_cann_opp = "cann.opp";
inline constexpr const char* k_extra_cann_runtime = "cann.runtime";
inline constexpr const char* k_extra_cann_opp_kernel = "cann.opp_kernel";
inline constexpr const char* k_extra_cann_toolkit = "cann.toolkit";
inline constexpr const char* k_extra_tune_bank = "cann.tune_bank";
inline constexpr const char* k_extra_fusion_strategy = "cann.fusion_strategy";
inline constexpr const char* k_extra_python = "python";
/// A directory of `<opp>/vendors`: this prefix and the directory's name.
inline constexpr const char* k_extra_opp_vendor_prefix = "cann.opp_vendor.";
/// A directory of ASCEND_CUSTOM_OPP_PATH: this prefix and the directory's name.
inline constexpr const char* k_extra_custom_opp_prefix = "cann.custom_opp.";
/// The `load_priority` of `<opp>/vendors/config.ini`.
inline constexpr const char* k_extra_opp_vendor_priority = "cann.opp_vendor_priority";
/// The names of the ASCEND_CUSTOM_OPP_PATH packages in its order.
inline constexpr const char* k_extra_custom_opp_order = "cann.custom_opp_order";

/// The version part of a package entry when the package has no `Version=`.
inline constexpr const char* k_unversioned_package = "unversioned";

/// The subdirectories of a custom operator package that a compile loads,
/// and so the only ones its entry digests.
inline constexpr const char* k_package_compiled_parts[] = {"op_impl", "op_proto", "op_tiling"};

/// The name of the not-keyed input that shows the install's toolchain when
/// an explicit one differs from it.
inline constexpr const char* k_input_installed_toolchain = "installed_toolchain";

/// The value of a bank entry when the bank directory does not exist.
inline constexpr const char* k_no_bank = "none";

/// Hex characters of a tree's SHA-256 kept in a bank entry (64 bits).
inline constexpr std::size_t k_bank_digest_chars = 16;

/// Where detection looks. Copyable; the members are read only.
struct DetectContext {
  base::EnvLookup env;       ///< variables the op compiler would see (PATH, ASCEND_*, TUNE_BANK_PATH, HOME)
  base::DigestCache cache;   ///< remembers file digests and the answers of python3 and npu-smi (empty: no caching)
  std::filesystem::path default_cann_root = k_default_cann_root;
  std::filesystem::path driver_version_file = k_default_driver_version_file;
  /// Changes at every boot: part of the name under which npu-smi's answer is
  /// remembered, so new cards after a reboot are seen. Unreadable: not remembered.
  std::filesystem::path boot_id_file = "/proc/sys/kernel/random/boot_id";
};

/// The context of the public opcache::parse_scenario* functions: the process
/// environment and a cache in `<cache root>/digests` when the cache root
/// resolved from the environment (store/cache_root) is a real directory (not
/// a symlink) owned by this user; otherwise no caching.
DetectContext default_detect_context();

/// The chip of `npu-smi info` output. The format assumed is the vendor's box
/// table: lines that start with '|' hold cells separated by '|'; an NPU row's
/// first cell is "<npu id> <name>" (e.g. "| 0     910B1     | OK | …"), the
/// second line of each card ("| 0  | 0000:C1:00.0 | …") has a single word
/// there, and the process table that may follow ("Process id") ends the
/// parse. A name must contain a letter and a digit; "910B1" becomes
/// "Ascend910B1" ("Ascend…" is kept). `usage` error naming `soc=` when no NPU
/// row is found or the cards name different chips.
Result<std::string> parse_npu_smi_info(std::string_view output);

/// soc=auto: runs `npu-smi info` (the first npu-smi on PATH) unless its
/// answer for this boot is remembered for the same executable. `usage` error
/// naming `soc=` when npu-smi is not on PATH, fails, or its output does not
/// name one chip. Appends the input to `inputs` when not null.
Result<std::string> detect_soc(const DetectContext& context, std::vector<ScenarioInput>* inputs);

/// What toolchain=auto adds to a scenario.
struct DetectedToolchain {
  std::string toolchain;                     ///< compiler version, else the toolkit's
  std::map<std::string, std::string> extra;  ///< cann.*, python (see the k_extra_* names)
};

/// toolchain=auto for chip `soc`: the CANN install's component versions (the
/// opp's from ASCEND_OPP_PATH when set), one entry per custom operator
/// package, `<Version= or k_unversioned_package>/<digest of its
/// k_package_compiled_parts>`, and the packages' load orders, the tuning
/// banks' digests and Python's major.minor. A package's entry is its prefix
/// and its directory's name, with '_' for each character an extra key cannot
/// hold, cut to 40 characters, and ".2", ".3"… when taken already. An entry
/// named in `given_extra` is not detected (the explicit value wins; e.g.
/// extra.python=3.9 skips running python3, extra.cann.opp_vendor.X=V skips
/// digesting X). `usage` error naming `toolchain=` (or `extra.python=`) and
/// what to set when detection fails. Appends the inputs to `inputs` when not
/// null.
Result<DetectedToolchain> detect_toolchain(const DetectContext& context, const std::string& soc,
                                           const std::map<std::string, std::string>& given_extra,
                                           std::vector<ScenarioInput>* inputs);

/// An explicit toolchain=`given` checked against the install that
/// toolchain=auto would read (store/cann_install installed_toolchain()):
/// when that install's version differs, the not-keyed input
/// k_input_installed_toolchain with it and the file it was read from;
/// std::nullopt when they agree or no install is readable. The key keeps
/// `given`. Reads at most two version files.
std::optional<ScenarioInput> check_explicit_toolchain(const DetectContext& context, const std::string& given);

/// The one-line note for a disagreement check_explicit_toolchain() found:
/// both versions, where the installed one was read, and what to do.
std::string explicit_toolchain_note(const std::string& given, const ScenarioInput& installed);

/// The driver version, for --explain only (keyed = false): the `Version=` of
/// `context.driver_version_file`, or "not installed".
ScenarioInput driver_input(const DetectContext& context);

}  // namespace opcache::store
