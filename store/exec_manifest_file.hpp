// The exec manifests of a local store: one file per command key,
// manifests/<first two hex digits>/<command key>.json (docs/formats.md
// "Exec manifests"). Written whole by rename, so readers see the old or the
// new file; two writers racing lose one's build, which costs a later miss,
// never a wrong hit.
#pragma once

#include <optional>
#include <string>

#include "opcache/result.hpp"
#include "store/cache_root.hpp"
#include "store/exec_manifest.hpp"

namespace opcache::store {

/// The manifest of `command_key` in the store at `layout`, or std::nullopt
/// when there is none. A file that is not a valid manifest of that key is a
/// `corrupt` error naming it (the caller may ignore it: it is rewritten by
/// the next build).
Result<std::optional<ExecManifest>> read_exec_manifest(const StoreLayout& layout, const std::string& command_key);

/// Creates the directory the manifest of `command_key` is written to, for a
/// caller with time to spare before it writes (exec while its command
/// runs); a failure is left for merge_into_exec_manifest, which meets it.
void prepare_exec_manifest_directory(const StoreLayout& layout, const std::string& command_key);

/// Merges `manifest` into the stored manifest of its command key (its builds
/// first; a missing or corrupt stored file counts as empty) and writes the
/// result without fsync (a manifest lost to a power cut costs a rebuild).
/// Returns what was written.
Result<ExecManifest> merge_into_exec_manifest(const StoreLayout& layout, const ExecManifest& manifest);

}  // namespace opcache::store
