// store/exec_manifest_scan: the local exec manifest read without a JSON tree
// must read exactly what the strict parser reads, and give up (so that the
// strict parser decides) on anything it cannot vouch for.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/exec_manifest.hpp"
#include "store/exec_manifest_scan.hpp"

using opcache::store::ExecManifest;
using opcache::store::ManifestBuild;

namespace exec_manifest_scan_test {

std::string hex_of(char digit) { return std::string(64, digit); }

ExecManifest two_builds() {
  ManifestBuild newest{{{"/home/ü/k.h", "sha256:" + hex_of('e'), {}},
                        {"/usr/include/stdio.h", "sha256:" + hex_of('a'), {}},
                        {"/usr/lib/gcc/x86_64-linux-gnu/12/cc1", "sha256:" + hex_of('b'), {}},
                        {"{base}/inc1/k.h", "absent", {}},
                        {"{base}/src", "dir:" + hex_of('c'), {"__pycache__", "k.o"}},
                        {"{out}/prev.o", "sha256:" + hex_of('d'), {}}},
                       {"k.json", "k.o"},
                       hex_of('1'),
                       "2026-11-28T10:00:00Z",
                       {{"/usr/include/stdio.h", "10 1 2 3 4"}, {"{out}/prev.o", "20 1 2 3 4"}}};
  ManifestBuild older{{{"/usr/include/stdio.h", "sha256:" + hex_of('f'), {}}}, {"k.o"}, hex_of('2'), "", {}};
  return ExecManifest{hex_of('c'), {newest, older}};
}

void check_same(const ExecManifest& read, const ExecManifest& expected) {
  CHECK(read.command_key == expected.command_key);
  REQUIRE(read.builds.size() == expected.builds.size());
  for (std::size_t i = 0; i < read.builds.size(); ++i) {
    CHECK(read.builds[i].inputs == expected.builds[i].inputs);
    CHECK(read.builds[i].outputs == expected.builds[i].outputs);
    CHECK(read.builds[i].entry == expected.builds[i].entry);
    CHECK(read.builds[i].created == expected.builds[i].created);
    CHECK(read.builds[i].seen == expected.builds[i].seen);
  }
}

// (the test cases below stay in namespace exec_manifest_scan_test: the unity build shares helpers' names)

TEST_CASE("store::scan_local_exec_manifest reads what this machine writes, as the strict parser does") {
  const auto manifest = two_builds();
  const auto text = opcache::store::exec_manifest_to_local_json(manifest);
  auto scanned = opcache::store::scan_local_exec_manifest(text);
  REQUIRE(scanned.has_value());
  check_same(*scanned, manifest);
  // The same text indented (white space anywhere JSON allows it) reads the same.
  auto indented = opcache::store::scan_local_exec_manifest(nlohmann::json::parse(text).dump(2));
  REQUIRE(indented.has_value());
  check_same(*indented, manifest);
  // An empty manifest, and a build without a `seen`.
  auto empty = opcache::store::scan_local_exec_manifest(opcache::store::exec_manifest_to_local_json({hex_of('c'), {}}));
  REQUIRE(empty.has_value());
  CHECK(empty->builds.empty());
}

TEST_CASE("store::scan_local_exec_manifest gives up on what it cannot vouch for, and the strict parser decides") {
  const auto good = nlohmann::json::parse(opcache::store::exec_manifest_to_local_json(two_builds()));
  auto scan_of = [](const nlohmann::json& document) {
    return opcache::store::scan_local_exec_manifest(document.dump());
  };
  auto strict_of = [](const nlohmann::json& document) {
    return opcache::store::parse_local_exec_manifest(document.dump(), "m.json");
  };

  // An escaped character in a path: not scanned, read strictly all the same.
  auto escaped = good;
  escaped["builds"][0]["inputs"][0][0] = "/home/\"quoted\".h";
  CHECK_FALSE(scan_of(escaped).has_value());
  auto strict_escaped = strict_of(escaped);
  REQUIRE(strict_escaped.ok());
  CHECK(strict_escaped->builds[0].inputs[0].path == "/home/\"quoted\".h");

  // A member it does not know: left to the strict parser, which ignores it.
  auto unknown = good;
  unknown["builds"][0]["note"] = "later";
  CHECK_FALSE(scan_of(unknown).has_value());
  CHECK(strict_of(unknown).ok());

  // What every manifest must be is checked by both: each gives up or refuses.
  auto bad_path = good;
  bad_path["builds"][0]["inputs"][0][0] = "/a/../etc/passwd";
  CHECK_FALSE(scan_of(bad_path).has_value());
  CHECK_FALSE(strict_of(bad_path).ok());
  auto bad_state = good;
  bad_state["builds"][1]["inputs"][0][1] = "sha256:xyz";
  CHECK_FALSE(scan_of(bad_state).has_value());
  CHECK_FALSE(strict_of(bad_state).ok());
  auto other_version = good;
  other_version["version"] = 2;
  CHECK_FALSE(scan_of(other_version).has_value());
  CHECK_FALSE(strict_of(other_version).ok());
  auto no_inputs = good;
  no_inputs["builds"][1].erase("inputs");
  CHECK_FALSE(scan_of(no_inputs).has_value());
  CHECK_FALSE(strict_of(no_inputs).ok());

  // A member twice: the scanner gives up; the strict parser refuses duplicates.
  auto text = good.dump();
  const auto twice = text.substr(0, text.size() - 1) + ",\"version\":1}";
  CHECK_FALSE(opcache::store::scan_local_exec_manifest(twice).has_value());
  CHECK_FALSE(opcache::store::parse_local_exec_manifest(twice, "m.json").ok());
  // Text after the document.
  CHECK_FALSE(opcache::store::scan_local_exec_manifest(text + "x").has_value());

  // A `seen` naming what is no file input of its build is dropped by both.
  auto foreign_seen = good;
  foreign_seen["builds"][0]["seen"]["{base}/inc1/k.h"] = "1 1 1 1 1";
  auto scanned = scan_of(foreign_seen);
  REQUIRE(scanned.has_value());
  CHECK(scanned->builds[0].seen.empty());
  CHECK(strict_of(foreign_seen)->builds[0].seen.empty());
}

TEST_CASE("store::exec manifest input paths: empty, '.' and '..' components and NUL are refused by both readers, '...' and dotfiles are names") {
  auto with_path = [](const std::string& path) {
    ExecManifest manifest{hex_of('c'), {ManifestBuild{{{path, "absent", {}}}, {"k.o"}, hex_of('1'), "", {}}}};
    return opcache::store::exec_manifest_to_local_json(manifest);
  };
  for (const std::string& path : std::vector<std::string>{"/a//b", "/a/./b", "/a/..", "/a/../b", "/a/b/", "/.", "/..", "//", "{base}//x", "a/b",
                                 "{out}x", "{nope}/a", "{base}/..", std::string("/a/b\0c", 6),
                                 std::string("/a\0", 3), std::string("{out}/\0", 7)}) {
    INFO(path);
    CHECK_FALSE(opcache::store::scan_local_exec_manifest(with_path(path)).has_value());
    CHECK_FALSE(opcache::store::parse_local_exec_manifest(with_path(path), "m.json").ok());
  }
  for (const std::string path : {"/", "/a/.../b", "/home/.config/k.h", "/a/..b/c.", "/a/b.", "/.x/..y", "{out}", "{base}",
                                 "{out}/k.o", "{cann}/opp/x"}) {
    INFO(path);
    CHECK(opcache::store::scan_local_exec_manifest(with_path(path)).has_value());
    CHECK(opcache::store::parse_local_exec_manifest(with_path(path), "m.json").ok());
  }
}

}  // namespace exec_manifest_scan_test
