// What `opcache exec` keys on (store/exec_key.cpp, api/exec.cpp, docs/formats.md "What exec
// keys on"), with real compilers: gcc for C objects and nvcc for cubins.
// Each case compiles once, changes one thing (the source, a flag, a
// declared header, the compiler, a keyed variable), compiles again through
// exec and checks that it was a miss and that the object in --out is the one
// the compiler makes for the new input (byte-equal to a direct compile),
// or, for what must not matter (the rank's output directory, an unrelated
// variable), that it was a hit.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.hpp"
#include "tests/support/process.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using opcache::test::CliRunner;
using opcache::test::hermetic;
using opcache::test::ProcessOptions;
using opcache::test::ProcessResult;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::write_executable;
using opcache::test::write_text;

namespace {

constexpr const char* k_host_scenario = "phase=infer,toolchain=native,soc=host";
const char* const k_nvcc = "/usr/local/cuda/bin/nvcc";

// One project directory: sources, a descriptor, a cache; commands run in it.
class Project {
 public:
  explicit Project(const TempDir& dir) : m_dir(dir.path()), m_cli(dir.path(), dir.path() / "cache") {
    write_text(m_dir / "desc.json", R"({"op_type":"Scale","inputs":[{"shape":[128],"dtype":"float32"}]})");
  }

  const fs::path& dir() const { return m_dir; }

  ProcessOptions options(std::map<std::string, std::string> env = {}) const {
    auto options = hermetic(std::move(env));
    options.cwd = m_dir.string();
    return options;
  }

  // `opcache --json [globals] exec --desc desc.json --scenario S --out OUT
  // [--input I]... [exec_options] --output OUTPUT -- command...` in the
  // project directory.
  ProcessResult exec(const std::string& out, const std::string& output, const std::vector<std::string>& command,
                     const std::vector<std::string>& inputs = {}, const std::vector<std::string>& globals = {},
                     const std::map<std::string, std::string>& env = {},
                     const std::vector<std::string>& exec_options = {}) const {
    std::vector<std::string> args{"--json"};
    args.insert(args.end(), globals.begin(), globals.end());
    args.insert(args.end(), {"exec", "--desc", "desc.json", "--scenario", k_host_scenario, "--out", out});
    for (const auto& input : inputs) {
      args.insert(args.end(), {"--input", input});
    }
    args.insert(args.end(), exec_options.begin(), exec_options.end());
    args.insert(args.end(), {"--output", output, "--"});
    args.insert(args.end(), command.begin(), command.end());
    return m_cli.run(args, options(env));
  }

  // The "source" (built or hit) of an exec that must succeed.
  std::string source_of(const ProcessResult& result) const {
    INFO("stdout: ", result.out, "\nstderr: ", result.err);
    REQUIRE(result.exit_code == 0);
    auto document = nlohmann::json::parse(result.out, nullptr, false);
    REQUIRE(document.is_object());
    return document.value("source", "?");
  }

  std::string key_of(const ProcessResult& result) const {
    auto document = nlohmann::json::parse(result.out, nullptr, false);
    REQUIRE(document.is_object());
    return document.value("key", "?");
  }

  // Runs `command` directly (no cache) in the project directory; REQUIREs exit 0.
  void run_directly(const std::vector<std::string>& command, std::map<std::string, std::string> env = {}) const {
    auto result = opcache::test::run_process(command, options(std::move(env)));
    INFO("stderr: ", result.err);
    REQUIRE(result.exit_code == 0);
  }

  std::string file(const std::string& name) const { return read_text(m_dir / name); }

 private:
  fs::path m_dir;
  CliRunner m_cli;
};

std::vector<std::string> gcc_command(const std::string& flag, const std::string& object) {
  return {"gcc", flag, "-c", "scale.c", "-o", object};
}

}  // namespace

TEST_CASE("e2e::exec key: an edited source is a miss that writes the new object, and the old source hits again") {
  TempDir temp;
  Project project(temp);
  write_text(temp.path() / "scale.c", "int scale(int x) { return x * 3 + 1; }\n");
  auto first = project.exec("out", "scale.o", gcc_command("-O2", "out/scale.o"));
  CHECK(project.source_of(first) == "built");
  const std::string old_object = project.file("out/scale.o");

  write_text(temp.path() / "scale.c", "int scale(int x) { return x * 5 + 2; }\n");
  auto edited = project.exec("out", "scale.o", gcc_command("-O2", "out/scale.o"));
  CHECK(project.source_of(edited) == "built");
  CHECK(project.key_of(edited) != project.key_of(first));
  project.run_directly(gcc_command("-O2", "direct.o"));
  CHECK(project.file("out/scale.o") == project.file("direct.o"));
  CHECK(project.file("out/scale.o") != old_object);

  write_text(temp.path() / "scale.c", "int scale(int x) { return x * 3 + 1; }\n");
  auto restored = project.exec("out", "scale.o", gcc_command("-O2", "out/scale.o"));
  CHECK(project.source_of(restored) == "hit");
  CHECK(project.file("out/scale.o") == old_object);
}

TEST_CASE("e2e::exec key: another rank's output directory hits, a changed flag misses") {
  TempDir temp;
  Project project(temp);
  write_text(temp.path() / "scale.c", "int scale(int x) { return x * 3 + 1; }\n");
  auto rank0 = project.exec("rank_0/kernel_meta", "scale.o", gcc_command("-O2", "rank_0/kernel_meta/scale.o"));
  CHECK(project.source_of(rank0) == "built");
  auto rank7 = project.exec("rank_7/kernel_meta", "scale.o", gcc_command("-O2", "rank_7/kernel_meta/scale.o"));
  CHECK(project.source_of(rank7) == "hit");
  CHECK(project.key_of(rank7) == project.key_of(rank0));
  CHECK(project.file("rank_7/kernel_meta/scale.o") == project.file("rank_0/kernel_meta/scale.o"));
  // The same directory spelled absolute is the same key.
  auto absolute = project.exec((temp.path() / "rank_3").string(), "scale.o",
                               gcc_command("-O2", (temp.path() / "rank_3" / "scale.o").string()));
  CHECK(project.source_of(absolute) == "hit");

  auto o3 = project.exec("rank_0/kernel_meta", "scale.o", gcc_command("-O3", "rank_0/kernel_meta/scale.o"));
  CHECK(project.source_of(o3) == "built");
  CHECK(project.key_of(o3) != project.key_of(rank0));
}

TEST_CASE("e2e::exec key: an edited header declared with --input is a miss that writes the new object") {
  TempDir temp;
  Project project(temp);
  fs::create_directories(temp.path() / "include");
  write_text(temp.path() / "include" / "factor.h", "#define FACTOR 3\n");
  write_text(temp.path() / "scale.c", "#include \"factor.h\"\nint scale(int x) { return x * FACTOR; }\n");
  const std::vector<std::string> command{"gcc", "-O2", "-Iinclude", "-c", "scale.c", "-o", "out/scale.o"};
  CHECK(project.source_of(project.exec("out", "scale.o", command, {"include"})) == "built");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {"include"})) == "hit");

  write_text(temp.path() / "include" / "factor.h", "#define FACTOR 7\n");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {"include"})) == "built");
  project.run_directly({"gcc", "-O2", "-Iinclude", "-c", "scale.c", "-o", "direct.o"});
  CHECK(project.file("out/scale.o") == project.file("direct.o"));

  // A single file works as --input too; a missing one is a usage error
  // that runs nothing.
  CHECK(project.source_of(project.exec("out", "scale.o", command, {"include/factor.h"})) == "built");
  auto missing = project.exec("out", "scale.o", command, {"include/absent.h"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("--input include/absent.h") != std::string::npos);
}

TEST_CASE("e2e::exec key: a replaced compiler is a miss under compiler_check content, and the check is settable") {
  TempDir temp;
  Project project(temp);
  write_text(temp.path() / "scale.c", "int scale(int x) { return x * 3 + 1; }\n");
  const fs::path bin = temp.path() / "bin";
  fs::create_directories(bin);
  write_executable(bin / "kcc", "#!/bin/sh\n# kcc 1.0\nexec gcc -O2 \"$@\"\n");
  const std::map<std::string, std::string> path{{"PATH", bin.string() + ":" + std::getenv("PATH")}};
  const std::vector<std::string> command{"kcc", "-c", "scale.c", "-o", "out/scale.o"};

  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, {}, path)) == "built");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, {}, path)) == "hit");
  // The upgrade: another driver that now compiles with -O0.
  write_executable(bin / "kcc", "#!/bin/sh\n# kcc 2.0\nexec gcc -O0 \"$@\"\n");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, {}, path)) == "built");
  project.run_directly({"gcc", "-O0", "-c", "scale.c", "-o", "direct.o"});
  CHECK(project.file("out/scale.o") == project.file("direct.o"));

  // string:TEXT keys on the text alone: the same text hits across a replaced compiler.
  const std::vector<std::string> string_check{"--compiler-check", "string:kcc-2"};
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, string_check, path)) == "built");
  write_executable(bin / "kcc", "#!/bin/sh\n# kcc 2.0, rebuilt\nexec gcc -O0 \"$@\"\n");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, string_check, path)) == "hit");

  // command:CMD keys on what the command prints about the compiler.
  const std::vector<std::string> command_check{"--compiler-check", "command:grep '^# kcc' %compiler%"};
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, command_check, path)) == "built");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, command_check, path)) == "hit");
  write_executable(bin / "kcc", "#!/bin/sh\n# kcc 3.0\nexec gcc -O0 \"$@\"\n");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, command_check, path)) == "built");

  // A bad value is a usage error naming the setting.
  auto bad = project.exec("out", "scale.o", command, {}, {"--compiler-check", "sometimes"}, path);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("compiler") != std::string::npos);
}

TEST_CASE("e2e::exec key: a keyed environment variable is a miss, an unrelated one is not, exec_env is settable") {
  TempDir temp;
  Project project(temp);
  fs::create_directories(temp.path() / "inc3");
  fs::create_directories(temp.path() / "inc7");
  write_text(temp.path() / "inc3" / "factor.h", "#define FACTOR 3\n");
  write_text(temp.path() / "inc7" / "factor.h", "#define FACTOR 7\n");
  write_text(temp.path() / "scale.c", "#include <factor.h>\nint scale(int x) { return x * FACTOR; }\n");
  const auto command = gcc_command("-O2", "out/scale.o");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, {}, {{"CPATH", "inc3"}})) == "built");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, {}, {{"CPATH", "inc3"}, {"UNRELATED", "1"}})) ==
        "hit");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, {}, {{"CPATH", "inc7"}})) == "built");
  project.run_directly(gcc_command("-O2", "direct.o"), {{"CPATH", "inc7"}});
  CHECK(project.file("out/scale.o") == project.file("direct.o"));

  // exec_env "+MY_FLAGS" adds a variable; "none" keys on no variable at all.
  const std::vector<std::string> added{"--exec-env", "+MY_FLAGS"};
  auto with_flags = project.exec("out", "scale.o", command, {}, added, {{"CPATH", "inc7"}, {"MY_FLAGS", "a"}});
  CHECK(project.source_of(with_flags) == "built");
  CHECK(project.source_of(project.exec("out", "scale.o", command, {}, added, {{"CPATH", "inc7"}, {"MY_FLAGS", "b"}})) ==
        "built");
  auto bad = project.exec("out", "scale.o", command, {}, {"--exec-env", "NOT-A-NAME"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("NOT-A-NAME") != std::string::npos);
}

TEST_CASE("e2e::exec key: a descriptor with its own \"exec\" member is refused before the command runs") {
  TempDir temp;
  Project project(temp);
  write_text(temp.path() / "desc.json", R"({"op_type":"Scale","exec":{"argv":[]}})");
  write_text(temp.path() / "scale.c", "int scale(int x) { return x; }\n");
  auto result = project.exec("out", "scale.o", gcc_command("-O2", "out/scale.o"));
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("\"exec\" is reserved") != std::string::npos);
  CHECK_FALSE(fs::exists(temp.path() / "out" / "scale.o"));
}

TEST_CASE("e2e::exec key: a malformed descriptor is refused naming its file, before --out is made or the command runs") {
  TempDir temp;
  Project project(temp);
  write_text(temp.path() / "scale.c", "int scale(int x) { return x; }\n");
  for (const char* text : {R"({"op_type":3})", R"({"op_type":"Scale",)"}) {
    write_text(temp.path() / "desc.json", text);
    auto result = project.exec("out", "scale.o", gcc_command("-O2", "out/scale.o"));
    CHECK(result.exit_code == 2);
    CHECK(result.err.find("desc.json: descriptor") != std::string::npos);
    CHECK_FALSE(fs::exists(temp.path() / "out"));
  }
}

TEST_CASE("e2e::exec key: nvcc -arch=sm_80 and sm_90 are two entries, each the cubin nvcc makes") {
  OPCACHE_SKIP_IF(::access(k_nvcc, X_OK) != 0, std::string(k_nvcc) + " is not installed");
  TempDir temp;
  Project project(temp);
  write_text(temp.path() / "scale.cu", "__global__ void scale(float* x) { x[threadIdx.x] *= 3.0f; }\n");
  auto nvcc = [](const std::string& arch, const std::string& out) {
    return std::vector<std::string>{k_nvcc, "-arch=" + arch, "-cubin", "scale.cu", "-o", out};
  };
  CHECK(project.source_of(project.exec("out", "scale.cubin", nvcc("sm_90", "out/scale.cubin"))) == "built");
  auto sm80 = project.exec("out", "scale.cubin", nvcc("sm_80", "out/scale.cubin"));
  CHECK(project.source_of(sm80) == "built");
  project.run_directly(nvcc("sm_80", "direct80.cubin"));
  CHECK(project.file("out/scale.cubin") == project.file("direct80.cubin"));

  auto sm90 = project.exec("out", "scale.cubin", nvcc("sm_90", "out/scale.cubin"));
  CHECK(project.source_of(sm90) == "hit");
  project.run_directly(nvcc("sm_90", "direct90.cubin"));
  CHECK(project.file("out/scale.cubin") == project.file("direct90.cubin"));
  CHECK(project.file("direct80.cubin") != project.file("direct90.cubin"));
}

TEST_CASE("e2e::exec key: a sh -c script naming --out inside quotes shares across ranks, and --key-on descriptor is opcache key") {
  TempDir temp;
  Project project(temp);
  write_text(temp.path() / "scale.c", "int scale(int x) { return x * 3 + 1; }\n");
  auto script = [](const std::string& out) {
    return std::vector<std::string>{"sh", "-c", "mkdir -p '" + out + "' && gcc -O2 -c scale.c -o \"" + out + "/scale.o\""};
  };
  auto rank0 = project.exec("rank_0", "scale.o", script("rank_0"));
  CHECK(project.source_of(rank0) == "built");
  auto rank1 = project.exec("rank_1", "scale.o", script("rank_1"));
  CHECK(project.source_of(rank1) == "hit");
  CHECK(project.key_of(rank1) == project.key_of(rank0));

  // --key-on descriptor keys on the descriptor and scenario only, like
  // `opcache key`: the command line and the source no longer count.
  auto key = CliRunner(temp.path(), temp.path() / "cache")
                 .run({"key", "--desc", "desc.json", "--scenario", k_host_scenario}, project.options());
  REQUIRE(key.exit_code == 0);
  const std::string descriptor_key = key.out.substr(0, key.out.find('\n'));
  CHECK(descriptor_key != project.key_of(rank0));
  auto plain = project.exec("rank_2", "scale.o", {"gcc", "-O3", "-c", "scale.c", "-o", "rank_2/scale.o"}, {}, {}, {},
                            {"--key-on", "descriptor"});
  CHECK(project.source_of(plain) == "built");
  CHECK(project.key_of(plain) == descriptor_key);
}
