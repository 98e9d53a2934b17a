// What `opcache exec` keys on besides the descriptor file and the scenario:
// the command line (paths under --out normalised), the content of the files
// it names and of those --input declares, the compiler's fingerprint and the
// environment variables that change what a compiler does. They become the
// member "exec" of the hashed descriptor (docs/formats.md "What exec keys
// on"), so the key formula itself is unchanged.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/environment.hpp"
#include "base/file_digest.hpp"
#include "opcache/opcache.hpp"
#include "store/exec_manifest.hpp"

namespace opcache::store {

/// Version of the member's layout; part of what is hashed. Version 2: the
/// files the command reads are observed (exec manifests), not taken from
/// its arguments; paths below base_dir are keyed as {base}; stdin is keyed.
/// Version 3: the same layout, from a tracer that observes /dev/shm and paths
/// through /proc/<pid>/cwd, root and fd/<n>, takes a file opened O_PATH as
/// read and goes blind on io_uring (version 2's manifests may lack inputs
/// reached those ways).
inline constexpr int k_exec_key_version = 3;

/// One `opcache exec` invocation, as far as its key is concerned.
struct ExecKeyRequest {
  std::vector<std::string> command;  ///< the compiler command line (argv[0] first)
  std::filesystem::path out;         ///< --out: files below it are outputs, never inputs
  std::vector<std::string> inputs;   ///< --input FILE|DIR, as given
  ExecKeyPolicy policy;              ///< compiler_check, exec_env and base_dir
  std::filesystem::path cann_root;   ///< see cann_root_of; empty: none
  /// "sha256:<hex>" of the command's standard input when it is data (a file
  /// or a pipe), std::nullopt when it is a terminal or /dev/null.
  std::optional<std::string> stdin_digest;
};

/// The member "exec" for `request`: {"version","argv","compiler","inputs",
/// "env"} and "stdin" when keyed, as docs/formats.md describes. File digests come from
/// `cache`; variables from `env`. Errors: `usage` when the compiler is not
/// found, an --input is missing, an argument is not UTF-8 or the
/// compiler_check command fails; `io` when a file cannot be read.
Result<nlohmann::json> exec_key_member(const ExecKeyRequest& request, const base::DigestCache& cache,
                                       const base::EnvLookup& env);

/// [path as given ({base} below `base_dir`), digest] for each of `inputs`
/// (files and directories), sorted, as exec's member "inputs" holds them: a
/// file's SHA-256, or "tree:" and the digest of a directory's files
/// (base::tree_sha256). For get_or_build's declared inputs too. `usage`
/// error naming a missing input or one that is neither a file nor a
/// directory; `io` when one cannot be read.
Result<nlohmann::json> declared_input_digests(const std::vector<std::string>& inputs,
                                              const std::filesystem::path& base_dir, const base::DigestCache& cache);

/// `descriptor` (the parsed descriptor) with the member "exec" set to
/// `member`. `usage` error when it is not a JSON object or already has a
/// member "exec" (reserved for opcache exec); `origin` names it.
Result<nlohmann::json> descriptor_with_exec_member(nlohmann::json descriptor, const nlohmann::json& member,
                                                   const std::string& origin);

/// The directories whose paths exec keys relative to them, each by a marker.
struct PathFrame {
  std::filesystem::path out;        ///< --out: "{out}"
  std::filesystem::path base_dir;   ///< the base_dir setting: "{base}"; empty: none
  std::filesystem::path cann_root;  ///< the CANN install in use (cann_root_of): "{cann}"; empty: none
};

/// The CANN install a command uses, as CANN's set_env.sh announces it:
/// ASCEND_TOOLKIT_HOME, else ASCEND_HOME_PATH, when absolute; lexically
/// normal, without a trailing '/'; empty when neither is set.
std::filesystem::path cann_root_of(const base::EnvLookup& env);

/// `path` (absolute and lexically normal) as keyed: "{out}/…" below `out`
/// (made absolute), else "{cann}/…" below the CANN root, else "{base}/…"
/// below base_dir, else as it is. The directories themselves become the
/// bare markers. So rank directories, checkouts and CANN installs at other
/// places key alike; what is there is keyed by digests.
std::string keyed_path(const std::string& path, const PathFrame& frame);

/// The inverse of keyed_path; std::nullopt for a "{base}" or "{cann}" path
/// when this frame has no such directory (the manifest came from a machine
/// with one).
std::optional<std::string> unkeyed_path(const std::string& path, const PathFrame& frame);

/// The descriptor of the entry one traced build stored: `command_descriptor`
/// (a descriptor whose member "exec" is exec_key_member's) with
/// exec.observed set to observed_inputs_digest(inputs). Its key, with the
/// command's scenario, is the entry's key. `usage` error when the descriptor
/// has no member "exec" object.
Result<nlohmann::json> exec_entry_descriptor(nlohmann::json command_descriptor, const std::vector<ObservedInput>& inputs);

/// The command key of an entry that exec stored for observed inputs: the key
/// of its descriptor without exec.observed, in `scenario`; std::nullopt when
/// the descriptor has no member exec.observed (any other entry).
std::optional<std::string> exec_command_key_of(const nlohmann::json& descriptor, const nlohmann::json& scenario);

}  // namespace opcache::store
