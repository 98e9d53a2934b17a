// Exec manifests: what earlier builds of one exec command read (ccache's
// direct-mode manifests, for any compiler). A command key (the descriptor
// with exec's command member, keyed as usual) names one manifest; the
// manifest lists up to `k_max_manifest_builds` builds, each the inputs one
// traced build observed (path and digest; paths found absent; directories
// listed) and the files it wrote under --out. A lookup takes the first build
// whose every input still has its digest; that build's entry key is derived
// from the command descriptor and those inputs (exec_entry_key), not taken
// from a manifest that came from elsewhere, so a manifest from anywhere can
// point a lookup only at the entry that belongs to the files as they are.
// Only a build with a `seen` is taken at its word: `seen` is written by this
// machine alone, for a build whose entry it derived itself (see ManifestBuild).
// docs/formats.md "Exec manifests" is the byte-level contract.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::store {

/// Version of the manifest's layout (its "version" member).
inline constexpr int k_exec_manifest_version = 1;
/// At most this many builds per manifest; the least recently built are dropped.
inline constexpr std::size_t k_max_manifest_builds = 32;
/// A manifest text larger than this is refused (it comes from remotes too).
inline constexpr std::size_t k_max_manifest_bytes = 8 * 1024 * 1024;

/// One observed input: where (an absolute path, or one starting "{out}/" or
/// "{base}/"), and what was there: "sha256:<hex>" of a file's bytes,
/// "absent" for a path looked up and not found, "dir:<hex>" for a listed
/// directory (the SHA-256 of its entries' names, one per line, sorted,
/// those in `ignored` left out).
struct ObservedInput {
  std::string path;
  std::string state;
  /// For a listed directory: the names the build itself created there (its
  /// outputs, Python's __pycache__), left out of the listing's digest
  /// whether they exist or not; sorted. Empty otherwise.
  std::vector<std::string> ignored;
  bool operator==(const ObservedInput&) const = default;
};

/// One traced build of the command.
struct ManifestBuild {
  std::vector<ObservedInput> inputs;  ///< sorted by path, each path once
  std::vector<std::string> outputs;   ///< member names the build wrote into --out, sorted
  std::string entry;                  ///< the entry key it was stored under (checked, not trusted)
  std::string created;                ///< RFC 3339 UTC, for display
  /// This machine's only: by input path, the identity (observed_inputs'
  /// identity_text) a file input had here when its digest was taken and
  /// had not changed for DigestCache::kTooNewNs. A lookup that finds a file
  /// with that identity takes its digest as still true without reading it
  /// (ccache's manifest file stats). Kept in the local manifest file, never
  /// sent to a remote nor read from one. Written only for a build whose
  /// `entry` this machine derived from `inputs` (it built it, or a hit
  /// checked it), so a build with a `seen` has an entry that needs no
  /// second derivation.
  std::map<std::string, std::string> seen;
};

/// The manifest of one command key, most recent build first.
struct ExecManifest {
  std::string command_key;
  std::vector<ManifestBuild> builds;
};

/// The manifest as JSON text (docs/formats.md "Exec manifests"): compact,
/// members in a fixed order; the form that travels (no `seen`).
std::string exec_manifest_to_json(const ExecManifest& manifest);

/// The manifest as this machine's cache directory keeps it: the travelling
/// form with each build's `seen`.
std::string exec_manifest_to_local_json(const ExecManifest& manifest);

/// Parses a manifest from any source (a local file, a remote). Refuses text
/// over k_max_manifest_bytes, another version, a command key that is not 64
/// lowercase hex, malformed paths (relative, with "..", a NUL) or states, and
/// more than k_max_manifest_builds builds; `corrupt` error naming `origin`.
/// Any `seen` in the text is dropped: it is trusted only from this machine.
Result<ExecManifest> parse_exec_manifest(std::string_view text, const std::string& origin);

/// parse_exec_manifest of a manifest this machine wrote
/// (exec_manifest_to_local_json), keeping each build's `seen`; a `seen`
/// that is malformed or names a path that is not one of the build's file
/// inputs is dropped, not refused. Text of the shape this machine writes is
/// read by scan_local_exec_manifest, without a JSON tree; anything else by
/// the strict parser.
Result<ExecManifest> parse_local_exec_manifest(std::string_view text, const std::string& origin);

/// Checks one build as parse_exec_manifest does (its entry, outputs and
/// inputs; `corrupt` error saying what is wrong, without a location) and
/// clears its `seen` when that names a path that is not one of its file
/// inputs (a hint: dropped, never refused). For readers of other forms of
/// the same manifest (exec_manifest_scan.hpp).
Status vet_manifest_build(ManifestBuild& build);

/// `manifest` with `build` first: a build with the same entry is replaced,
/// and only the k_max_manifest_builds most recent are kept.
ExecManifest add_manifest_build(ExecManifest manifest, ManifestBuild build);

/// Both manifests' builds in one (those of `newer` first, then those of
/// `older` whose entries `newer` lacks), bounded like add_manifest_build. A
/// build of `newer` takes the `seen` of `older`'s build of the same entry
/// and the same inputs for the paths its own `seen` lacks.
/// The command keys must be equal (`usage` error otherwise).
Result<ExecManifest> merge_exec_manifests(const ExecManifest& newer, const ExecManifest& older);

/// The digest that stands for `inputs` in an entry's descriptor: SHA-256 of
/// their canonical JSON ([[path, state], ...]).
std::string observed_inputs_digest(const std::vector<ObservedInput>& inputs);

}  // namespace opcache::store
