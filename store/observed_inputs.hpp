// What a traced build read and wrote, as exec manifests record it, and the
// check a later lookup makes of it (docs/formats.md "Exec manifests"):
// inputs are the files the process tree read that existed before it touched
// them (their digests), the paths it looked up and did not find, and the
// directories it listed (their names); outputs are the files it created or
// wrote directly in --out. Files the tree created itself (a compiler's
// temporary .s) are neither, and /proc, /sys and /dev never enter.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/file_digest.hpp"
#include "opcache/result.hpp"
#include "store/exec_key.hpp"
#include "store/exec_manifest.hpp"
#include "trace/process_tracer.hpp"

namespace opcache::store {

/// One traced build, classified.
struct ObservedBuild {
  std::vector<ObservedInput> inputs;           ///< keyed paths, sorted, each once
  std::vector<std::filesystem::path> outputs;  ///< regular files written directly in --out that exist now, sorted
  /// Why the build's result must not be stored (an input changed while the
  /// command ran, an output in a subdirectory of --out, a blind trace), or
  /// std::nullopt.
  std::optional<std::string> uncacheable;
  /// ManifestBuild::seen of the file inputs whose identity had settled.
  std::map<std::string, std::string> seen;
};

/// A file's identity as ManifestBuild::seen records it: "size mtime ctime
/// inode device" (times in nanoseconds).
std::string identity_text(const trace::FileIdentity& identity);

/// Whether a file whose identity is `identity` last changed longer than
/// DigestCache::kTooNewNs ago: a digest taken now may be remembered by it.
bool identity_settled(const trace::FileIdentity& identity);

/// Whether the programs a build ran (and the interpreters the kernel loaded
/// for them) are inputs: digested under compiler_check content and mtime;
/// left out under none, string: and command:, whose fingerprint stands for
/// the toolchain (files the programs open and read are inputs either way,
/// except the compiler itself: a script's interpreter reads the script).
struct ProgramInputs {
  bool digested = true;
  std::vector<std::string> compiler;  ///< the paths argv[0] resolves to (as found, and with symlinks resolved)
};

/// Classifies `outcome`'s events and digests the inputs as they are now,
/// checking that each file read still has the identity it had when first
/// read (else the build is uncacheable: its digest would not be what the
/// command saw). `io` error when an input cannot be read.
Result<ObservedBuild> observe_build(const trace::TraceOutcome& outcome, const PathFrame& frame,
                                    const base::DigestCache& cache, const ProgramInputs& programs = {});

/// The first input of `build` whose state differs from the files as they
/// are now, as a short phrase for a person ("k.h changed", "inc1/k.h now
/// exists", "src/ was listed with other files", "{base}/k.h: no base_dir
/// set"); std::nullopt when every input matches (a hit). Paths in the phrase
/// are relative to the working directory when below it. A file input whose
/// identity is the one `build.seen` records is not read; another is
/// digested through `cache`, and when it matches and its identity has
/// settled, that identity is added to `*seen_now` (when given) for the
/// caller to record.
std::optional<std::string> first_changed_input(const ManifestBuild& build, const PathFrame& frame,
                                               const base::DigestCache& cache,
                                               std::map<std::string, std::string>* seen_now = nullptr);

}  // namespace opcache::store
