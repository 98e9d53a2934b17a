// libcurl is loaded on demand (remote/curl_library.hpp): a process that never
// talks to a remote never maps it. Checked on the real CLI through the
// dynamic loader's own trace (tests/support/loader_trace.hpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "remote/curl_library.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/loader_trace.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::test;
namespace fs = std::filesystem;

namespace {

bool maps_libcurl(const std::string& trace) { return trace_maps(trace, "libcurl.so"); }

}  // namespace

TEST_CASE("remote::curl_library: the CLI maps libcurl only when a remote is asked, not for a local hit") {
  TempDir dir;
  auto [kernel, cache, stored, put_trace, key] = put_kernel_traced(dir.path());
  INFO("put: ", stored.err);
  REQUIRE(stored.exit_code == 0);
  CHECK_FALSE(maps_libcurl(put_trace));
  REQUIRE(trace_maps(put_trace, "libc.so"));  // the trace does name mapped libraries

  std::vector<std::string> hit = cache;
  hit.insert(hit.end(), {"get", key, "--out", (dir / "out").string()});
  auto [got, hit_trace] = run_traced(hit, dir / "trace");
  INFO("get: ", got.err);
  CHECK(got.exit_code == 0);
  CHECK(read_text(dir / "out" / kernel.object.filename()) == read_text(kernel.object));
  CHECK_FALSE(maps_libcurl(hit_trace));

  // A hit with an http remote configured: the remote is never asked.
  std::vector<std::string> remote_hit = cache;
  remote_hit.insert(remote_hit.end(), {"--remote", "http://127.0.0.1:9", "get", key, "--out", (dir / "out2").string()});
  auto [remote_got, remote_hit_trace] = run_traced(remote_hit, dir / "trace");
  INFO("get with a remote: ", remote_got.err);
  CHECK(remote_got.exit_code == 0);
  CHECK_FALSE(maps_libcurl(remote_hit_trace));

  // A miss with an http remote asks the remote (nothing listens on port 9
  // of loopback): libcurl is mapped then, and the miss is still a miss.
  std::vector<std::string> remote_miss = cache;
  remote_miss.insert(remote_miss.end(), {"--remote", "http://127.0.0.1:9", "get", std::string(64, 'a'), "--out",
                                         (dir / "out3").string()});
  auto [missed, miss_trace] = run_traced(remote_miss, dir / "trace");
  INFO("remote get: ", missed.err);
  CHECK(missed.exit_code == 1);
  CHECK(maps_libcurl(miss_trace));
}

TEST_CASE("remote::curl_library: load_curl resolves libcurl once and every call after it agrees") {
  REQUIRE(opcache::remote::load_curl());
  CHECK(opcache::remote::load_curl());
  CHECK(opcache::remote::curl_is_loaded());
}
