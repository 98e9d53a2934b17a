// What `opcache exec` keys on besides the descriptor file and the scenario:
// the command line (paths under --out normalised), the content of the files
// it names and of those --input declares, the compiler's fingerprint and the
// environment variables that change what a compiler does. They become the
// member "exec" of the hashed descriptor (docs/formats.md "What exec keys
// on"), so the key formula itself is unchanged.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/environment.hpp"
#include "base/file_digest.hpp"
#include "opcache/opcache.hpp"

namespace opcache::cli {

/// Version of the member's layout; part of what is hashed.
inline constexpr int k_exec_key_version = 1;

/// One `opcache exec` invocation, as far as its key is concerned.
struct ExecKeyRequest {
  std::vector<std::string> command;  ///< the compiler command line (argv[0] first)
  std::filesystem::path out;         ///< --out: files below it are outputs, never inputs
  std::vector<std::string> inputs;   ///< --input FILE|DIR, as given
  ExecKeyPolicy policy;              ///< compiler_check and exec_env
};

/// The member "exec" for `request`: {"version","argv","compiler","files",
/// "inputs","env"} as docs/formats.md describes. File digests come from
/// `cache`; variables from `env`. Errors: `usage` when the compiler is not
/// found, an --input is missing, an argument is not UTF-8 or the
/// compiler_check command fails; `io` when a file cannot be read.
Result<nlohmann::json> exec_key_member(const ExecKeyRequest& request, const base::DigestCache& cache,
                                       const base::EnvLookup& env);

/// `descriptor_text` (a JSON object) with the member "exec" set to `member`,
/// as JSON text. `usage` error when the text is not a JSON object or already
/// has a member "exec" (reserved for opcache exec); `origin` names it.
Result<std::string> descriptor_with_exec_member(std::string_view descriptor_text, const nlohmann::json& member,
                                                const std::string& origin);

}  // namespace opcache::cli
