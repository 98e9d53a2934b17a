// A kernel fetched from a remote on a local miss is a copy of what the remote
// holds, stored like a pulled one: without fsync (docs/remotes.md, "Pulled
// entries — like entries a layered lookup fetches or prefetches — are not
// fsynced"). A local put still syncs. Counted with strace on the real CLI
// against a fault server that serves the bundle; skipped where strace cannot
// trace.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/fault_server.hpp"
#include "tests/support/process.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace opcache::test;

namespace {

bool strace_works() {
  return run_process({"sh", "-c", "command -v strace && strace -f -o /dev/null true"}).exit_code == 0;
}

// The fsync, fdatasync, syncfs and sync_file_range calls the CLI makes with
// `args` (which must succeed), from strace's log.
int sync_calls(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv{"strace", "-f", "-qq", "-o", log.string(), "-e",
                                "trace=fsync,fdatasync,syncfs,sync_file_range", cli_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  // LeakSanitizer cannot run under ptrace: a sanitizer build checks leaks in the other tests.
  ProcessOptions options;
  const char* asan = std::getenv("ASAN_OPTIONS");
  options.env["ASAN_OPTIONS"] = std::string(asan != nullptr ? asan : "") + ":detect_leaks=0";
  const auto run = run_process(argv, options);
  INFO("opcache " << args.at(2) << ": " << run.err);
  REQUIRE(run.exit_code == 0);
  std::istringstream lines(read_text(log));
  int calls = 0;
  for (std::string line; std::getline(lines, line);) {
    calls += line.find("sync") != std::string::npos && line.find("+++") == std::string::npos ? 1 : 0;
  }
  return calls;
}

}  // namespace

TEST_CASE("remote::a kernel fetched on a local miss is stored without fsync, while a local put syncs") {
  if (!strace_works()) {
    MESSAGE("strace with ptrace is not available here; skipped");
    return;
  }
  TempDir temp;
  const TestKernel kernel = make_cheap_kernel(temp / "src", 1);
  FaultServer server([&kernel](const FaultRequest& request) {
    if (request.method == "GET" && request.target == "/v1/entries/" + kernel.key) {
      return FaultReply::ok(kernel.bundle);
    }
    return FaultReply::status(404, R"({"error":"not_found","message":"no entry"})");
  });
  const std::string cache = (temp / "cache").string();

  // The control: a local put is synced (so the count can see a sync at all).
  const fs::path desc = temp / "desc.json";
  write_text(desc, kernel.descriptor_json);
  std::vector<std::string> put{"-C", (temp / "put-cache").string(), "put", "--desc", desc.string(), "--scenario",
                               k_test_scenario};
  for (const auto& file : kernel.files) {
    put.push_back(file.string());
  }
  CHECK(sync_calls(put, temp / "put.strace") > 0);

  // A cache that exists already (creating one syncs its index and directories).
  REQUIRE(run_cli({"-C", cache, "stats"}).exit_code == 0);
  const int fetched = sync_calls({"-C", cache, "--remote", server.url() + "|prefetch=0", "get", kernel.key, "--out",
                                  (temp / "out").string()},
                                 temp / "get.strace");
  CHECK(directory_contents(temp / "out") == kernel.contents());
  CHECK(fetched == 0);
}
