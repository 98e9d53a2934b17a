#include "tests/support/exec_manifests.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "base/sha256.hpp"
#include "store/bundle_writer.hpp"
#include "store/exec_key.hpp"
#include "store/exec_manifest_file.hpp"
#include "store/key.hpp"
#include "tests/support/bundle_inputs.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test {

namespace fs = std::filesystem;

std::string made_up_command_key(const std::string& seed) {
  return base::sha256_hex("made-up command key: " + seed);
}

store::ExecManifest exec_manifest_of(const std::string& command_key, const std::vector<std::string>& entries) {
  store::ExecManifest manifest;
  manifest.command_key = command_key;
  for (const auto& entry : entries) {
    store::ObservedInput input;
    input.path = "/src/input.c";
    input.state = "sha256:" + base::sha256_hex(entry);
    store::ManifestBuild build;
    build.inputs.push_back(input);
    build.outputs = {"out.o"};
    build.entry = entry;
    build.created = "2026-12-01T10:00:00Z";
    manifest.builds.push_back(std::move(build));
  }
  return manifest;
}

bool same_manifest(const store::ExecManifest& a, const store::ExecManifest& b) {
  return store::exec_manifest_to_json(a) == store::exec_manifest_to_json(b);
}

std::vector<std::string> entries_of(const store::ExecManifest& manifest) {
  std::vector<std::string> entries;
  for (const auto& build : manifest.builds) {
    entries.push_back(build.entry);
  }
  return entries;
}

ExecStore::ExecStore(const fs::path& root) {
  store::StoreOptions options;
  options.root = root;
  options.warn = warnings.sink();
  auto opened = store::LocalStore::open(std::move(options));
  REQUIRE_MESSAGE(opened.ok(), (opened.ok() ? "" : opened.error().message()));
  local = std::move(opened).value();
}

StoredExecEntry store_exec_entry(store::LocalStore& local, const fs::path& dir, int command,
                                 const std::string& variant) {
  const std::string name = "command_" + std::to_string(command) + "_" + base::sha256_hex(variant).substr(0, 8);
  const fs::path home = dir / name;
  write_text(home / "out.o", "object code of " + name + std::string(100, 'x'));
  const nlohmann::json command_descriptor = {
      {"op_type", "cc"},
      {"exec", {{"version", 1}, {"argv", {"cc", "-c", "command_" + std::to_string(command) + ".c"}}}}};
  store::ObservedInput input;
  input.path = "/src/command_" + std::to_string(command) + ".c";
  input.state = "sha256:" + base::sha256_hex(variant);
  auto descriptor = store::exec_entry_descriptor(command_descriptor, {input});
  REQUIRE_MESSAGE(descriptor.ok(), (descriptor.ok() ? "" : descriptor.error().message()));
  store::BundleInput bundle;
  bundle.descriptor = *descriptor;
  bundle.scenario = scenario_json(k_test_scenario);
  bundle.members.push_back({"out.o", home / "out.o", ""});
  auto put = local.put(bundle, ReplacePolicy::keep_existing);
  REQUIRE_MESSAGE(put.ok(), (put.ok() ? "" : put.error().message()));

  StoredExecEntry stored;
  stored.entry_key = put->key;
  const auto command_key = store::exec_command_key_of(*descriptor, bundle.scenario);
  REQUIRE(command_key.has_value());
  stored.command_key = *command_key;
  CHECK(stored.command_key == store::derive_key(command_descriptor, bundle.scenario).value());
  store::ManifestBuild build;
  build.inputs.push_back(input);
  build.outputs = {"out.o"};
  build.entry = stored.entry_key;
  build.created = "2026-12-01T10:00:00Z";
  stored.manifest.command_key = stored.command_key;
  stored.manifest.builds.push_back(std::move(build));
  auto merged = store::merge_into_exec_manifest(local.layout(), stored.manifest);
  REQUIRE_MESSAGE(merged.ok(), (merged.ok() ? "" : merged.error().message()));
  return stored;
}

}  // namespace opcache::test
