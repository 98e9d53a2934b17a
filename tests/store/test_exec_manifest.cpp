// store/exec_manifest and store/exec_manifest_file: the manifest format
// (docs/formats.md "Exec manifests"), its limits, merging, the local files,
// and the key vector of exec.observed.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "store/exec_key.hpp"
#include "store/exec_manifest.hpp"
#include "store/exec_manifest_file.hpp"
#include "store/key.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::ErrorCode;
using opcache::store::ExecManifest;
using opcache::store::ManifestBuild;
using opcache::store::ObservedInput;

namespace exec_manifest_test {

const std::string k_command_key(64, 'c');

std::string hex_of(char digit) { return std::string(64, digit); }

ManifestBuild build_with(char entry_digit, std::vector<ObservedInput> inputs) {
  return ManifestBuild{std::move(inputs), {"k.o"}, hex_of(entry_digit), "2026-11-28T10:00:00Z", {}};
}

ExecManifest sample() {
  ExecManifest manifest{k_command_key, {}};
  manifest.builds.push_back(build_with('1', {{"/usr/include/stdio.h", "sha256:" + hex_of('a'), {}},
                                             {"{base}/inc1/k.h", "absent", {}},
                                             {"{base}/src", "dir:" + hex_of('b'), {"__pycache__", "k.o"}},
                                             {"{out}/prev.o", "sha256:" + hex_of('d'), {}}}));
  return manifest;
}

// (the test cases below stay in namespace exec_manifest_test: the unity build shares helpers' names)

TEST_CASE("store::exec manifest round-trips through its JSON text") {
  const auto text = opcache::store::exec_manifest_to_json(sample());
  auto parsed = opcache::store::parse_exec_manifest(text, "m.json");
  REQUIRE(parsed.ok());
  CHECK(parsed->command_key == k_command_key);
  REQUIRE(parsed->builds.size() == 1);
  CHECK(parsed->builds[0].inputs == sample().builds[0].inputs);
  CHECK(parsed->builds[0].outputs == std::vector<std::string>{"k.o"});
  CHECK(opcache::store::exec_manifest_to_json(*parsed) == text);
}

TEST_CASE("store::exec manifest refuses another version, bad keys, paths, states and order, naming the problem") {
  auto refused = [](nlohmann::json document, const std::string& expected) {
    auto parsed = opcache::store::parse_exec_manifest(document.dump(), "m.json");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().code() == ErrorCode::corrupt);
    INFO(parsed.error().message());
    CHECK(parsed.error().message().find(expected) != std::string::npos);
  };
  const auto good = nlohmann::json::parse(opcache::store::exec_manifest_to_json(sample()));
  auto changed = [&good](const std::function<void(nlohmann::json&)>& change) {
    auto copy = good;
    change(copy);
    return copy;
  };
  refused(changed([](auto& d) { d["version"] = 2; }), "version 2 is not supported");
  refused(changed([](auto& d) { d["format"] = "other"; }), "not an exec manifest");
  refused(changed([](auto& d) { d["command_key"] = "ABC"; }), "command_key");
  refused(changed([](auto& d) { d["builds"][0]["inputs"][0][0] = "relative/k.h"; }), "not absolute and normal");
  refused(changed([](auto& d) { d["builds"][0]["inputs"][0][0] = "/a/../etc/passwd"; }), "not absolute and normal");
  refused(changed([](auto& d) { d["builds"][0]["inputs"][0][1] = "sha256:xyz"; }), "has state");
  refused(changed([](auto& d) { std::swap(d["builds"][0]["inputs"][0], d["builds"][0]["inputs"][1]); }), "sorted");
  refused(changed([](auto& d) { d["builds"][0]["outputs"][0] = "../k.o"; }), "without '/'");
  refused(changed([](auto& d) { d["builds"][0]["inputs"][1].push_back(nlohmann::json::array({"x"})); }),
          "only a listed directory");
  auto many = good;
  for (int i = 0; i < 40; ++i) {
    many["builds"].push_back(good["builds"][0]);
  }
  refused(many, "at most 32 builds");
  auto huge = opcache::store::parse_exec_manifest(std::string(opcache::store::k_max_manifest_bytes + 1, ' '), "m.json");
  CHECK(huge.error().message().find("over the limit") != std::string::npos);
}

TEST_CASE("store::exec manifest keeps the newest builds first, one per entry, at most 32") {
  ExecManifest manifest{k_command_key, {}};
  for (int i = 0; i < 40; ++i) {
    std::string entry = std::to_string(i);
    entry.resize(64, 'f');
    manifest = opcache::store::add_manifest_build(std::move(manifest), ManifestBuild{{}, {"k.o"}, entry, "", {}});
  }
  REQUIRE(manifest.builds.size() == opcache::store::k_max_manifest_builds);
  CHECK(manifest.builds.front().entry.substr(0, 2) == "39");
  // The same entry built again moves to the front instead of appearing twice.
  auto again = opcache::store::add_manifest_build(manifest, manifest.builds.back());
  CHECK(again.builds.size() == opcache::store::k_max_manifest_builds);
  CHECK(again.builds.front().entry == manifest.builds.back().entry);

  ExecManifest other{k_command_key, {build_with('9', {})}};
  auto merged = opcache::store::merge_exec_manifests(other, sample());
  REQUIRE(merged.ok());
  REQUIRE(merged->builds.size() == 2);
  CHECK(merged->builds[0].entry == hex_of('9'));
  ExecManifest foreign{hex_of('e'), {}};
  CHECK_FALSE(opcache::store::merge_exec_manifests(foreign, sample()).ok());
}

TEST_CASE("store::exec manifest files merge on write and refuse a manifest of another key") {
  opcache::test::TempDir temp;
  const opcache::store::StoreLayout layout(temp.path());
  REQUIRE(layout.create_directories().ok());
  CHECK_FALSE(opcache::store::read_exec_manifest(layout, k_command_key).value().has_value());
  REQUIRE(opcache::store::merge_into_exec_manifest(layout, sample()).ok());
  ExecManifest newer{k_command_key, {build_with('2', {})}};
  REQUIRE(opcache::store::merge_into_exec_manifest(layout, newer).ok());
  auto read = opcache::store::read_exec_manifest(layout, k_command_key);
  REQUIRE(read.ok());
  REQUIRE(read->has_value());
  REQUIRE((*read)->builds.size() == 2);
  CHECK((*read)->builds[0].entry == hex_of('2'));
  CHECK(std::filesystem::exists(temp.path() / "manifests" / "cc" / (k_command_key + ".json")));

  // A file holding another key's manifest is corrupt, not used.
  ExecManifest foreign{hex_of('e'), {}};
  opcache::test::write_text(temp.path() / "manifests" / "ee" / (hex_of('e') + ".json"),
                            opcache::store::exec_manifest_to_json(ExecManifest{k_command_key, {}}));
  auto wrong = opcache::store::read_exec_manifest(layout, hex_of('e'));
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().code() == ErrorCode::corrupt);
}

TEST_CASE("store::prepare_exec_manifest_directory makes the directory the manifest is then written to, and only that") {
  opcache::test::TempDir temp;
  const opcache::store::StoreLayout layout(temp.path());
  REQUIRE(layout.create_directories().ok());
  const auto directory = temp.path() / "manifests" / "cc";
  REQUIRE_FALSE(std::filesystem::exists(directory));
  opcache::store::prepare_exec_manifest_directory(layout, k_command_key);
  CHECK(std::filesystem::is_directory(directory));
  CHECK(std::filesystem::is_empty(directory));  // no manifest until one is merged
  opcache::store::prepare_exec_manifest_directory(layout, k_command_key);  // again: nothing changes
  REQUIRE(opcache::store::merge_into_exec_manifest(layout, sample()).ok());
  CHECK(std::filesystem::exists(directory / (k_command_key + ".json")));
}

TEST_CASE("store::exec entry keys: exec.observed is the digest of the inputs, and the command key comes back") {
  // The key vector of docs/formats.md.
  CHECK(opcache::store::observed_inputs_digest({{"/a/k.h", "absent", {}}}) ==
        "ce3ddcc5ae0d855f9ccf7c899f82d58be93c4adc655322f51d3a150efd1ca58b");
  const nlohmann::json command = {{"op_type", "Add"}, {"exec", {{"version", 2}, {"argv", {"gcc"}}}}};
  const nlohmann::json scenario = {{"device_mode", "single"}, {"phase", "infer"}, {"toolchain", "t"}, {"soc", "s"}};
  auto entry = opcache::store::exec_entry_descriptor(command, {{"/a/k.h", "absent", {}}});
  REQUIRE(entry.ok());
  CHECK((*entry)["exec"]["observed"] == opcache::store::observed_inputs_digest({{"/a/k.h", "absent", {}}}));
  auto command_key = opcache::store::exec_command_key_of(*entry, scenario);
  REQUIRE(command_key.has_value());
  CHECK(*command_key == opcache::store::derive_key(command, scenario).value());
  CHECK_FALSE(opcache::store::exec_command_key_of(command, scenario).has_value());
  // Other inputs, another entry key.
  auto other = opcache::store::exec_entry_descriptor(command, {{"/a/k.h", "sha256:" + hex_of('a'), {}}});
  CHECK(opcache::store::derive_key(*other, scenario).value() != opcache::store::derive_key(*entry, scenario).value());
}

TEST_CASE("store::keyed_path writes --out as {out}, a CANN install as {cann} and base_dir as {base}, and unkeyed_path reverses it") {
  const opcache::store::PathFrame frame{"/w/rank_0/kernel_meta", "/home/a/repo", "/usr/local/Ascend/ascend-toolkit/latest"};
  CHECK(opcache::store::keyed_path("/w/rank_0/kernel_meta/k.o", frame) == "{out}/k.o");
  CHECK(opcache::store::keyed_path("/home/a/repo/inc/k.h", frame) == "{base}/inc/k.h");
  CHECK(opcache::store::keyed_path("/home/a/repository/k.h", frame) == "/home/a/repository/k.h");
  CHECK(opcache::store::keyed_path("/usr/local/Ascend/ascend-toolkit/latest/opp/version.info", frame) ==
        "{cann}/opp/version.info");
  CHECK(opcache::store::keyed_path("/usr/include/stdio.h", {"/w/out", "", ""}) == "/usr/include/stdio.h");
  const opcache::store::PathFrame other{"/w/rank_7/kernel_meta", "/home/b/repo", "/home/b/Ascend/latest"};
  CHECK(opcache::store::unkeyed_path("{base}/inc/k.h", other).value() == "/home/b/repo/inc/k.h");
  CHECK(opcache::store::unkeyed_path("{out}/k.o", other).value() == "/w/rank_7/kernel_meta/k.o");
  CHECK(opcache::store::unkeyed_path("{cann}/opp/version.info", other).value() == "/home/b/Ascend/latest/opp/version.info");
  CHECK_FALSE(opcache::store::unkeyed_path("{base}/inc/k.h", {"/w/out", "", ""}).has_value());
  CHECK_FALSE(opcache::store::unkeyed_path("{cann}/x", {"/w/out", "/home/b/repo", ""}).has_value());
  // The install is named by CANN's own variables.
  auto env = [](const char* name) -> std::optional<std::string> {
    return std::string(name) == "ASCEND_HOME_PATH" ? std::optional<std::string>("/opt/Ascend/latest/") : std::nullopt;
  };
  CHECK(opcache::store::cann_root_of(env) == "/opt/Ascend/latest");
}

TEST_CASE("store::exec manifest: `seen` stays in the local file, never in the travelling form, never read from it") {
  ExecManifest manifest = sample();
  manifest.builds[0].seen = {{"/usr/include/stdio.h", "10 1 2 3 4"}, {"{out}/prev.o", "20 1 2 3 4"}};

  const auto travelling = opcache::store::exec_manifest_to_json(manifest);
  CHECK(travelling.find("seen") == std::string::npos);
  const auto local = opcache::store::exec_manifest_to_local_json(manifest);
  REQUIRE(local.find("\"seen\"") != std::string::npos);

  auto from_remote = opcache::store::parse_exec_manifest(local, "remote");  // a remote that sends one anyway
  REQUIRE(from_remote.ok());
  CHECK(from_remote->builds[0].seen.empty());
  auto from_here = opcache::store::parse_local_exec_manifest(local, "m.json");
  REQUIRE(from_here.ok());
  CHECK(from_here->builds[0].seen == manifest.builds[0].seen);

  // A `seen` naming what is no file input of the build is dropped, not refused.
  auto document = nlohmann::json::parse(local);
  document["builds"][0]["seen"]["{base}/inc1/k.h"] = "1 1 1 1 1";  // an absent path
  auto dropped = opcache::store::parse_local_exec_manifest(document.dump(), "m.json");
  REQUIRE(dropped.ok());
  CHECK(dropped->builds[0].seen.empty());
}

TEST_CASE("store::exec manifest merge keeps the identities seen here for the same entry and inputs only") {
  ExecManifest here = sample();
  here.builds[0].seen = {{"/usr/include/stdio.h", "10 1 2 3 4"}};
  ExecManifest remote = sample();  // the same build, as a remote sends it: nothing seen
  auto merged = opcache::store::merge_exec_manifests(remote, here);
  REQUIRE(merged.ok());
  REQUIRE(merged->builds.size() == 1);
  CHECK(merged->builds[0].seen == here.builds[0].seen);

  ExecManifest forged = sample();  // names the same entry with other inputs
  forged.builds[0].inputs[0].state = "sha256:" + hex_of('f');
  merged = opcache::store::merge_exec_manifests(forged, here);
  REQUIRE(merged.ok());
  CHECK(merged->builds[0].inputs == forged.builds[0].inputs);
  CHECK(merged->builds[0].seen.empty());

  // The local file keeps them across a merge on write.
  opcache::test::TempDir temp;
  const opcache::store::StoreLayout layout(temp.path());
  REQUIRE(layout.create_directories().ok());
  REQUIRE(opcache::store::merge_into_exec_manifest(layout, here).ok());
  REQUIRE(opcache::store::merge_into_exec_manifest(layout, remote).ok());
  auto stored = opcache::store::read_exec_manifest(layout, k_command_key);
  REQUIRE(stored.ok());
  REQUIRE(stored->has_value());
  CHECK((*stored)->builds[0].seen == here.builds[0].seen);
}

}  // namespace exec_manifest_test
