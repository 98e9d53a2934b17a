// SQLite is loaded on demand (store/sqlite_library.hpp): a cache hit maps
// neither SQLite nor libm, which only SQLite needed; writing the index loads
// it. Checked on the real CLI through the dynamic loader's own trace
// (tests/support/loader_trace.hpp).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/sqlite_library.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/loader_trace.hpp"
#include "tests/support/process.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"

TEST_CASE("store::sqlite_library: a hit maps neither SQLite nor libm, the first index write loads SQLite") {
  using namespace opcache::test;
  TempDir dir;
  auto [kernel, cache, stored, put_trace, key] = put_kernel_traced(dir.path());
  INFO("put: ", stored.err);
  REQUIRE(stored.exit_code == 0);
  REQUIRE(trace_maps(put_trace, "libc.so"));  // the trace does name mapped libraries
  CHECK(trace_maps(put_trace, "libsqlite3.so"));
  // Sanitizer builds link the programs against the shared libraries
  // (cmake/ProgramDependencies.cmake): there SQLite is mapped at start-up.
  OPCACHE_SKIP_IF(put_trace.find("libsqlite3.so.0 [0];  needed by") != std::string::npos,
                  "this build links SQLite into the program (sanitizers or OPCACHE_STATIC_PROGRAM_DEPENDENCIES=OFF)");

  std::vector<std::string> hit = cache;
  hit.insert(hit.end(), {"get", key, "--out", (dir / "out").string()});
  auto [got, hit_trace] = run_traced(hit, dir / "trace");
  INFO("get: ", got.err);
  CHECK(got.exit_code == 0);
  CHECK(read_text(dir / "out" / kernel.object.filename()) == read_text(kernel.object));
  CHECK_FALSE(trace_maps(hit_trace, "libsqlite3.so"));
  CHECK_FALSE(trace_maps(hit_trace, "libm.so"));

  // Listing reads the index: SQLite is loaded, and it answers.
  std::vector<std::string> list = cache;
  list.insert(list.end(), {"--json", "ls"});
  auto [listed, list_trace] = run_traced(list, dir / "trace");
  INFO("ls: ", listed.err);
  REQUIRE(listed.exit_code == 0);
  CHECK(nlohmann::json::parse(listed.out).at("entries").size() == 1);
  CHECK(trace_maps(list_trace, "libsqlite3.so"));
}

TEST_CASE("store::sqlite_library: load_sqlite resolves SQLite once and every call after it agrees") {
  REQUIRE(opcache::store::load_sqlite());
  CHECK(opcache::store::load_sqlite());
  CHECK(opcache::store::sqlite_is_loaded());
}
