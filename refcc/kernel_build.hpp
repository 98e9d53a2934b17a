// refcc — compiling one prepared op: through Store::get_or_build (or without
// the cache), then publishing the kernel's triple for this device.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "opcache/opcache.hpp"
#include "refcc/compile.hpp"
#include "refcc/kernel_files.hpp"
#include "refcc/op_registry.hpp"

namespace opcache::refcc {

/// Everything a compile needs besides the op. The store is not owned.
struct BuildContext {
  Compiler compiler;
  Scenario scenario;
  std::filesystem::path out_dir;
  int device_id = 0;
  Store* store = nullptr;  ///< null: --no-cache (build; never read or write the cache)
};

/// What happened to one kernel.
struct KernelOutcome {
  std::string key;
  KernelNames names;
  std::string stem;                          ///< names.stem(device_id)
  BuildSource source = BuildSource::built;   ///< bypassed for --no-cache
  std::int64_t build_ms = 0;                 ///< 0 on a hit
  std::vector<std::filesystem::path> files;  ///< .o, .json, .info in out_dir
  std::string note;
};

/// The opcache key of `prepared` in ctx's scenario: through the store when
/// there is one (its volatile-field settings apply), else with the default
/// volatile fields (OPCACHE_VOLATILE_FIELDS honoured). Pure.
Result<std::string> kernel_key(const PreparedOp& prepared, const BuildContext& ctx);

/// Generates, compiles and writes the neutral triple of `prepared` into `dir`.
Status build_neutral_triple(const PreparedOp& prepared, const KernelNames& names, const BuildContext& ctx,
                            const std::filesystem::path& dir);

/// Gets or builds the kernel with key `key` and publishes <stem>.{o,json,info}
/// in ctx.out_dir. Compiler failures are `build_failed` with the compiler's
/// standard error. Thread-safe for distinct keys (two threads publishing the
/// same stem at once would race on the same files).
Result<KernelOutcome> build_kernel(const PreparedOp& prepared, const std::string& key, const BuildContext& ctx);

/// "hit", "built" or "bypassed".
const char* source_name(BuildSource source) noexcept;

}  // namespace opcache::refcc
