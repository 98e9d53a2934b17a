// opcache exec keyed on what the command reads (api/exec.cpp,
// store/observed_inputs.cpp, docs/formats.md "Exec manifests"): each case
// builds once, changes a file that no argument and no --input names (a
// header, a module, a model named inside an argument, standard input...),
// runs the same exec again and checks that it is a miss that writes what
// the command makes of the new files; and that an unchanged tree hits
// without running the command. Real programs: gcc, python3, sh, busybox.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <thread>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.hpp"
#include "tests/support/process.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

namespace fs = std::filesystem;
using opcache::test::CliRunner;
using opcache::test::ProcessOptions;
using opcache::test::ProcessResult;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::write_executable;
using opcache::test::write_text;

namespace exec_observed {

constexpr const char* k_scenario = "phase=infer,toolchain=native,soc=host";

// A work tree with a descriptor and a cache; `opcache --json exec` runs in it.
struct Tree {
  fs::path dir;
  fs::path cache;

  explicit Tree(const fs::path& directory, fs::path cache_dir = {})
      : dir(directory), cache(cache_dir.empty() ? directory / "cache" : std::move(cache_dir)) {
    fs::create_directories(dir);
    write_text(dir / "desc.json", R"({"op_type":"Observed"})");
  }

  ProcessOptions options(std::map<std::string, std::string> env = {}) const {
    auto options = opcache::test::hermetic(std::move(env));
    options.cwd = dir.string();
    return options;
  }

  // `opcache --json [globals] exec --desc desc.json --scenario S --out OUT [extra...] -- command`
  ProcessResult exec(const std::string& out, const std::vector<std::string>& command,
                     const std::vector<std::string>& extra = {}, const std::vector<std::string>& globals = {},
                     ProcessOptions options_override = {}) const {
    std::vector<std::string> args{"--json"};
    args.insert(args.end(), globals.begin(), globals.end());
    args.insert(args.end(), {"exec", "--desc", "desc.json", "--scenario", k_scenario, "--out", out});
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    auto options = options_override.cwd.empty() ? this->options() : options_override;
    return CliRunner(dir, cache).run(args, options);
  }

  void run_directly(const std::vector<std::string>& command) const {
    auto result = opcache::test::run_process(command, options());
    INFO("stderr: ", result.err);
    REQUIRE(result.exit_code == 0);
  }

  std::string file(const std::string& name) const { return read_text(dir / name); }
};

nlohmann::json report_of(const ProcessResult& result) {
  INFO("stdout: ", result.out, "\nstderr: ", result.err);
  REQUIRE(result.exit_code == 0);
  auto document = nlohmann::json::parse(result.out, nullptr, false);
  REQUIRE(document.is_object());
  return document;
}

std::string source_of(const ProcessResult& result) { return report_of(result).value("source", "?"); }

// A marker file the command appends to each time it really runs.
std::vector<std::string> counted(const std::string& script) {
  return {"sh", "-c", "echo ran >> runs.log; " + script};
}

std::size_t runs(const Tree& tree) {
  const auto log = tree.dir / "runs.log";
  if (!fs::exists(log)) {
    return 0;
  }
  const auto text = read_text(log);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// (the test cases below stay in namespace exec_observed: the unity build shares helpers' names)

TEST_CASE("e2e::exec observed: an edited header that no argument names is a miss with gcc's new object") {
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "k.h", "#define FACTOR 3\n");
  write_text(tree.dir / "k.c", "#include \"k.h\"\nint scale(int x) { return x * FACTOR; }\n");
  const std::vector<std::string> gcc{"gcc", "-O2", "-c", "k.c", "-o", "out/k.o"};
  CHECK(source_of(tree.exec("out", gcc, {"--output", "k.o"})) == "built");
  CHECK(source_of(tree.exec("out", gcc, {"--output", "k.o"})) == "hit");

  write_text(tree.dir / "k.h", "#define FACTOR 7\n");
  auto edited = tree.exec("out", gcc, {"--output", "k.o"});
  auto report = report_of(edited);
  CHECK(report.value("source", "") == "built");
  CHECK(report.value("miss_reason", "") == "k.h changed");
  tree.run_directly({"gcc", "-O2", "-c", "k.c", "-o", "direct.o"});
  CHECK(tree.file("out/k.o") == tree.file("direct.o"));
  // The old header again: the first build's entry, without compiling.
  write_text(tree.dir / "k.h", "#define FACTOR 3\n");
  CHECK(source_of(tree.exec("out", gcc, {"--output", "k.o"})) == "hit");
  // The miss line a person sees names the header.
  write_text(tree.dir / "k.h", "#define FACTOR 9\n");
  auto text = CliRunner(tree.dir, tree.cache)
                  .run({"exec", "--desc", "desc.json", "--scenario", k_scenario, "--out", "out", "--", "gcc", "-O2",
                        "-c", "k.c", "-o", "out/k.o"},
                       tree.options());
  CHECK(text.exit_code == 0);
  CHECK(text.err.find("miss: k.h changed") != std::string::npos);
}

TEST_CASE("e2e::exec observed: a header that now shadows another in an earlier -I directory is a miss") {
  TempDir temp;
  Tree tree(temp.path());
  fs::create_directories(tree.dir / "inc1");
  fs::create_directories(tree.dir / "inc2");
  write_text(tree.dir / "inc2" / "k.h", "#define FACTOR 3\n");
  write_text(tree.dir / "k.c", "#include \"k.h\"\nint scale(int x) { return x * FACTOR; }\n");
  const std::vector<std::string> gcc{"gcc", "-O2", "-Iinc1", "-Iinc2", "-c", "k.c", "-o", "out/k.o"};
  CHECK(source_of(tree.exec("out", gcc)) == "built");
  CHECK(source_of(tree.exec("out", gcc)) == "hit");

  write_text(tree.dir / "inc1" / "k.h", "#define FACTOR 5\n");
  auto shadowed = report_of(tree.exec("out", gcc));
  CHECK(shadowed.value("source", "") == "built");
  CHECK(shadowed.value("miss_reason", "") == "inc1/k.h now exists");
  tree.run_directly({"gcc", "-O2", "-Iinc1", "-Iinc2", "-c", "k.c", "-o", "direct.o"});
  CHECK(tree.file("out/k.o") == tree.file("direct.o"));
}

// A directory of its own under /dev/shm, removed at the end.
struct SharedMemoryDir {
  fs::path path;
  SharedMemoryDir() {
    char name[] = "/dev/shm/opcache-test-XXXXXX";
    if (::mkdtemp(name) != nullptr) {
      path = name;
    }
  }
  SharedMemoryDir(const SharedMemoryDir&) = delete;
  SharedMemoryDir& operator=(const SharedMemoryDir&) = delete;
  ~SharedMemoryDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

TEST_CASE("e2e::exec observed: files under /dev/shm are inputs and outputs like any other (a tmpfs, not a device)") {
  SharedMemoryDir shm;
  OPCACHE_SKIP_IF(shm.path.empty(), "/dev/shm is not a writable directory on this machine");
  TempDir temp;
  Tree tree(temp.path());
  write_text(shm.path / "inc" / "k.h", "#define FACTOR 3\n");
  write_text(tree.dir / "k.c", "#include \"k.h\"\nint scale(int x) { return x * FACTOR; }\n");
  const auto out = (shm.path / "out").string();
  const std::vector<std::string> gcc{"gcc", "-O2", "-I" + (shm.path / "inc").string(), "-c", "k.c", "-o", out + "/k.o"};
  const auto built = tree.exec(out, gcc, {"--output", "k.o"});
  INFO("first exec: ", built.out, built.err);
  CHECK(source_of(built) == "built");
  const auto hit = tree.exec(out, gcc, {"--output", "k.o"});
  INFO("second exec: ", hit.out, hit.err);
  CHECK(source_of(hit) == "hit");

  write_text(shm.path / "inc" / "k.h", "#define FACTOR 7\n");
  const auto after_edit = tree.exec(out, gcc, {"--output", "k.o"});
  INFO("exec after the edit: ", after_edit.out, after_edit.err);
  auto edited = report_of(after_edit);
  CHECK(edited.value("source", "") == "built");
  CHECK(edited.value("miss_reason", "").find("k.h changed") != std::string::npos);
  tree.run_directly({"gcc", "-O2", "-I" + (shm.path / "inc").string(), "-c", "k.c", "-o", "direct.o"});
  CHECK(read_text(fs::path(out) / "k.o") == tree.file("direct.o"));
}

// `opcache --json --cache-dir CACHE exec …` run by sh after `redirection`
// (e.g. "3<model.txt"), so that it inherits that descriptor.
ProcessResult exec_with_descriptor(const Tree& tree, const std::string& redirection, const std::string& script) {
  const std::string command = "exec " + redirection + "; exec '" + opcache::test::cli_path() + "' --json --cache-dir '" +
                              tree.cache.string() + "' exec --desc desc.json --scenario " + k_scenario +
                              " --out out --output m.txt -- sh -c '" + script + "'";
  return opcache::test::run_process({"sh", "-c", command}, tree.options());
}

std::vector<std::string> notes_of(const ProcessResult& result) {
  return report_of(result).value("notes", std::vector<std::string>());
}

TEST_CASE("e2e::exec observed: a file the command reads through an inherited descriptor makes the run uncached") {
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "model.txt", "weights 1\n");
  const std::string reads_fd3 = "cat <&3 > out/m.txt";
  const auto first = exec_with_descriptor(tree, "3<model.txt", reads_fd3);
  CHECK(source_of(first) == "built");
  const auto notes = notes_of(first);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("not cached: the command inherits descriptor 3, open for reading on ") == 0);
  CHECK(notes[0].find("model.txt") != std::string::npos);
  write_text(tree.dir / "model.txt", "weights 2\n");
  CHECK(source_of(exec_with_descriptor(tree, "3<model.txt", reads_fd3)) == "built");
  CHECK(tree.file("out/m.txt") == "weights 2\n");

  // A descriptor only written to (a harness's log) is no reason: the run is cached and hits.
  const std::string writes_fd3 = "echo built >&3; echo out > out/m.txt";
  CHECK(source_of(exec_with_descriptor(tree, "3>>build.log", writes_fd3)) == "built");
  const auto again = exec_with_descriptor(tree, "3>>build.log", writes_fd3);
  CHECK(source_of(again) == "hit");
  CHECK(notes_of(again).empty());
}

TEST_CASE("e2e::exec observed: --out . keeps the sources in it as inputs, and takes only what the command wrote") {
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "k.c", "int scale(int x) { return x * 3; }\n");
  write_text(tree.dir / "notes.txt", "not an output\n");
  const std::vector<std::string> gcc{"gcc", "-O2", "-c", "k.c", "-o", "k.o"};
  auto first = report_of(tree.exec(".", gcc));
  CHECK(first.value("source", "") == "built");
  REQUIRE(first["files"].size() == 1);
  CHECK(fs::path(first["files"][0].get<std::string>()).filename() == "k.o");

  write_text(tree.dir / "k.c", "int scale(int x) { return x * 11; }\n");
  CHECK(source_of(tree.exec(".", gcc)) == "built");
  tree.run_directly({"gcc", "-O2", "-c", "k.c", "-o", "direct.o"});
  CHECK(tree.file("k.o") == tree.file("direct.o"));
}

TEST_CASE("e2e::exec observed: a file named inside an argument (--model=FILE, @file) is an input") {
  TempDir temp;
  Tree tree(temp.path());
  // A stand-in for ATC: reads the model named by --model= and writes the .om named by --output=.
  write_executable(tree.dir / "atc",
                   "#!/bin/sh\nfor a in \"$@\"; do case $a in --model=*) m=${a#--model=};; --output=*) o=${a#--output=};; "
                   "esac; done\n{ echo om; cat \"$m\"; } > \"$o\"\n");
  write_text(tree.dir / "m.onnx", "graph v1\n");
  const std::vector<std::string> atc{"./atc", "--model=m.onnx", "--output=out/m.om"};
  CHECK(source_of(tree.exec("out", atc)) == "built");
  CHECK(source_of(tree.exec("out", atc)) == "hit");
  write_text(tree.dir / "m.onnx", "graph v2\n");
  CHECK(source_of(tree.exec("out", atc)) == "built");
  CHECK(tree.file("out/m.om") == "om\ngraph v2\n");

  // gcc's response file, and the file it names.
  write_text(tree.dir / "k.c", "int f(void) { return 1; }\n");
  write_text(tree.dir / "args.rsp", "-O2 -c k.c -o out/k.o\n");
  CHECK(source_of(tree.exec("out", {"gcc", "@args.rsp"})) == "built");
  write_text(tree.dir / "args.rsp", "-O0 -c k.c -o out/k.o\n");
  CHECK(source_of(tree.exec("out", {"gcc", "@args.rsp"})) == "built");
  tree.run_directly({"gcc", "-O0", "-c", "k.c", "-o", "direct.o"});
  CHECK(tree.file("out/k.o") == tree.file("direct.o"));
}

TEST_CASE("e2e::exec observed: a Python script's imported module from its directory is an input") {
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "tiling.py", "FACTOR = 3\n");
  write_text(tree.dir / "op.py", "import sys, tiling\nopen(sys.argv[1], 'w').write('factor=%d\\n' % tiling.FACTOR)\n");
  const std::vector<std::string> python{"python3", "op.py", "out/op.txt"};
  CHECK(source_of(tree.exec("out", python)) == "built");
  CHECK(source_of(tree.exec("out", python)) == "hit");
  write_text(tree.dir / "tiling.py", "FACTOR = 8\n");
  const auto rebuilt = tree.exec("out", python);
  INFO("the rebuild's report (its notes say why it was not cached, if it was not): ", rebuilt.out, rebuilt.err);
  CHECK(source_of(rebuilt) == "built");
  CHECK(tree.file("out/op.txt") == "factor=8\n");
  const auto again = tree.exec("out", python);
  INFO("the next run's report: ", again.out, again.err);
  CHECK(source_of(again) == "hit");
}

TEST_CASE("e2e::exec observed: standard input is keyed: gcc -x c - with another source is a miss") {
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "a.c", "int f(void) { return 1; }\n");
  write_text(tree.dir / "b.c", "int f(void) { return 2; }\n");
  auto with_stdin = [&tree](const std::string& file) {
    auto options = tree.options();
    options.stdin_data = read_text(tree.dir / file);
    return tree.exec("out", {"gcc", "-O2", "-x", "c", "-c", "-", "-o", "out/k.o"}, {}, {}, options);
  };
  CHECK(source_of(with_stdin("a.c")) == "built");
  CHECK(source_of(with_stdin("a.c")) == "hit");
  CHECK(source_of(with_stdin("b.c")) == "built");
  auto direct = tree.options();
  direct.stdin_data = read_text(tree.dir / "b.c");
  REQUIRE(opcache::test::run_process({"gcc", "-O2", "-x", "c", "-c", "-", "-o", "direct.o"}, direct).exit_code == 0);
  CHECK(tree.file("out/k.o") == tree.file("direct.o"));
  // A pipe that stays open with nothing in it cannot be keyed: the command runs, uncached, and says so.
  const auto quiet_pipe = opcache::test::run_process(
      {"sh", "-c", "sleep 2 | \"$0\" --cache-dir cache --json exec --desc desc.json --scenario " + std::string(k_scenario) +
                       " --out out -- gcc -O2 -c a.c -o out/k.o",
       opcache::test::cli_path()},
      tree.options());
  CHECK(quiet_pipe.exit_code == 0);
  CHECK(report_of(quiet_pipe)["notes"][0].get<std::string>().find("stays open with nothing in it") != std::string::npos);
  // No data (an empty pipe, as /dev/null) is not keyed: the same key as a plain run.
  CHECK(source_of(tree.exec("out", {"gcc", "-O2", "-c", "a.c", "-o", "out/k.o"})) == "built");
  CHECK(source_of(tree.exec("out", {"gcc", "-O2", "-c", "a.c", "-o", "out/k.o"})) == "hit");
}

TEST_CASE("e2e::exec observed: a statically linked program (busybox) is traced like any other") {
  OPCACHE_SKIP_IF(::access("/bin/busybox", X_OK) != 0, "/bin/busybox (Debian's busybox-static) is not installed");
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "m.txt", "one\n");
  const std::vector<std::string> command{"/bin/busybox", "sh", "-c", "/bin/busybox cat m.txt > out/o.txt"};
  CHECK(source_of(tree.exec("out", command)) == "built");
  CHECK(source_of(tree.exec("out", command)) == "hit");
  write_text(tree.dir / "m.txt", "two\n");
  CHECK(source_of(tree.exec("out", command)) == "built");
  CHECK(tree.file("out/o.txt") == "two\n");
}

TEST_CASE("e2e::exec observed: an unchanged tree hits without running the command, and a failing command stores nothing") {
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "in.txt", "data\n");
  const auto command = counted("cat in.txt > out/o.txt");
  CHECK(source_of(tree.exec("out", command)) == "built");
  CHECK(source_of(tree.exec("out", command)) == "hit");
  CHECK(source_of(tree.exec("out", command)) == "hit");
  CHECK(runs(tree) == 1);
  CHECK(tree.file("out/o.txt") == "data\n");

  auto failed = tree.exec("out", {"sh", "-c", "cat in.txt > out/o.txt; exit 3"});
  CHECK(failed.exit_code == 3);
}

// The local manifest file of the command whose last build stored `entry`.
fs::path manifest_holding(const Tree& tree, const std::string& entry) {
  for (const auto& file : fs::recursive_directory_iterator(tree.cache / "manifests")) {
    if (file.is_regular_file() &&
        nlohmann::json::parse(read_text(file.path()))["builds"][0].value("entry", "") == entry) {
      return file.path();
    }
  }
  FAIL("no manifest holds ", entry);
  return {};
}

TEST_CASE("e2e::exec observed: a local build with `seen` is taken at its entry, one without is keyed again") {
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "a.c", "int a(void) { return 1; }\n");
  write_text(tree.dir / "b.c", "int b(void) { return 2; }\n");
  const std::vector<std::string> gcc_a{"gcc", "-c", "a.c", "-o", "out/k.o"};
  const auto built_a = report_of(tree.exec("out", gcc_a));
  const auto key_a = built_a.value("key", "");
  const auto key_b = report_of(tree.exec("out", {"gcc", "-c", "b.c", "-o", "out/k.o"})).value("key", "");
  const auto object_b = tree.file("out/k.o");
  REQUIRE(key_a != key_b);

  // This machine keyed the build (the compiler's files are in its `seen`), so
  // a hit takes its entry as written: pointed at b's entry, it delivers b's object.
  const auto path = manifest_holding(tree, key_a);
  auto manifest = nlohmann::json::parse(read_text(path));
  REQUIRE_FALSE(manifest["builds"][0]["seen"].empty());
  manifest["builds"][0]["entry"] = key_b;
  write_text(path, manifest.dump());
  auto trusted = report_of(tree.exec("out", gcc_a));
  CHECK(trusted.value("source", "") == "hit");
  CHECK(trusted.value("key", "") == key_b);
  CHECK(tree.file("out/k.o") == object_b);

  // Without `seen` (a build from another machine) the entry is derived from
  // the inputs again: b's entry is not what they key as, so it is a miss.
  manifest["builds"][0].erase("seen");
  write_text(path, manifest.dump());
  auto keyed_again = report_of(tree.exec("out", gcc_a));
  CHECK(keyed_again.value("source", "") == "built");
  CHECK(keyed_again.value("key", "") == key_a);
}

TEST_CASE("e2e::exec observed: a neighbour's file written in a shared --out during the run is not taken") {
  TempDir temp;
  Tree tree(temp.path());
  // The command writes its file, then waits until the test has written the
  // neighbour's file into the same --out (a second exec sharing it).
  const std::vector<std::string> command{"sh", "-c", "echo mine > out/mine.txt; while [ ! -e go ]; do sleep 0.01; done"};
  ProcessResult first;
  std::thread exec([&] { first = tree.exec("out", command); });
  while (!fs::exists(tree.dir / "out" / "mine.txt")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  write_text(tree.dir / "out" / "theirs.txt", "neighbour v1\n");
  write_text(tree.dir / "go", "");
  exec.join();
  auto report = report_of(first);
  REQUIRE(report["files"].size() == 1);
  CHECK(fs::path(report["files"][0].get<std::string>()).filename() == "mine.txt");

  // A hit writes this command's file and leaves the neighbour's current one alone.
  fs::remove(tree.dir / "go");
  fs::remove(tree.dir / "out" / "mine.txt");
  write_text(tree.dir / "out" / "theirs.txt", "neighbour v2\n");
  CHECK(source_of(tree.exec("out", command)) == "hit");
  CHECK(tree.file("out/mine.txt") == "mine\n");
  CHECK(tree.file("out/theirs.txt") == "neighbour v2\n");
}

TEST_CASE("e2e::exec observed: two checkouts share through base_dir, with absolute paths in the command") {
  TempDir temp;
  Tree a(temp.path() / "a" / "repo", temp.path() / "cache");
  Tree b(temp.path() / "b" / "repo", temp.path() / "cache");
  for (const Tree* tree : {&a, &b}) {
    fs::create_directories(tree->dir / "include");
    write_text(tree->dir / "include" / "k.h", "#define FACTOR 3\n");
    write_text(tree->dir / "k.c", "#include \"k.h\"\nint scale(int x) { return x * FACTOR; }\n");
  }
  auto command = [](const Tree& tree) {
    return std::vector<std::string>{"gcc", "-O2", "-I" + (tree.dir / "include").string(), "-c",
                                    (tree.dir / "k.c").string(), "-o", (tree.dir / "out" / "k.o").string()};
  };
  auto with_base = [](const Tree& tree) { return std::vector<std::string>{"--base-dir", tree.dir.string()}; };
  CHECK(source_of(a.exec("out", command(a), {}, with_base(a))) == "built");
  CHECK(source_of(b.exec("out", command(b), {}, with_base(b))) == "hit");
  CHECK(b.file("out/k.o") == a.file("out/k.o"));
  // Without base_dir the paths differ and nothing is shared.
  Tree c(temp.path() / "c" / "repo", temp.path() / "cache");
  fs::copy(a.dir / "include", c.dir / "include", fs::copy_options::recursive);
  fs::copy_file(a.dir / "k.c", c.dir / "k.c");
  CHECK(source_of(c.exec("out", command(c))) == "built");
  // An edited header in b is b's miss only.
  write_text(b.dir / "include" / "k.h", "#define FACTOR 4\n");
  CHECK(source_of(b.exec("out", command(b), {}, with_base(b))) == "built");
  CHECK(source_of(a.exec("out", command(a), {}, with_base(a))) == "hit");
}

TEST_CASE("e2e::exec observed: three machines and a team server: an equal tree hits without building, an edited header rebuilds") {
  TempDir temp;
  write_text(temp.path() / "tokens", opcache::test::token_line(opcache::test::k_write_token, "team", "read,write"));
  write_text(temp.path() / "token", opcache::test::k_write_token);
  opcache::test::ServerProcess server(temp.path() / "storage", {"--tokens", (temp.path() / "tokens").string()});
  // Each machine: its own checkout and its own cache directory; no shared file system but the server.
  std::vector<Tree> machines;
  for (const char* name : {"a", "b", "c"}) {
    machines.emplace_back(temp.path() / name / "repo", temp.path() / name / "cache");
    write_text(machines.back().dir / "k.h", "#define FACTOR 3\n");
    write_text(machines.back().dir / "k.c", "#include \"k.h\"\nint scale(int x) { return x * FACTOR; }\n");
  }
  write_text(machines[2].dir / "k.h", "#define FACTOR 4\n");  // machine c's header differs
  const std::vector<std::string> gcc{"sh", "-c", "echo ran >> runs.log; gcc -O2 -c k.c -o out/k.o"};
  auto globals = [&](const Tree& tree) {
    return std::vector<std::string>{"--base-dir", tree.dir.string(), "--remote", server.base_url() + "|upload",
                                    "--token-file", (temp.path() / "token").string()};
  };
  // a builds; its entry and manifest reach the server at once (team single flight's lease and upload).
  CHECK(source_of(machines[0].exec("out", gcc, {}, globals(machines[0]))) == "built");
  // b, with an equal tree, hits from the server without running the command.
  CHECK(source_of(machines[1].exec("out", gcc, {}, globals(machines[1]))) == "hit");
  CHECK(runs(machines[1]) == 0);
  CHECK(machines[1].file("out/k.o") == machines[0].file("out/k.o"));
  // c, whose k.h differs, never takes a's object: it builds its own, gcc's object of its header.
  auto c = report_of(machines[2].exec("out", gcc, {}, globals(machines[2])));
  CHECK(c.value("source", "") == "built");
  CHECK(c.value("miss_reason", "") == "k.h changed");
  CHECK(runs(machines[2]) == 1);
  machines[2].run_directly({"gcc", "-O2", "-c", "k.c", "-o", "direct.o"});
  CHECK(machines[2].file("out/k.o") == machines[2].file("direct.o"));
  CHECK(machines[2].file("out/k.o") != machines[0].file("out/k.o"));
}

TEST_CASE("e2e::exec observed: a fresh machine's first exec prefetches the scenario's entries and manifests from the server") {
  TempDir temp;
  write_text(temp.path() / "tokens", opcache::test::token_line(opcache::test::k_write_token, "team", "read,write"));
  write_text(temp.path() / "token", opcache::test::k_write_token);
  opcache::test::ServerProcess server(temp.path() / "storage",
                                      {"--tokens", (temp.path() / "tokens").string(), "--anonymous-read"});
  Tree a(temp.path() / "a" / "repo", temp.path() / "a" / "cache");
  Tree b(temp.path() / "b" / "repo", temp.path() / "b" / "cache");
  for (const Tree* tree : {&a, &b}) {
    write_text(tree->dir / "k1.c", "int one(int x) { return x + 1; }\n");
    write_text(tree->dir / "k2.c", "int two(int x) { return x + 2; }\n");
  }
  auto gcc = [](const std::string& stem) {
    return std::vector<std::string>{"sh", "-c", "echo ran >> runs.log; gcc -O2 -c " + stem + ".c -o out/" + stem + ".o"};
  };
  const std::vector<std::string> uploading{"--base-dir", a.dir.string(), "--remote", server.base_url() + "|upload",
                                           "--token-file", (temp.path() / "token").string()};
  CHECK(source_of(a.exec("out", gcc("k1"), {}, uploading)) == "built");
  CHECK(source_of(a.exec("out", gcc("k2"), {}, uploading)) == "built");
  // b's first exec finds nothing here: it prefetches the scenario, then hits.
  CHECK(source_of(b.exec("out", gcc("k1"), {}, {"--base-dir", b.dir.string(), "--remote", server.base_url()})) == "hit");
  // Its second finds k2's entry and manifest here already: a hit with no remote at all.
  CHECK(source_of(b.exec("out", gcc("k2"), {}, {"--base-dir", b.dir.string(), "--no-remote"})) == "hit");
  CHECK(runs(b) == 0);
  CHECK(b.file("out/k2.o") == a.file("out/k2.o"));
}

TEST_CASE("e2e::exec observed: push and pull carry the manifests, so a pulled machine hits with no remote at exec time") {
  TempDir temp;
  Tree a(temp.path() / "a" / "repo", temp.path() / "a" / "cache");
  Tree b(temp.path() / "b" / "repo", temp.path() / "b" / "cache");
  for (const Tree* tree : {&a, &b}) {
    write_text(tree->dir / "k.h", "#define FACTOR 3\n");
    write_text(tree->dir / "k.c", "#include \"k.h\"\nint scale(int x) { return x * FACTOR; }\n");
  }
  const std::string shared = "file://" + (temp.path() / "shared").string();
  const std::vector<std::string> gcc{"sh", "-c", "echo ran >> runs.log; gcc -O2 -c k.c -o out/k.o"};
  CHECK(source_of(a.exec("out", gcc, {}, {"--base-dir", a.dir.string()})) == "built");
  auto pushed = CliRunner(a.dir, a.cache).run({"push", "--remote", shared + "|upload"}, a.options());
  INFO(pushed.out, pushed.err);
  REQUIRE(pushed.exit_code == 0);
  auto pulled = CliRunner(b.dir, b.cache).run({"pull", "--remote", shared}, b.options());
  INFO(pulled.out, pulled.err);
  REQUIRE(pulled.exit_code == 0);
  CHECK(source_of(b.exec("out", gcc, {}, {"--base-dir", b.dir.string()})) == "hit");
  CHECK(runs(b) == 0);
}

TEST_CASE("e2e::exec observed: two CANN installs at other places with equal files share, an edited op implementation misses") {
  TempDir temp;
  Tree tree(temp.path() / "work");
  const fs::path system_install = temp.path() / "usr/local/Ascend/ascend-toolkit/latest";
  const fs::path home_install = temp.path() / "home/me/Ascend/ascend-toolkit/latest";
  for (const auto& root : {system_install, home_install}) {
    write_text(root / "opp/op_impl/built-in/ai_core/tbe/impl/add.py", "def add(x, y): return x + y\n");
  }
  // The operator compiler reads its implementation from the install the environment names.
  const std::vector<std::string> command{
      "sh", "-c", "echo ran >> runs.log; cat \"$ASCEND_OPP_PATH/op_impl/built-in/ai_core/tbe/impl/add.py\" > out/add.o"};
  auto with_install = [&tree](const fs::path& root) {
    auto options = tree.options({{"ASCEND_TOOLKIT_HOME", root.string()}, {"ASCEND_OPP_PATH", (root / "opp").string()}});
    return options;
  };
  CHECK(source_of(tree.exec("out", command, {}, {}, with_install(system_install))) == "built");
  // The same files in another place: ASCEND_OPP_PATH and the file read key as {cann}/..., so it hits.
  CHECK(source_of(tree.exec("out", command, {}, {}, with_install(home_install))) == "hit");
  CHECK(runs(tree) == 1);
  // An edited operator implementation in that install is a miss that reads it.
  write_text(home_install / "opp/op_impl/built-in/ai_core/tbe/impl/add.py", "def add(x, y): return y + x\n");
  auto edited = report_of(tree.exec("out", command, {}, {}, with_install(home_install)));
  CHECK(edited.value("source", "") == "built");
  CHECK(edited.value("miss_reason", "").find("add.py changed") != std::string::npos);
  CHECK(tree.file("out/add.o") == "def add(x, y): return y + x\n");
}

TEST_CASE("e2e::exec observed: nvcc (cicc, ptxas and a host compiler under its driver) misses on an edited header") {
  const char* const nvcc = "/usr/local/cuda/bin/nvcc";
  OPCACHE_SKIP_IF(::access(nvcc, X_OK) != 0, std::string(nvcc) + " is not installed");
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "scale.h", "#define FACTOR 3.0f\n");
  write_text(tree.dir / "scale.cu",
             "#include \"scale.h\"\n__global__ void scale(float* x) { x[threadIdx.x] *= FACTOR; }\n");
  const std::vector<std::string> command{nvcc, "-arch=sm_90", "-cubin", "scale.cu", "-o", "out/scale.cubin"};
  CHECK(source_of(tree.exec("out", command)) == "built");
  CHECK(source_of(tree.exec("out", command)) == "hit");
  write_text(tree.dir / "scale.h", "#define FACTOR 5.0f\n");
  auto edited = report_of(tree.exec("out", command));
  CHECK(edited.value("source", "") == "built");
  CHECK(edited.value("miss_reason", "") == "scale.h changed");
  tree.run_directly({nvcc, "-arch=sm_90", "-cubin", "scale.cu", "-o", "direct.cubin"});
  CHECK(tree.file("out/scale.cubin") == tree.file("direct.cubin"));
}

namespace {

// A program that runs its arguments under a seccomp filter refusing (EPERM)
// every filter that asks for a listener, as a strict container profile
// may: what a kernel that offers listeners looks like from inside one.
constexpr const char* k_no_listener_program = R"(#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char** argv) {
  (void)argc;
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_seccomp, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SECCOMP_FILTER_FLAG_NEW_LISTENER, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {sizeof code / sizeof code[0], code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    perror("seccomp");
    return 99;
  }
  execvp(argv[1], argv + 1);
  perror("execvp");
  return 98;
}
)";

}  // namespace

TEST_CASE("e2e::exec observed: where a seccomp profile refuses a listener, exec traces under ptrace stops and caches") {
  // The default mechanism comes from the kernel's release, not a probe: the
  // refused listener must not make the run uncached.
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "no_listener.c", k_no_listener_program);
  tree.run_directly({"gcc", "-O2", "-o", "no_listener", "no_listener.c"});
  write_text(tree.dir / "k.h", "#define FACTOR 3\n");
  write_text(tree.dir / "k.c", "#include \"k.h\"\nint scale(int x) { return x * FACTOR; }\n");
  auto exec_without_listener = [&tree] {
    auto options = tree.options();
    return opcache::test::run_process({(tree.dir / "no_listener").string(), opcache::test::cli_path(), "--json",
                                       "--cache-dir", tree.cache.string(), "exec", "--desc", "desc.json", "--scenario",
                                       k_scenario, "--out", "out", "--output", "k.o", "--", "gcc", "-O2", "-c", "k.c",
                                       "-o", "out/k.o"},
                                      options);
  };
  auto built = report_of(exec_without_listener());
  CHECK(built.value("source", "") == "built");
  CHECK(built.dump().find("not cached") == std::string::npos);
  CHECK(source_of(exec_without_listener()) == "hit");
  write_text(tree.dir / "k.h", "#define FACTOR 7\n");  // seen under ptrace stops: a miss
  auto edited = report_of(exec_without_listener());
  CHECK(edited.value("source", "") == "built");
  CHECK(edited.value("miss_reason", "") == "k.h changed");
}

TEST_CASE("e2e::exec observed: where the system refuses to let opcache trace (under strace -f), exec runs it uncached") {
  const bool has_strace = fs::exists("/usr/bin/strace");
  OPCACHE_SKIP_IF(!has_strace, "strace is not installed (Debian package strace; scripts/install-deps.sh --test)");
  TempDir temp;
  Tree tree(temp.path());
  write_text(tree.dir / "k.c", "int f(void) { return 4; }\n");
  auto under_strace = [&tree] {
    // strace -f attaches to every child first, so the compiler's PTRACE_TRACEME is refused.
    // LeakSanitizer cannot run under ptrace: a sanitized opcache leaves leak checking off here.
    auto options = tree.options();
    const char* asan = std::getenv("ASAN_OPTIONS");
    options.env["ASAN_OPTIONS"] = std::string(asan != nullptr ? asan : "") + ":detect_leaks=0";
    return opcache::test::run_process({"strace", "-f", "-o", "/dev/null", opcache::test::cli_path(), "--cache-dir",
                                       tree.cache.string(), "exec", "--desc", "desc.json", "--scenario", k_scenario,
                                       "--out", "out", "--", "sh", "-c", "gcc -c k.c -o out/k.o && echo ran >> runs.log"},
                                      options);
  };
  for (int round = 1; round <= 2; ++round) {
    auto result = under_strace();
    INFO("stderr: ", result.err);
    CHECK(result.exit_code == 0);
    CHECK(result.err.find("not cached: this system does not let opcache trace the command") != std::string::npos);
    CHECK(result.err.find("PTRACE_TRACEME") != std::string::npos);
    CHECK(runs(tree) == static_cast<std::size_t>(round));  // ran each time: nothing was stored
  }
  tree.run_directly({"gcc", "-c", "k.c", "-o", "direct.o"});
  CHECK(tree.file("out/k.o") == tree.file("direct.o"));
}

}  // namespace exec_observed
