// Real kernel files for tests: C sources compiled by the system compiler
// into real .o files, with MindSpore-style .json and .info companions.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace opcache::test {

/// A compiled kernel triple on disk.
struct KernelTriple {
  std::string stem;                   ///< e.g. "square_12484080525657478220_2"
  std::filesystem::path object;       ///< <stem>.o (real ELF from cc -c)
  std::filesystem::path metadata;     ///< <stem>.json (kernel metadata, sha256 of the .o)
  std::filesystem::path info;         ///< <stem>.info (the compile job)
  std::string descriptor_json;        ///< opcache descriptor for it
  std::vector<std::filesystem::path> files() const { return {object, metadata, info}; }
};

/// Compiles `source` (C) with `cc -c -O1` into `dir/name.o`; throws on failure.
std::filesystem::path compile_object(const std::filesystem::path& dir, const std::string& name,
                                     const std::string& source);

/// Builds a triple for an elementwise op specialised to `length` elements;
/// different (op, length) pairs give different objects and descriptors.
KernelTriple make_kernel(const std::filesystem::path& dir, const std::string& op, int length);

/// The scenario spec most tests use.
inline constexpr const char* k_test_scenario = "device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1";

/// k_test_scenario in the inference phase: a second scenario, whose keys
/// differ from k_test_scenario's for the same descriptor.
inline constexpr const char* k_infer_scenario = "device=single,phase=infer,toolchain=8.0.RC2,soc=Ascend910B1";

/// A well-formed key (64 lowercase hex digits) that no test stores.
inline constexpr const char* k_absent_key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A well-formed key made of `digit` (a lowercase hex digit) 64 times, for
/// tests that need several distinct keys without storing anything.
inline std::string uniform_key(char digit) { return std::string(64, digit); }

}  // namespace opcache::test
