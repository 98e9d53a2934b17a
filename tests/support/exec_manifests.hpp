// Exec manifests for the tests of their travels (tests/remote/
// test_exec_manifests_remote.cpp, tests/server/test_exec_manifests_server.cpp):
// manifests made up for a command key, and entries stored the way
// `opcache exec` stores them, with their manifest in the local store.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "store/exec_manifest.hpp"
#include "store/local_store.hpp"
#include "tests/support/remote_fixtures.hpp"

namespace opcache::test {

/// A command key made up from `seed` (64 lowercase hex; not a real command's).
std::string made_up_command_key(const std::string& seed);

/// A manifest of `command_key` with one build per entry of `entries`, most
/// recent first: build i read one file, "/src/input.c", whose digest is that
/// of the entry's key, and wrote "out.o".
store::ExecManifest exec_manifest_of(const std::string& command_key, const std::vector<std::string>& entries);

/// Whether both manifests are the same, build for build (their JSON text).
bool same_manifest(const store::ExecManifest& a, const store::ExecManifest& b);

/// The entries the builds of `manifest` name, in order.
std::vector<std::string> entries_of(const store::ExecManifest& manifest);

/// A local store for the tests, its warnings kept in a thread-safe log (the
/// background uploader warns from its thread).
struct ExecStore {
  explicit ExecStore(const std::filesystem::path& root);

  store::LocalStore& operator*() { return *local; }
  store::LocalStore* operator->() { return local.get(); }

  WarningLog warnings;
  std::unique_ptr<store::LocalStore> local;
};

/// An entry stored as `opcache exec` stores one traced build, and its manifest.
struct StoredExecEntry {
  std::string entry_key;    ///< the entry's key (its descriptor has exec.observed)
  std::string command_key;  ///< the key of its descriptor without exec.observed
  store::ExecManifest manifest;  ///< what was merged into the local manifest: this one build
};

/// Stores in `local` the entry of command `command` (its descriptor's member
/// "exec" names a command line of its own) built from the input whose
/// content is `variant` (its members are small files under `dir`), and
/// merges its build into the local manifest of the command key (as exec does
/// after a build). REQUIREs every step.
StoredExecEntry store_exec_entry(store::LocalStore& local, const std::filesystem::path& dir, int command,
                                 const std::string& variant);

}  // namespace opcache::test
