// Store::get_or_build with declared inputs (GetOrBuildOptions::inputs): the
// files and directories a library op compiler reads enter the key, as
// `opcache exec --input` does.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/file_digest.hpp"
#include "opcache/opcache.hpp"
#include "store/exec_key.hpp"
#include "tests/support/expect_usage.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

constexpr const char* k_declared_descriptor = R"({"op_type":"tiled_add","inputs":[{"shape":[64],"dtype":"float16"}]})";

opcache::Store open_declared_store(const fs::path& cache, const std::string& base_dir = "") {
  opcache::StoreConfig config;
  config.cache_dir = cache;
  config.no_remote = true;
  if (!base_dir.empty()) {
    config.base_dir = base_dir;
  }
  auto store = opcache::Store::open(config);
  REQUIRE_MESSAGE(store.ok(), (store.ok() ? "" : store.error().message()));
  return std::move(store).value();
}

// A compiler that "compiles" what it reads: the kernel holds the text of
// `source`, so a stale hit would show the old text.
struct DeclaredCompiler {
  fs::path source;
  int builds = 0;

  opcache::BuildFunction function() {
    return [this](const fs::path& work_dir) -> opcache::Status {
      ++builds;
      opcache::test::write_text(work_dir / "tiled_add.o", "compiled from " + opcache::test::read_text(source));
      return {};
    };
  }
};

// get_or_build of k_declared_descriptor with `inputs` declared; REQUIREs success.
opcache::BuildResult build_declared(opcache::Store& store, const fs::path& out, DeclaredCompiler& compiler,
                                    const std::vector<fs::path>& inputs) {
  auto result = store.get_or_build(k_declared_descriptor, opcache::test::test_scenario(), out, compiler.function(),
                                   opcache::GetOrBuildOptions{inputs});
  REQUIRE_MESSAGE(result.ok(), (result.ok() ? "" : result.error().message()));
  return std::move(result).value();
}

}  // namespace

TEST_CASE("opcache::Store::get_or_build with a declared header: an edit is a miss that builds again, unchanged a hit") {
  opcache::test::TempDir temp;
  auto store = open_declared_store(temp / "cache");
  const fs::path header = temp / "src" / "tiling.h";
  opcache::test::write_text(header, "#define TILE 16\n");
  DeclaredCompiler compiler{header};

  auto first = build_declared(store, temp / "out1", compiler, {header});
  CHECK(first.source == opcache::BuildSource::built);
  auto again = build_declared(store, temp / "out2", compiler, {header});
  CHECK(again.source == opcache::BuildSource::hit);
  CHECK(again.key == first.key);
  CHECK(compiler.builds == 1);
  CHECK(opcache::test::read_text(temp / "out2" / "tiled_add.o") == "compiled from #define TILE 16\n");

  opcache::test::write_text(header, "#define TILE 32\n");
  auto edited = build_declared(store, temp / "out3", compiler, {header});
  CHECK(edited.source == opcache::BuildSource::built);
  CHECK(edited.key != first.key);
  CHECK(compiler.builds == 2);
  CHECK(opcache::test::read_text(temp / "out3" / "tiled_add.o") == "compiled from #define TILE 32\n");

  // Keyed by content: the header as it was finds the first kernel again.
  opcache::test::write_text(header, "#define TILE 16\n");
  auto reverted = build_declared(store, temp / "out4", compiler, {header});
  CHECK(reverted.source == opcache::BuildSource::hit);
  CHECK(reverted.key == first.key);
  CHECK(compiler.builds == 2);
}

TEST_CASE("opcache::Store::get_or_build with no declared inputs keys as before, and with some on their digests") {
  opcache::test::TempDir temp;
  auto store = open_declared_store(temp / "cache");
  const fs::path header = temp / "tiling.h";
  opcache::test::write_text(header, "#define TILE 16\n");
  DeclaredCompiler compiler{header};

  auto plain = build_declared(store, temp / "out1", compiler, {});
  CHECK(plain.key == store.key(k_declared_descriptor, opcache::test::test_scenario()).value());
  auto declared = build_declared(store, temp / "out2", compiler, {header});
  CHECK(declared.key != plain.key);
  CHECK(compiler.builds == 2);

  // The decided formula: the descriptor with the member "declared_inputs"
  // set to store::declared_input_digests of the inputs.
  auto digests = opcache::store::declared_input_digests({header.string()}, "", opcache::base::DigestCache());
  REQUIRE(digests.ok());
  auto expected = nlohmann::json::parse(k_declared_descriptor);
  expected["declared_inputs"] = *digests;
  CHECK(declared.key == store.key(expected.dump(), opcache::test::test_scenario()).value());
}

TEST_CASE("opcache::Store::get_or_build with a declared directory: a new or changed file below it is a miss") {
  opcache::test::TempDir temp;
  auto store = open_declared_store(temp / "cache");
  const fs::path include = temp / "include";
  opcache::test::write_text(include / "tiling.h", "#define TILE 16\n");
  DeclaredCompiler compiler{include / "tiling.h"};

  auto first = build_declared(store, temp / "out1", compiler, {include});
  CHECK(first.source == opcache::BuildSource::built);
  CHECK(build_declared(store, temp / "out2", compiler, {include}).source == opcache::BuildSource::hit);
  CHECK(compiler.builds == 1);

  opcache::test::write_text(include / "detail" / "vector.h", "#define LANES 8\n");
  auto added = build_declared(store, temp / "out3", compiler, {include});
  CHECK(added.source == opcache::BuildSource::built);
  CHECK(added.key != first.key);
  CHECK(compiler.builds == 2);
  CHECK(build_declared(store, temp / "out4", compiler, {include}).source == opcache::BuildSource::hit);

  opcache::test::write_text(include / "detail" / "vector.h", "#define LANES 16\n");
  auto changed = build_declared(store, temp / "out5", compiler, {include});
  CHECK(changed.source == opcache::BuildSource::built);
  CHECK(changed.key != added.key);
  CHECK(compiler.builds == 3);
}

TEST_CASE("opcache::Store::get_or_build keys declared inputs below base_dir as {base}: two checkouts share") {
  opcache::test::TempDir temp;
  for (const char* checkout : {"a", "b"}) {
    opcache::test::write_text(temp / checkout / "include" / "tiling.h", "#define TILE 16\n");
  }
  DeclaredCompiler compiler{temp / "a" / "include" / "tiling.h"};
  auto in_a = open_declared_store(temp / "cache", (temp / "a").string());
  auto built = build_declared(in_a, temp / "out1", compiler, {temp / "a" / "include"});
  CHECK(built.source == opcache::BuildSource::built);

  auto in_b = open_declared_store(temp / "cache", (temp / "b").string());
  auto shared = build_declared(in_b, temp / "out2", compiler, {temp / "b" / "include"});
  CHECK(shared.source == opcache::BuildSource::hit);
  CHECK(shared.key == built.key);
  CHECK(compiler.builds == 1);
}

TEST_CASE("opcache::Store::get_or_build refuses a missing declared input with a usage error and builds nothing") {
  opcache::test::TempDir temp;
  auto store = open_declared_store(temp / "cache");
  const fs::path present = temp / "tiling.h";
  opcache::test::write_text(present, "#define TILE 16\n");
  const fs::path missing = temp / "no_such_dir" / "vector.h";
  DeclaredCompiler compiler{present};

  auto result = store.get_or_build(k_declared_descriptor, opcache::test::test_scenario(), temp / "out",
                                   compiler.function(), opcache::GetOrBuildOptions{{present, missing}});
  opcache::test::expect_usage(result, {"declared input \"" + missing.string() + "\" does not exist"});
  CHECK(compiler.builds == 0);
  CHECK(store.list().value().empty());

  REQUIRE(::mkfifo((temp / "pipe").c_str(), 0600) == 0);
  auto in_place = store.get_or_build_in_place(
      k_declared_descriptor, opcache::test::test_scenario(), temp / "out",
      [&]() -> opcache::Result<std::vector<fs::path>> {
        ++compiler.builds;
        return std::vector<fs::path>{present};
      },
      opcache::GetOrBuildOptions{{temp / "pipe"}});
  opcache::test::expect_usage(in_place, {"pipe", "neither a regular file nor a directory"});
  CHECK(compiler.builds == 0);
}

TEST_CASE("opcache::Store::get_or_build refuses a descriptor member declared_inputs only when inputs are declared") {
  opcache::test::TempDir temp;
  auto store = open_declared_store(temp / "cache");
  const fs::path header = temp / "tiling.h";
  opcache::test::write_text(header, "#define TILE 16\n");
  DeclaredCompiler compiler{header};
  const std::string descriptor = R"({"op_type":"tiled_add","declared_inputs":[["tiling.h","forged"]]})";

  auto refused = store.get_or_build(descriptor, opcache::test::test_scenario(), temp / "out", compiler.function(),
                                    opcache::GetOrBuildOptions{{header}});
  opcache::test::expect_usage(refused, {"\"declared_inputs\" is reserved"});
  CHECK(compiler.builds == 0);

  // Without declared inputs nothing changes: such a descriptor is keyed as it always was.
  auto plain = store.get_or_build(descriptor, opcache::test::test_scenario(), temp / "out", compiler.function(),
                                  opcache::GetOrBuildOptions{});
  REQUIRE_MESSAGE(plain.ok(), (plain.ok() ? "" : plain.error().message()));
  CHECK(plain->source == opcache::BuildSource::built);
  CHECK(plain->key == store.key(descriptor, opcache::test::test_scenario()).value());
}

TEST_CASE("opcache::Store::get_or_build_in_place with a declared input: an edit is a miss, unchanged a hit") {
  opcache::test::TempDir temp;
  auto store = open_declared_store(temp / "cache");
  const fs::path header = temp / "tiling.h";
  opcache::test::write_text(header, "#define TILE 16\n");
  int builds = 0;
  auto build = [&]() -> opcache::Result<std::vector<fs::path>> {
    ++builds;
    opcache::test::write_text(temp / "build" / "tiled_add.o", opcache::test::read_text(header));
    return std::vector<fs::path>{temp / "build" / "tiled_add.o"};
  };
  const opcache::GetOrBuildOptions options{{header}};
  auto call = [&](const char* out) {
    auto result =
        store.get_or_build_in_place(k_declared_descriptor, opcache::test::test_scenario(), temp / out, build, options);
    REQUIRE_MESSAGE(result.ok(), (result.ok() ? "" : result.error().message()));
    return result->source;
  };
  CHECK(call("out1") == opcache::BuildSource::built);
  CHECK(call("out2") == opcache::BuildSource::hit);
  CHECK(builds == 1);
  opcache::test::write_text(header, "#define TILE 32\n");
  CHECK(call("out3") == opcache::BuildSource::built);
  CHECK(builds == 2);
  CHECK(opcache::test::read_text(temp / "out2" / "tiled_add.o") == "#define TILE 16\n");
}
