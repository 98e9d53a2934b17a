// store/observed_inputs: what a traced build's events make of inputs and
// outputs, and the check a later lookup makes (docs/formats.md "What exec
// keys on"). The events are written by hand here, as the tracer reports
// them (tests/trace/ tests the tracer itself), over real files.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "store/observed_inputs.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using opcache::test::TempDir;
using opcache::test::write_text;
using opcache::trace::Access;
using opcache::trace::PathEvent;

namespace observed_inputs_test {

opcache::trace::FileIdentity identity_of(const fs::path& path) {
  auto identity = opcache::trace::file_identity(path.string());
  REQUIRE(identity.has_value());
  return *identity;
}

const opcache::base::DigestCache no_cache;  // every digest computed

PathEvent read_of(const fs::path& path) { return {path.string(), Access::read, identity_of(path)}; }
PathEvent event(const fs::path& path, Access access) { return {path.string(), access, std::nullopt}; }

const opcache::store::ObservedInput* find_input(const opcache::store::ObservedBuild& build, const std::string& path) {
  for (const auto& input : build.inputs) {
    if (input.path == path) {
      return &input;
    }
  }
  return nullptr;
}

// (the test cases below stay in namespace observed_inputs_test: the unity build shares helpers' names)

TEST_CASE("store::identity_text is \"size mtime ctime inode device\" in decimal, at every extreme") {
  // Manifests written by earlier versions hold this text: a hit compares it character by character.
  constexpr auto low = std::numeric_limits<std::int64_t>::min();
  constexpr auto high = std::numeric_limits<std::int64_t>::max();
  constexpr auto top = std::numeric_limits<std::uint64_t>::max();
  const opcache::trace::FileIdentity cases[] = {
      {}, {1, 2, 3, 4, 5}, {top, top, high, high, high}, {0, 0, low, low, low}, {7, 123456789, -1, 1700000000123456789, 0}};
  for (const auto& identity : cases) {
    const std::string expected = std::to_string(identity.size) + " " + std::to_string(identity.mtime_ns) + " " +
                                 std::to_string(identity.ctime_ns) + " " + std::to_string(identity.inode) + " " +
                                 std::to_string(identity.device);
    CHECK(opcache::store::identity_text(identity) == expected);
  }
}

TEST_CASE("store::observe_build: files read are inputs, created ones are not, outputs are what the tree wrote in --out") {
  TempDir temp;
  const fs::path base = temp.path() / "repo";
  write_text(base / "k.c", "int k;\n");
  write_text(base / "out" / "neighbour.o", "theirs\n");
  opcache::trace::TraceOutcome outcome;
  outcome.events = {read_of(base / "k.c"),
                    event(base / "inc1" / "k.h", Access::absent),
                    event(base / "tmp.s", Access::absent),   // looked up, then created: a temporary
                    event(base / "tmp.s", Access::written),
                    event(base / "tmp.s", Access::removed),
                    event(base / "out" / "k.o", Access::written)};
  write_text(base / "out" / "k.o", "object\n");
  const opcache::store::PathFrame frame{base / "out", base, ""};
  auto build = opcache::store::observe_build(outcome, frame, no_cache);
  REQUIRE(build.ok());
  CHECK_FALSE(build->uncacheable.has_value());
  REQUIRE(build->inputs.size() == 2);
  CHECK(build->inputs[0].path == "{base}/inc1/k.h");
  CHECK(build->inputs[0].state == "absent");
  CHECK(build->inputs[1].path == "{base}/k.c");
  CHECK(build->inputs[1].state.rfind("sha256:", 0) == 0);
  REQUIRE(build->outputs.size() == 1);  // not the neighbour's file
  CHECK(build->outputs[0] == base / "out" / "k.o");

  // The check of a later lookup, and what it says when something differs.
  const opcache::store::ManifestBuild recorded{build->inputs, {"k.o"}, std::string(64, 'a'), "", {}};
  CHECK_FALSE(opcache::store::first_changed_input(recorded, frame, no_cache).has_value());
  write_text(base / "inc1" / "k.h", "shadow\n");
  CHECK(opcache::store::first_changed_input(recorded, frame, no_cache).value().find("inc1/k.h now exists") !=
        std::string::npos);
  fs::remove(base / "inc1" / "k.h");
  write_text(base / "k.c", "int k2;\n");
  CHECK(opcache::store::first_changed_input(recorded, frame, no_cache).value().find("k.c changed") != std::string::npos);
  // Another checkout with the same files matches through its own base_dir.
  const fs::path other = temp.path() / "other";
  write_text(other / "k.c", "int k;\n");
  CHECK_FALSE(opcache::store::first_changed_input(recorded, {other / "out", other, ""}, no_cache).has_value());
  CHECK(opcache::store::first_changed_input(recorded, {other / "out", "", ""}, no_cache).value().find("base_dir") !=
        std::string::npos);
}

TEST_CASE("store::observe_build: an input changed while the command ran, or a file in a subdirectory of --out, is not cached") {
  TempDir temp;
  write_text(temp.path() / "k.c", "int k;\n");
  opcache::trace::TraceOutcome outcome;
  outcome.events = {read_of(temp.path() / "k.c")};
  write_text(temp.path() / "k.c", "int k; /* edited during the build */\n");
  const opcache::store::PathFrame frame{temp.path() / "out", "", ""};
  auto changed = opcache::store::observe_build(outcome, frame, no_cache);
  REQUIRE(changed.ok());
  REQUIRE(changed->uncacheable.has_value());
  CHECK(changed->uncacheable->find("k.c changed while the command ran") != std::string::npos);

  opcache::trace::TraceOutcome nested;
  write_text(temp.path() / "out" / "sub" / "k.o", "o\n");
  nested.events = {event(temp.path() / "out" / "sub" / "k.o", Access::written)};
  auto sub = opcache::store::observe_build(nested, frame, no_cache);
  REQUIRE(sub.ok());
  REQUIRE(sub->uncacheable.has_value());
  CHECK(sub->uncacheable->find("subdirectory of --out") != std::string::npos);

  opcache::trace::TraceOutcome blind;
  blind.blind = "a 32-bit program";
  auto partial = opcache::store::observe_build(blind, frame, no_cache);
  REQUIRE(partial.ok());
  CHECK(partial->uncacheable.value().find("a 32-bit program") != std::string::npos);
}

TEST_CASE("store::observe_build: a listed directory keys on its names, less those the build created there") {
  TempDir temp;
  const fs::path src = temp.path() / "src";
  write_text(src / "op.py", "x\n");
  write_text(src / "tiling.py", "y\n");
  opcache::trace::TraceOutcome outcome;
  outcome.events = {event(src, Access::listed), event(src / "__pycache__", Access::written)};
  fs::create_directories(src / "__pycache__");
  const opcache::store::PathFrame frame{temp.path() / "out", "", ""};
  auto build = opcache::store::observe_build(outcome, frame, no_cache);
  REQUIRE(build.ok());
  const auto* listing = find_input(*build, src.string());
  REQUIRE(listing != nullptr);
  CHECK(listing->state.rfind("dir:", 0) == 0);
  CHECK(listing->ignored == std::vector<std::string>{"__pycache__"});

  const opcache::store::ManifestBuild recorded{build->inputs, {}, std::string(64, 'a'), "", {}};
  fs::remove_all(src / "__pycache__");  // a fresh checkout, without Python's cache: still the same listing
  CHECK_FALSE(opcache::store::first_changed_input(recorded, frame, no_cache).has_value());
  write_text(src / "shadow.py", "z\n");
  CHECK(opcache::store::first_changed_input(recorded, frame, no_cache).value().find("has other entries") != std::string::npos);
}

TEST_CASE("store::observe_build: the listing of a shared sticky scratch directory (/tmp) is no input") {
  TempDir temp;
  const fs::path scratch = temp.path() / "scratch";
  fs::create_directories(scratch);
  fs::permissions(scratch, fs::perms::all | fs::perms::sticky_bit);
  const fs::path src = temp.path() / "src";
  fs::create_directories(src);
  opcache::trace::TraceOutcome outcome;
  outcome.events = {event(scratch, Access::listed), event(src, Access::listed)};
  auto build = opcache::store::observe_build(outcome, {temp.path() / "out", "", ""}, no_cache);
  REQUIRE(build.ok());
  CHECK(find_input(*build, scratch.string()) == nullptr);
  CHECK(find_input(*build, src.string()) != nullptr);
}

TEST_CASE("store::observe_build: programs the command ran are inputs unless compiler_check stands for them") {
  TempDir temp;
  write_text(temp.path() / "bin" / "kcc", "#!/bin/sh\n");
  write_text(temp.path() / "k.c", "int k;\n");
  opcache::trace::TraceOutcome outcome;
  outcome.events = {{(temp.path() / "bin" / "kcc").string(), Access::executed, identity_of(temp.path() / "bin" / "kcc")},
                    read_of(temp.path() / "k.c")};
  const opcache::store::PathFrame frame{temp.path() / "out", "", ""};
  auto digested = opcache::store::observe_build(outcome, frame, no_cache);
  REQUIRE(digested.ok());
  CHECK(find_input(*digested, (temp.path() / "bin" / "kcc").string()) != nullptr);
  auto left_out = opcache::store::observe_build(outcome, frame, no_cache, {false, {}});
  REQUIRE(left_out.ok());
  CHECK(find_input(*left_out, (temp.path() / "bin" / "kcc").string()) == nullptr);
  CHECK(find_input(*left_out, (temp.path() / "k.c").string()) != nullptr);  // what it read stays
}

TEST_CASE("store::observe_build: --out reached through a symlink still finds the files the command wrote there") {
  TempDir temp;
  fs::create_directories(temp.path() / "real" / "out");
  fs::create_directory_symlink(temp.path() / "real", temp.path() / "link");
  write_text(temp.path() / "real" / "out" / "k.o", "object\n");
  opcache::trace::TraceOutcome outcome;  // the tracer reports the path it resolved through the working directory
  outcome.events = {event(temp.path() / "real" / "out" / "k.o", Access::written)};
  auto build = opcache::store::observe_build(outcome, {temp.path() / "link" / "out", "", ""}, no_cache);
  REQUIRE(build.ok());
  REQUIRE(build->outputs.size() == 1);
  CHECK(build->outputs[0] == temp.path() / "link" / "out" / "k.o");
}

TEST_CASE("store::observe_build records the identities that settled, and a lookup trusts them without reading") {
  TempDir temp;
  const fs::path base = temp.path() / "repo";
  write_text(base / "k.c", "int k;\n");
  write_text(base / "fresh.h", "int f;\n");
  opcache::test::age_past_digest_too_new();
  write_text(base / "fresh.h", "int g;\n");  // changed just now: too new to be trusted by its identity
  opcache::trace::TraceOutcome outcome;
  outcome.events = {read_of(base / "k.c"), read_of(base / "fresh.h"), event(base / "out" / "k.o", Access::written)};
  write_text(base / "out" / "k.o", "object\n");
  const opcache::store::PathFrame frame{base / "out", base, ""};
  auto build = opcache::store::observe_build(outcome, frame, no_cache);
  REQUIRE(build.ok());
  REQUIRE(build->seen.size() == 1);
  CHECK(build->seen.at("{base}/k.c") == opcache::store::identity_text(identity_of(base / "k.c")));

  // While the identity holds, the recorded digest is not checked against the bytes.
  opcache::store::ManifestBuild recorded{build->inputs, {"k.o"}, std::string(64, 'a'), "", build->seen};
  for (auto& input : recorded.inputs) {
    if (input.path == "{base}/k.c") {
      input.state = "sha256:" + std::string(64, 'e');  // not its digest
    }
  }
  std::map<std::string, std::string> seen_now;
  CHECK_FALSE(opcache::store::first_changed_input(recorded, frame, no_cache, &seen_now).has_value());
  CHECK(seen_now.empty());  // fresh.h was read and matched, but is still too new
  // A file whose identity changed is read again.
  write_text(base / "k.c", "int k;\n");
  CHECK(opcache::store::first_changed_input(recorded, frame, no_cache).value() == (base / "k.c").string() + " changed");

  // Read, matching and settled: the caller is handed its identity to record.
  opcache::test::age_past_digest_too_new();
  recorded.seen.clear();
  recorded.inputs = build->inputs;
  for (auto& input : recorded.inputs) {
    if (input.path == "{base}/fresh.h") {
      input.state = "sha256:" + opcache::base::file_sha256(base / "fresh.h").value();
    }
  }
  CHECK_FALSE(opcache::store::first_changed_input(recorded, frame, no_cache, &seen_now).has_value());
  CHECK(seen_now.size() == 2);
  CHECK(seen_now.at("{base}/fresh.h") == opcache::store::identity_text(identity_of(base / "fresh.h")));
}

}  // namespace observed_inputs_test
