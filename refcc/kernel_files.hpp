// refcc — the files of a kernel in MindSpore kernel_meta style: <stem>.o (the
// object), <stem>.json (runtime metadata with the object's SHA-256) and
// <stem>.info (the compile job, wrapping the op descriptor).
//
// The cache holds one device-neutral triple per key, named <func>_<hash>.*;
// publishing it for a device writes <func>_<hash>_<device id>.* with the
// device-dependent fields set. The object bytes are the same for every
// device, which is why all ranks can share one cache entry.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"
#include "opcache/scenario.hpp"

namespace opcache::refcc {

struct PreparedOp;

/// The names of one kernel.
struct KernelNames {
  std::string func_name;     ///< "mat_mul"
  std::string hash;          ///< decimal value of the key's first 16 hex digits
  std::string neutral_stem;  ///< "<func>_<hash>": the files in the cache
  std::string symbol;        ///< "<func>_<hash>__kernel0": the kernel function in the .o

  /// "<func>_<hash>_<device id>", e.g. "square_12484080525657478220_2".
  std::string stem(int device_id) const;
};

/// Names for a kernel of `func_name` whose opcache key is `key` (64 hex digits).
KernelNames kernel_names(std::string_view func_name, std::string_view key);

/// The .json metadata of a kernel whose object has SHA-256 `object_sha256`.
nlohmann::json kernel_metadata(const KernelNames& names, const PreparedOp& prepared, const std::string& object_sha256);

/// The scenario as the JSON object that is hashed into keys (the value of
/// scenario_canonical_json). Pure.
nlohmann::json scenario_json(const Scenario& scenario);

/// The .info compile job: MindSpore's job_content (SocInfo, op_list with Data
/// nodes and the op node) plus refcc_descriptor and refcc_scenario, the exact
/// descriptor and scenario the key was derived from.
nlohmann::json compile_job(const KernelNames& names, const PreparedOp& prepared, const Scenario& scenario);

/// Writes <neutral_stem>.json and .info into `dir`, next to the already
/// compiled <neutral_stem>.o.
Status write_neutral_metadata(const std::filesystem::path& dir, const KernelNames& names, const PreparedOp& prepared,
                              const Scenario& scenario);

/// Publishes the neutral triple in `stage` into `out_dir` for `device_id`:
/// <stem>.o (renamed, bytes unchanged), then <stem>.info, then <stem>.json
/// (last: MindSpore takes an existing .json as a complete kernel), each
/// replacing any older file atomically. `corrupt` when the .json's sha256 is
/// not the SHA-256 of the .o. Returns the three paths (.o, .json, .info).
Result<std::vector<std::filesystem::path>> publish_kernel(const std::filesystem::path& stage,
                                                          const std::filesystem::path& out_dir,
                                                          const KernelNames& names, int device_id);

}  // namespace opcache::refcc
