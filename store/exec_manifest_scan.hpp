// The local exec manifest of a hit, read without building a JSON tree. Every
// warm `opcache exec` reads the manifest of its command key before anything
// else; parsing its few kilobytes with nlohmann::json cost about a third of a
// hit's own work (callgrind). This scanner reads the shape our writer
// produces (exec_manifest_to_local_json) into the same ExecManifest, with the
// same checks of every build (vet_manifest_build), and gives up on anything
// else so that the strict parser decides.
#pragma once

#include <optional>
#include <string_view>

#include "store/exec_manifest.hpp"

namespace opcache::store {

/// `text` as parse_local_exec_manifest reads it, when it has the simple shape
/// our writer produces (strings without escapes, each member once, no other
/// member); std::nullopt whenever it cannot vouch for the result — other
/// syntax, an unknown or repeated member, a check that fails, text over
/// k_max_manifest_bytes — and the caller then parses strictly (which gives
/// the precise error). Thread-safe.
std::optional<ExecManifest> scan_local_exec_manifest(std::string_view text);

}  // namespace opcache::store
