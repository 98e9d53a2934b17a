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
};

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
