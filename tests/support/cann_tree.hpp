// CANN install trees, tuning banks and stand-in programs (npu-smi, python3)
// laid out as the vendor does (../shared/docs/ascend-formats.md, "What
// decides which toolchain compiled a kernel"), for the tests of detected
// scenarios (store/scenario_detect, `opcache scenario`).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace opcache::test {

/// A toolkit root such as /usr/local/Ascend/ascend-toolkit/8.0.RC2.
struct CannTree {
  std::filesystem::path root;

  /// Component → version written as `<root>/<component>/version.info`
  /// ("toolkit" is `<root>/version.info`).
  std::map<std::string, std::string> versions{
      {"compiler", "8.0.RC2"}, {"opp", "8.0.RC2"}, {"runtime", "8.0.RC2"}, {"opp_kernel", "8.0.RC2"}};

  /// Writes the version files (as the vendor does: Version= between other
  /// lines, among them a timestamp), a built-in fusion strategy bank under
  /// compiler/data/fusion_strategy/built-in, and a few files of the kind an
  /// install holds (an op implementation, a library). Returns `root`.
  const std::filesystem::path& write() const;

  /// Rewrites one component's version.info with `version`.
  void set_version(const std::string& component, const std::string& version) const;

  /// Installs a custom operator package as `<root>/opp/vendors/<name>`
  /// (write_custom_op_package) and appends `name` to the `load_priority` of
  /// `<root>/opp/vendors/config.ini`, as the package's installer does.
  /// Returns the package directory.
  std::filesystem::path add_vendor(const std::string& name, const std::string& version = "1.0.0") const;

  /// Rewrites `<root>/opp/vendors/config.ini` with `load_priority=<priority>`.
  void set_vendor_priority(const std::string& priority) const;
};

/// Writes an OPP (operator package) at `directory`, such as the one
/// ASCEND_OPP_PATH names: its version.info with `version` and a built-in op
/// implementation. Returns `directory`.
std::filesystem::path write_opp(const std::filesystem::path& directory, const std::string& version);

/// Writes a custom operator package at `directory` as msopgen's installer
/// lays one out (vendors/<name>): op_impl/ (the AddCustom op's kernel source
/// and Python entry, its ops-info config, op_tiling's library), op_proto/,
/// and, which no compile loads, framework/, op_api/ and bin/; with a
/// version.info holding `Version=<version>` among other lines, or none when
/// `version` is empty. Returns `directory`.
std::filesystem::path write_custom_op_package(const std::filesystem::path& directory,
                                              const std::string& version = "1.0.0");

/// The kernel source of the AddCustom op in a package written by
/// write_custom_op_package: the file an operator developer edits.
std::filesystem::path custom_op_kernel_source(const std::filesystem::path& package);

/// Writes a custom op tuning bank for `soc` below `directory` (the files
/// AOE writes: <soc>/… json knowledge files) and returns the bank directory.
std::filesystem::path write_tune_bank(const std::filesystem::path& directory, const std::string& soc);

/// The vendor's `npu-smi info` box table for cards named `chips` ("910B1"…).
std::string npu_smi_table(const std::vector<std::string>& chips);

/// Writes an executable `npu-smi` into `bin` that prints npu_smi_table(chips)
/// for `npu-smi info` and appends a line to `runs` each time it runs.
void write_npu_smi(const std::filesystem::path& bin, const std::vector<std::string>& chips,
                   const std::filesystem::path& runs);

/// Writes an executable `python3` into `bin` that prints `major_minor`
/// (e.g. "3.8") whatever its arguments, and appends a line to `runs`
/// (when not empty) each time it runs.
void write_python3(const std::filesystem::path& bin, const std::string& major_minor,
                   const std::filesystem::path& runs = {});

}  // namespace opcache::test
