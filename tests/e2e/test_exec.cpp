// End-to-end tests of `opcache exec` with one process at a time: what a hit,
// a miss, a failing command, a missing output, modes and debug bypass do to
// the exit status, the files in --out and the store. The wrapped commands are
// small `sh -c` scripts that append "<name> <pid>" to a counter file, so each
// case can count how often the command really ran.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/files.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/single_flight.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::test::k_test_scenario;
using opcache::test::KernelTriple;
using opcache::test::make_kernel;
using opcache::test::ProcessResult;
using opcache::test::count_lines;
using opcache::test::exec_argv;
using opcache::test::directory_contents;
using opcache::test::hermetic_environment;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::write_text;

namespace {

std::map<std::string, std::string> contents_of(const KernelTriple& kernel) {
  std::map<std::string, std::string> files;
  for (const auto& file : kernel.files()) {
    files[file.filename().string()] = read_text(file);
  }
  return files;
}

std::string describe(const ProcessResult& result) {
  return "exit " + std::to_string(result.exit_code) + "\nstdout: " + result.out + "\nstderr: " + result.err;
}

// One test's cache, kernel and counter, and the CLI bound to them.
class ExecFixture {
 public:
  explicit ExecFixture(const TempDir& dir, const std::string& op = "square", int length = 128)
      : m_dir(dir.path()), m_cache(dir / "cache"), m_counter(dir / "runs.log"),
        m_kernel(make_kernel(dir / "kernel", op, length)) {
    m_desc = m_dir / "desc.json";
    write_text(m_desc, m_kernel.descriptor_json);
  }

  const KernelTriple& kernel() const { return m_kernel; }
  const fs::path& desc() const { return m_desc; }
  const fs::path& counter() const { return m_counter; }
  const fs::path& cache() const { return m_cache; }

  // `opcache --cache-dir CACHE globals... exec --desc DESC --scenario S
  // --out OUT [--output M]... -- sh -c SCRIPT args...`: the documented order,
  // with the --output options directly before "--".
  ProcessResult exec(const fs::path& out, const std::vector<std::string>& outputs, const std::string& script,
                     const std::vector<std::string>& script_args = {}, const std::vector<std::string>& globals = {},
                     const fs::path& desc = {}) const {
    return opcache::test::run_process(exec_argv(m_cache, desc.empty() ? m_desc : desc, out, outputs, script,
                                                script_args, opcache::test::JsonOutput::no, globals));
  }

  // A script that records its run and copies the kernel triple into $0.
  std::string copy_kernel_script() const {
    std::string script = "printf 'run %s\\n' \"$$\" >> '" + m_counter.string() + "'";
    for (const auto& file : m_kernel.files()) {
      script += " && cp '" + file.string() + "' \"$0/\"";
    }
    return script;
  }

  // exec() of copy_kernel_script() into `out` declaring the kernel's outputs.
  ProcessResult copy_kernel(const fs::path& out, const std::vector<std::string>& globals = {}) const {
    return exec(out, kernel_outputs(), copy_kernel_script(), {out.string()}, globals);
  }

  std::vector<std::string> kernel_outputs() const {
    std::vector<std::string> names;
    for (const auto& file : m_kernel.files()) {
      names.push_back(file.filename().string());
    }
    return names;
  }

  ProcessResult cli(const std::vector<std::string>& args) const {
    std::vector<std::string> full{"--cache-dir", m_cache.string()};
    full.insert(full.end(), args.begin(), args.end());
    return opcache::test::run_cli(full);
  }

  // Exit status of `opcache has --desc DESC --scenario S`: 0 present, 1 absent.
  int has() const { return cli({"has", "--desc", m_desc.string(), "--scenario", k_test_scenario}).exit_code; }

  std::string key() const {
    auto result = cli({"key", "--desc", m_desc.string(), "--scenario", k_test_scenario});
    REQUIRE(result.exit_code == 0);
    return result.out.substr(0, result.out.find('\n'));
  }

  // What `opcache get` writes for this kernel (empty on a miss).
  std::map<std::string, std::string> stored(const std::string& name) const {
    auto out = m_dir / ("get-" + name);
    auto result = cli({"get", "--desc", m_desc.string(), "--scenario", k_test_scenario, "--out", out.string()});
    if (result.exit_code != 0) {
      return {};
    }
    return directory_contents(out);
  }

 private:
  fs::path m_dir;
  fs::path m_cache;
  fs::path m_counter;
  KernelTriple m_kernel;
  fs::path m_desc;
};

// The "source" of `opcache --json exec` output (REQUIREs a JSON object).
std::string source_of(const ProcessResult& result) {
  auto document = json::parse(result.out, nullptr, false);
  REQUIRE(document.is_object());
  return document.value("source", "");
}

// Runs the copying command twice (into dir/<prefix>1 and 2) with `globals`
// (which include --json): each run runs the command, reports "bypassed" with
// a "note" containing `note`, writes the kernel and stores nothing.
void check_bypassed_twice(const ExecFixture& fx, const TempDir& dir, const std::string& prefix,
                          const std::vector<std::string>& globals, const std::string& note) {
  for (int run = 1; run <= 2; ++run) {
    auto out = dir / (prefix + std::to_string(run));
    auto result = fx.copy_kernel(out, globals);
    INFO("run ", run, ": ", describe(result));
    CHECK(result.exit_code == 0);
    CHECK(count_lines(fx.counter()) == static_cast<std::size_t>(run));
    CHECK(source_of(result) == "bypassed");
    CHECK(json::parse(result.out).value("note", "").find(note) != std::string::npos);
    CHECK(directory_contents(out) == contents_of(fx.kernel()));
    CHECK(fx.has() == 1);
  }
}

}  // namespace

TEST_CASE("e2e::exec hit writes the stored outputs byte-exact, exits 0 and does not run the command") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  std::vector<std::string> put{"put", "--desc", fx.desc().string(), "--scenario", k_test_scenario};
  for (const auto& file : fx.kernel().files()) {
    put.push_back(file.string());
  }
  auto stored = fx.cli(put);
  REQUIRE_MESSAGE(stored.exit_code == 0, describe(stored));

  const auto marker = dir / "command-ran";
  auto out = dir / "out";
  auto result = fx.exec(out, fx.kernel_outputs(), "touch \"$0\"; exit 9", {marker.string()});
  INFO(describe(result));
  CHECK(result.exit_code == 0);
  CHECK_FALSE(fs::exists(marker));
  CHECK(directory_contents(out) == contents_of(fx.kernel()));
  CHECK(result.err.find("hit") != std::string::npos);
}

TEST_CASE("e2e::exec miss runs the command once, stores only the declared outputs and exits 0") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  // The command also writes an undeclared build log; only --output files are stored.
  const std::string script = fx.copy_kernel_script() + " && echo 'compiler chatter' > \"$0/build.log\"";
  auto out = dir / "out";
  auto first = fx.exec(out, fx.kernel_outputs(), script, {out.string()});
  INFO(describe(first));
  CHECK(first.exit_code == 0);
  CHECK(count_lines(fx.counter()) == 1);
  CHECK(fx.has() == 0);
  CHECK(fx.stored("after-miss") == contents_of(fx.kernel()));

  // The second exec is a hit: the command does not run again, the outputs are byte-exact.
  auto out2 = dir / "out2";
  auto second = fx.exec(out2, fx.kernel_outputs(), script, {out2.string()});
  INFO(describe(second));
  CHECK(second.exit_code == 0);
  CHECK(count_lines(fx.counter()) == 1);
  CHECK(directory_contents(out2) == contents_of(fx.kernel()));
}

TEST_CASE("e2e::exec failing command exits with its status and stores nothing") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  auto out = dir / "out";
  // It writes every output first and then fails: still nothing is stored.
  auto result = fx.exec(out, fx.kernel_outputs(), fx.copy_kernel_script() + " && exit 3", {out.string()});
  INFO(describe(result));
  CHECK(result.exit_code == 3);
  CHECK(count_lines(fx.counter()) == 1);
  CHECK(fx.has() == 1);

  // The failure is not cached: the next exec runs the command again.
  auto again = fx.copy_kernel(out);
  INFO(describe(again));
  CHECK(again.exit_code == 0);
  CHECK(count_lines(fx.counter()) == 2);
  CHECK(fx.has() == 0);
}

TEST_CASE("e2e::exec command that does not write a declared --output exits non-zero and stores nothing") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  auto out = dir / "out";
  auto outputs = fx.kernel_outputs();
  outputs.push_back("never_written.o");
  auto result = fx.exec(out, outputs, fx.copy_kernel_script(), {out.string()});
  INFO(describe(result));
  CHECK(result.exit_code != 0);
  CHECK(result.err.find("never_written.o") != std::string::npos);
  CHECK(count_lines(fx.counter()) == 1);
  CHECK(fx.has() == 1);
}

TEST_CASE("e2e::exec without --output stores the files the command created or changed, not unchanged ones") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  auto out = dir / "out";
  write_text(out / "old.txt", "left alone");
  write_text(out / "changed.txt", "before");
  // Make the pre-existing files visibly older than anything the command writes.
  for (const char* name : {"old.txt", "changed.txt"}) {
    fs::last_write_time(out / name, fs::file_time_type::clock::now() - std::chrono::hours(1));
  }
  const auto object = fx.kernel().object;
  auto result = fx.exec(out, {},
                        "printf 'run\\n' >> \"$1\" && cp \"$2\" \"$0/new.o\" && printf 'after, longer' > "
                        "\"$0/changed.txt\"",
                        {out.string(), fx.counter().string(), object.string()});
  INFO(describe(result));
  CHECK(result.exit_code == 0);
  auto stored = fx.stored("auto");
  CHECK(stored == std::map<std::string, std::string>{{"changed.txt", "after, longer"}, {"new.o", read_text(object)}});

  // A hit writes those two files into a fresh directory.
  auto out2 = dir / "out2";
  auto hit = fx.exec(out2, {}, "printf 'run\\n' >> \"$0\"; exit 4", {fx.counter().string()});
  INFO(describe(hit));
  CHECK(hit.exit_code == 0);
  CHECK(count_lines(fx.counter()) == 1);
  CHECK(directory_contents(out2) == stored);
}

TEST_CASE("e2e::exec --mode disable runs the command every time, stores nothing and ignores stored entries") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  for (int run = 1; run <= 2; ++run) {
    auto out = dir / ("out" + std::to_string(run));
    auto result = fx.copy_kernel(out, {"--mode", "disable"});
    INFO("run ", run, ": ", describe(result));
    CHECK(result.exit_code == 0);
    CHECK(count_lines(fx.counter()) == static_cast<std::size_t>(run));
    CHECK(directory_contents(out) == contents_of(fx.kernel()));
    // Nothing read or written: not even an index is created (or SQLite loaded).
    CHECK_FALSE(fs::exists(fx.cache() / "index.db"));
    if (run == 2) {
      CHECK(fx.has() == 1);  // `opcache has` creates the index
    }
  }
  // With an entry present, disable still runs the command and does not read the cache.
  auto filled = fx.copy_kernel(dir / "fill");
  REQUIRE_MESSAGE(filled.exit_code == 0, describe(filled));
  REQUIRE(fx.has() == 0);
  REQUIRE(count_lines(fx.counter()) == 3);
  auto disabled = fx.copy_kernel(dir / "out3", {"--json", "--mode", "disable"});
  INFO(describe(disabled));
  CHECK(disabled.exit_code == 0);
  CHECK(count_lines(fx.counter()) == 4);
  CHECK(source_of(disabled) == "bypassed");
}

TEST_CASE("e2e::exec --op-debug-level 1 bypasses the cache: the command runs every time, nothing is stored") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  check_bypassed_twice(fx, dir, "out", {"--json", "--op-debug-level", "1"}, "op_debug_level");

  // --op-debug-level 0 is the normal cached path.
  auto cached = fx.copy_kernel(dir / "out0", {"--op-debug-level", "0"});
  INFO(describe(cached));
  CHECK(cached.exit_code == 0);
  CHECK(fx.has() == 0);
}

TEST_CASE("e2e::exec --op-debug-list bypasses the listed op type only") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir, "relu", 48);
  check_bypassed_twice(fx, dir, "listed", {"--json", "--op-debug-list", "MatMul,relu"}, "");

  // Another op type in the list: cached as usual (built, then a hit).
  for (const char* expected : {"built", "hit"}) {
    auto out = dir / (std::string("unlisted-") + expected);
    auto result = fx.copy_kernel(out, {"--json", "--op-debug-list", "MatMul,Conv2D"});
    INFO(expected, ": ", describe(result));
    CHECK(result.exit_code == 0);
    CHECK(source_of(result) == expected);
    CHECK(directory_contents(out) == contents_of(fx.kernel()));
  }
  CHECK(count_lines(fx.counter()) == 3);
  CHECK(fx.has() == 0);
}

TEST_CASE("e2e::exec --json reports key, source and files for a miss and a hit") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  const std::string key = fx.key();
  std::set<std::string> names;
  for (const auto& name : fx.kernel_outputs()) {
    names.insert(name);
  }
  for (const char* expected : {"built", "hit"}) {
    auto out = dir / (std::string("out-") + expected);
    auto result = fx.copy_kernel(out, {"--json"});
    INFO(expected, ": ", describe(result));
    REQUIRE(result.exit_code == 0);
    auto document = json::parse(result.out, nullptr, false);
    REQUIRE(document.is_object());
    CHECK(document.value("key", "") == key);
    CHECK(document.value("source", "") == expected);
    REQUIRE(document.contains("files"));
    REQUIRE(document["files"].is_array());
    std::set<std::string> listed;
    for (const auto& file : document["files"]) {
      fs::path path = file.get<std::string>();
      CHECK(path.parent_path() == out);
      CHECK(fs::exists(path));
      listed.insert(path.filename().string());
    }
    CHECK(listed == names);
    CHECK(document.contains("build_ms"));
  }
  CHECK(count_lines(fx.counter()) == 1);
}

TEST_CASE("e2e::exec with a bad descriptor exits 2 naming the file and does not run the command") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  const auto marker = dir / "command-ran";
  struct Bad {
    const char* name;
    const char* text;
  };
  for (const Bad& bad : {Bad{"not-json.desc.json", "{\"op_type\": "}, Bad{"no-op-type.desc.json", "{\"attrs\":{}}"},
                         Bad{"array.desc.json", "[1,2]"}}) {
    auto desc = dir / bad.name;
    write_text(desc, bad.text);
    auto result = fx.exec(dir / "out", {"k.o"}, "touch \"$0\"", {marker.string()}, {}, desc);
    INFO(bad.name, ": ", describe(result));
    CHECK(result.exit_code == 2);
    CHECK(result.err.find(bad.name) != std::string::npos);
    CHECK_FALSE(fs::exists(marker));
  }
  auto missing = fx.exec(dir / "out", {"k.o"}, "touch \"$0\"", {marker.string()}, {}, dir / "absent.desc.json");
  INFO(describe(missing));
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("absent.desc.json") != std::string::npos);
  CHECK_FALSE(fs::exists(marker));
}

// Regression: the documented form (`opcache exec --help`: "... --output add_1.json
// -- ./compile_add.sh kernel_meta") with a command that has dashed arguments.
TEST_CASE("e2e::exec accepts --output NAME directly before -- CMD with dashed arguments") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  auto out = dir / "out";
  const auto object = fx.kernel().object;
  auto result = opcache::test::run_cli({"--cache-dir", fx.cache().string(), "exec", "--desc", fx.desc().string(),
                                        "--scenario", k_test_scenario, "--out", out.string(), "--key-on", "descriptor",
                                        "--output", "kernel.o",
                                        "--", "sh", "-c", "cp \"$0\" \"$1/kernel.o\"", object.string(), out.string()});
  INFO(describe(result));
  CHECK(result.exit_code == 0);
  CHECK(read_text(out / "kernel.o") == read_text(object));
  CHECK(fx.has() == 0);
}

// With the cache bypassed, exec is only a wrapper: the command's status is the
// answer even if it wrote nothing opcache could have stored.
TEST_CASE("e2e::exec with the cache bypassed exits with the command's status even when it writes no files") {
  hermetic_environment();
  TempDir dir;
  ExecFixture fx(dir);
  for (const auto& globals : std::vector<std::vector<std::string>>{{"--mode", "disable"}, {"--op-debug-level", "2"}}) {
    auto result = fx.exec(dir / "out", {}, "printf 'run\\n' >> \"$0\"", {fx.counter().string()}, globals);
    INFO(globals[0], ": ", describe(result));
    CHECK(result.exit_code == 0);
    auto failing = fx.exec(dir / "out", {}, "exit 4", {}, globals);
    INFO(globals[0], ": ", describe(failing));
    CHECK(failing.exit_code == 4);
  }
  CHECK(count_lines(fx.counter()) == 2);
  CHECK(fx.has() == 1);
}
