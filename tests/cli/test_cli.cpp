// End-to-end tests of the `opcache` command: every case runs the built CLI as
// a separate process against its own cache directory and checks exit codes,
// JSON output, stderr messages and the bytes of the files it writes.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/version.hpp"
#include "store/index.hpp"
#include "store/key.hpp"
#include "store/manifest.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/files.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::test::contains;
using opcache::test::entry_names;
using opcache::test::k_absent_key;
using opcache::test::k_infer_scenario;
using opcache::test::k_test_scenario;
using opcache::test::KernelTriple;
using opcache::test::make_kernel;
using opcache::test::ProcessOptions;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::write_text;

namespace {

bool is_key(const std::string& text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

using Cli = opcache::test::CliRunner;
using opcache::test::hermetic;

// The lines of `text`, empty ones included (opcache::test::lines_of drops them).
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// Checks that `out_dir` holds exactly the members of `kernel`, byte for byte.
void check_members_written(const KernelTriple& kernel, const fs::path& out_dir) {
  std::set<std::string> expected;
  for (const auto& file : kernel.files()) {
    expected.insert(file.filename().string());
    INFO("member ", file.filename().string());
    REQUIRE(fs::exists(out_dir / file.filename()));
    CHECK(read_text(out_dir / file.filename()) == read_text(file));
  }
  CHECK(entry_names(out_dir) == expected);
}

std::int64_t raw_size_of(const KernelTriple& kernel) {
  std::int64_t total = 0;
  for (const auto& file : kernel.files()) {
    total += static_cast<std::int64_t>(fs::file_size(file));
  }
  return total;
}

fs::path object_path(const fs::path& cache, const std::string& digest) {
  return cache / "objects" / digest.substr(0, 2) / digest;
}

std::string key_of(const Cli& cli, const fs::path& desc, const std::string& scenario,
                   const ProcessOptions& options = hermetic()) {
  auto result = cli.run({"key", "--desc", desc.string(), "--scenario", scenario}, options);
  INFO("stderr: ", result.err);
  REQUIRE(result.exit_code == 0);
  auto lines = split_lines(result.out);
  REQUIRE(lines.size() == 1);
  REQUIRE(is_key(lines[0]));
  return lines[0];
}

}  // namespace

// ---------------------------------------------------------------------------
// Help and usage errors

TEST_CASE("cli --help exits 0 and lists every subcommand, the global options and the exit codes") {
  auto result = opcache::test::run_cli({"--help"}, hermetic());
  CHECK(result.exit_code == 0);
  for (const char* word : {"key", "put", "get", "has", "ls", "rm", "stats", "verify", "version", "--cache-dir",
                           "--json", "--volatile-fields", "Exit status"}) {
    INFO("missing from --help: ", word, "\n", result.out);
    CHECK(contains(result.out, word));
  }
}

TEST_CASE("cli COMMAND --help exits 0 for every subcommand and describes its options") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"key", {"--desc", "--scenario", "--scenario-file", "--show-canonical"}},
      {"put", {"--desc", "--scenario", "--scenario-file", "--build-ms", "--replace", "files"}},
      {"get", {"key", "--desc", "--scenario", "--scenario-file", "--out"}},
      {"has", {"key", "--desc", "--scenario", "--scenario-file"}},
      {"ls", {"--scenario", "--op-type", "--limit", "--after"}},
      {"rm", {"keys"}},
      {"stats", {"--help", "hit rate"}},
      {"verify", {"--repair"}},
      {"version", {"--help", "version"}},
  };
  for (const auto& [command, words] : commands) {
    auto result = opcache::test::run_cli({command, "--help"}, hermetic());
    INFO("opcache ", command, " --help\n", result.out, result.err);
    CHECK(result.exit_code == 0);
    CHECK(contains(result.out, "Usage: opcache " + command));
    for (const auto& word : words) {
      INFO("missing: ", word);
      CHECK(contains(result.out, word));
    }
  }
}

TEST_CASE("cli exits 2 for an unknown subcommand, naming it") {
  TempDir dir;
  Cli cli(dir);
  auto result = cli.run({"frobnicate"});
  CHECK(result.exit_code == 2);
  INFO("stderr: ", result.err);
  CHECK(contains(result.err, "frobnicate"));
  CHECK_FALSE(fs::exists(cli.cache()));
}

TEST_CASE("cli exits 2 without a subcommand, a required option or with a bad option value") {
  TempDir dir;
  Cli cli(dir);
  auto kernel = make_kernel(dir / "k", "square", 16);
  auto desc = cli.descriptor_file(kernel);

  SUBCASE("no subcommand") {
    auto result = cli.run({});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "a command is required"));
  }
  SUBCASE("key without --desc") {
    auto result = cli.run({"key", "--scenario", k_test_scenario});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "--desc"));
  }
  SUBCASE("key without any scenario") {
    auto result = cli.run({"key", "--desc", desc.string()});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "--scenario"));
  }
  SUBCASE("key with both --scenario and --scenario-file") {
    write_text(dir / "s.json", R"({"phase":"train","toolchain":"8.0.RC2","soc":"Ascend910B1"})");
    auto result = cli.run({"key", "--desc", desc.string(), "--scenario", k_test_scenario, "--scenario-file",
                           (dir / "s.json").string()});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "--scenario-file"));
  }
  SUBCASE("put without files") {
    auto result = cli.run({"put", "--desc", desc.string(), "--scenario", k_test_scenario});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "files"));
  }
  SUBCASE("rm without keys") {
    auto result = cli.run({"rm"});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "keys"));
  }
  SUBCASE("ls --limit abc") {
    auto result = cli.run({"ls", "--limit", "abc"});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "--limit"));
  }
  SUBCASE("ls --limit -1") {
    auto result = cli.run({"ls", "--limit", "-1"});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "--limit"));
  }
  SUBCASE("put --build-ms -5") {
    auto result = cli.run({"put", "--desc", desc.string(), "--scenario", k_test_scenario, "--build-ms", "-5",
                           kernel.object.string()});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "--build-ms"));
  }
  SUBCASE("an unknown option") {
    auto result = cli.run({"stats", "--frobnicate"});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "--frobnicate"));
  }
  SUBCASE("get with a key that is not 64 lowercase hex") {
    auto result = cli.run({"get", "ABC123", "--out", (dir / "out").string()});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "ABC123"));
  }
  SUBCASE("get without KEY or --desc") {
    auto result = cli.run({"get", "--out", (dir / "out").string()});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "KEY"));
  }
}

// ---------------------------------------------------------------------------
// key

TEST_CASE("cli::key prints exactly one 64-hex line, equal to the key put --json reports") {
  TempDir dir;
  Cli cli(dir);
  auto kernel = make_kernel(dir / "k", "square", 16);
  auto desc = cli.descriptor_file(kernel);

  auto result = cli.run({"key", "--desc", desc.string(), "--scenario", k_test_scenario});
  REQUIRE(result.exit_code == 0);
  REQUIRE(result.out.size() == 65);
  CHECK(result.out.back() == '\n');
  std::string key = result.out.substr(0, 64);
  CHECK(is_key(key));
  CHECK(result.err.empty());

  // The key is pure: computing it again, or from standard input, gives the same.
  CHECK(key_of(cli, desc, k_test_scenario) == key);
  ProcessOptions from_stdin = hermetic();
  from_stdin.stdin_data = kernel.descriptor_json;
  auto piped = cli.run({"key", "--desc", "-", "--scenario", k_test_scenario}, from_stdin);
  CHECK(piped.exit_code == 0);
  CHECK(piped.out == key + "\n");

  auto put = cli.put(kernel);
  CHECK(put["key"] == key);
  CHECK(put["stored"] == true);

  // A different scenario is a different key.
  CHECK(key_of(cli, desc, k_infer_scenario) != key);
}

TEST_CASE("cli::key --show-canonical prints the canonical descriptor and scenario, then the key") {
  TempDir dir;
  Cli cli(dir);
  write_text(dir / "d.json", R"({ "op_type" : "MatMul", "attrs" : {"transpose_b": true, "transpose_a": false} })");

  auto key = key_of(cli, dir / "d.json", k_test_scenario);
  auto result =
      cli.run({"key", "--desc", (dir / "d.json").string(), "--scenario", k_test_scenario, "--show-canonical"});
  REQUIRE(result.exit_code == 0);
  auto lines = split_lines(result.out);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == R"(descriptor: {"attrs":{"transpose_a":false,"transpose_b":true},"op_type":"MatMul"})");
  CHECK(lines[1] ==
        R"(scenario:   {"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC2"})");
  CHECK(lines[2] == key);

  auto document = cli.run_json({"key", "--desc", (dir / "d.json").string(), "--scenario", k_test_scenario});
  CHECK(document["key"] == key);
  CHECK(document["descriptor_canonical"] == R"({"attrs":{"transpose_a":false,"transpose_b":true},"op_type":"MatMul"})");
  CHECK(document["scenario_canonical"] ==
        R"({"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC2"})");
}

TEST_CASE("cli::key rejects a bad --scenario with exit 2 and names the field") {
  TempDir dir;
  Cli cli(dir);
  write_text(dir / "d.json", R"({"op_type":"Add"})");
  struct Case {
    std::string spec;
    std::vector<std::string> expected;  // all must appear on stderr
  };
  const std::vector<Case> cases = {
      {"device=single,toolchain=8.0.RC2,soc=Ascend910B1", {"\"phase\"", "missing"}},
      {"phase=bad,toolchain=8.0.RC2,soc=Ascend910B1", {"phase", "\"bad\""}},
      {"phase=train,toolchain=8.0.RC2,soc=Ascend910B1,color=red", {"unknown", "\"color\""}},
      {"phase=train,toolchain=,soc=Ascend910B1", {"\"toolchain\"", "empty"}},
      // An omitted soc or toolchain means auto; this machine has no npu-smi and no CANN install.
      {"phase=train,toolchain=8.0.RC2", {"soc=auto", "npu-smi", "set soc=CHIP"}},
      {"phase=train,soc=Ascend910B1", {"toolchain=auto", "no CANN install", "set toolchain=VERSION"}},
      {"device=many,phase=train,toolchain=8.0.RC2,soc=Ascend910B1", {"device", "\"many\""}},
      {"phase=train,phase=infer,toolchain=8.0.RC2,soc=Ascend910B1", {"\"phase\"", "twice"}},
      {"phase", {"\"phase\"", "FIELD=VALUE"}},
  };
  for (const auto& c : cases) {
    auto result = cli.run({"key", "--desc", (dir / "d.json").string(), "--scenario", c.spec});
    INFO("--scenario ", c.spec, "\nstderr: ", result.err);
    CHECK(result.exit_code == 2);
    CHECK(result.out.empty());
    CHECK(contains(result.err, "--scenario"));
    for (const auto& word : c.expected) {
      CHECK(contains(result.err, word));
    }
  }
}

TEST_CASE("cli::key --scenario-file gives the same key as the equivalent --scenario spec") {
  TempDir dir;
  Cli cli(dir);
  auto kernel = make_kernel(dir / "k", "relu", 32);
  auto desc = cli.descriptor_file(kernel);
  write_text(dir / "scenario.json",
             R"({"soc":"Ascend910B1","toolchain":"8.0.RC2","phase":"train","device_mode":"single"})");
  auto from_spec = key_of(cli, desc, k_test_scenario);
  auto result = cli.run({"key", "--desc", desc.string(), "--scenario-file", (dir / "scenario.json").string()});
  REQUIRE(result.exit_code == 0);
  CHECK(result.out == from_spec + "\n");

  // extra.KEY=VALUE in the spec form matches "extra":{…} in the JSON form.
  write_text(dir / "extra.json",
             R"({"device_mode":"single","phase":"train","toolchain":"8.0.RC2","soc":"Ascend910B1","extra":{"py":"3.11"}})");
  auto with_extra = cli.run({"key", "--desc", desc.string(), "--scenario-file", (dir / "extra.json").string()});
  REQUIRE(with_extra.exit_code == 0);
  CHECK(with_extra.out == key_of(cli, desc, std::string(k_test_scenario) + ",extra.py=3.11") + "\n");
  CHECK(with_extra.out != from_spec + "\n");

  SUBCASE("an unknown field in the file is exit 2 naming the file and the field") {
    write_text(dir / "bad.json", R"({"phase":"train","toolchain":"8.0.RC2","soc":"Ascend910B1","colour":"red"})");
    auto bad = cli.run({"key", "--desc", desc.string(), "--scenario-file", (dir / "bad.json").string()});
    CHECK(bad.exit_code == 2);
    CHECK(contains(bad.err, "bad.json"));
    CHECK(contains(bad.err, "\"colour\""));
  }
  SUBCASE("invalid JSON in the file is exit 2 naming the file") {
    write_text(dir / "broken.json", R"({"phase":"train",)");
    auto bad = cli.run({"key", "--desc", desc.string(), "--scenario-file", (dir / "broken.json").string()});
    CHECK(bad.exit_code == 2);
    CHECK(contains(bad.err, "broken.json"));
  }
  SUBCASE("a missing file is a usage error (2, not the miss status 1) naming the file") {
    auto missing = cli.run({"key", "--desc", desc.string(), "--scenario-file", (dir / "nope.json").string()});
    CHECK(missing.exit_code == 2);
    CHECK(contains(missing.err, "nope.json"));
    CHECK(contains(missing.err, "--scenario-file"));
  }
}

TEST_CASE("cli::key takes the device mode from RANK_SIZE / LOCAL_WORLD_SIZE when --scenario has none") {
  TempDir dir;
  Cli cli(dir);
  auto kernel = make_kernel(dir / "k", "neg", 8);
  auto desc = cli.descriptor_file(kernel);
  const std::string spec = "phase=train,toolchain=8.0.RC2,soc=Ascend910B1";

  auto single = key_of(cli, desc, "device=single," + spec);
  auto multi = key_of(cli, desc, "device=multi," + spec);
  REQUIRE(single != multi);

  CHECK(key_of(cli, desc, spec) == single);  // no variable: single
  CHECK(key_of(cli, desc, spec, hermetic({{"RANK_SIZE", "1"}})) == single);
  CHECK(key_of(cli, desc, spec, hermetic({{"RANK_SIZE", "8"}})) == multi);
  CHECK(key_of(cli, desc, spec, hermetic({{"LOCAL_WORLD_SIZE", "4"}})) == multi);
  // An explicit device wins over the environment.
  CHECK(key_of(cli, desc, "device=single," + spec, hermetic({{"RANK_SIZE", "8"}})) == single);

  auto bad = cli.run({"key", "--desc", desc.string(), "--scenario", spec}, hermetic({{"RANK_SIZE", "abc"}}));
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.empty());
  CHECK(contains(bad.err, "RANK_SIZE"));
  CHECK(contains(bad.err, "\"abc\""));
}

TEST_CASE("cli::key with a missing descriptor file exits 2 naming the file") {
  // A missing input file is a usage error: exit 1 is reserved for cache misses,
  // so `opcache get --desc typo.json ... || rebuild` cannot mistake a typo for a miss.
  TempDir dir;
  Cli cli(dir);
  auto result = cli.run({"key", "--desc", (dir / "missing.json").string(), "--scenario", k_test_scenario});
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK(contains(result.err, "missing.json"));
  CHECK(contains(result.err, "--desc"));
}

TEST_CASE("cli::key, put, get and has reject a bad descriptor with exit 2 naming the file and the problem") {
  TempDir dir;
  Cli cli(dir);
  auto kernel = make_kernel(dir / "k", "square", 16);
  struct Case {
    std::string file;
    std::string contents;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {"invalid.json", R"({"op_type": "Add",)", "invalid JSON"},
      {"duplicate.json", R"({"op_type":"Add","attrs":{},"op_type":"Mul"})", "duplicate object key \"op_type\""},
      {"no_op_type.json", R"({"inputs":[{"shape":[16]}]})", "\"op_type\""},
      {"empty_op_type.json", R"({"op_type":""})", "\"op_type\""},
      {"array.json", R"([{"op_type":"Add"}])", "JSON object"},
  };
  for (const auto& c : cases) {
    auto path = dir / c.file;
    write_text(path, c.contents);
    const std::vector<std::vector<std::string>> invocations = {
        {"key", "--desc", path.string(), "--scenario", k_test_scenario},
        {"put", "--desc", path.string(), "--scenario", k_test_scenario, kernel.object.string()},
        {"get", "--desc", path.string(), "--scenario", k_test_scenario, "--out", (dir / "out").string()},
        {"has", "--desc", path.string(), "--scenario", k_test_scenario},
    };
    for (const auto& args : invocations) {
      auto result = cli.run(args);
      INFO("opcache ", Cli::join(args), "\nstderr: ", result.err);
      CHECK(result.exit_code == 2);
      CHECK(contains(result.err, c.problem));
      CHECK(contains(result.err, c.file));
    }
  }
  // Nothing was stored by the failed puts.
  CHECK(cli.run_json({"ls"})["count"] == 0);
}

// ---------------------------------------------------------------------------
// put / get / has / rm

TEST_CASE("cli::put then get KEY --out DIR writes byte-identical files under their original base names") {
  TempDir dir;
  Cli cli(dir);
  auto kernel = make_kernel(dir / "k", "square", 16);
  auto put = cli.put(kernel);
  std::string key = put["key"];
  CHECK(is_key(key));
  CHECK(put["stored"] == true);
  CHECK(put["raw_bytes"] == raw_size_of(kernel));
  CHECK(put["members"] ==
        json::array({kernel.object.filename().string(), kernel.metadata.filename().string(),
                     kernel.info.filename().string()}));
  std::string digest = put["digest"];
  REQUIRE(fs::exists(object_path(cli.cache(), digest)));
  CHECK(put["bundle_bytes"] == static_cast<std::int64_t>(fs::file_size(object_path(cli.cache(), digest))));

  auto out = dir / "out" / "kernel_meta";
  auto document = cli.run_json({"get", key, "--out", out.string()});
  CHECK(document["hit"] == true);
  CHECK(document["key"] == key);
  CHECK(document["op_type"] == "square");
  REQUIRE(document["files"].size() == 3);
  CHECK(document["files"][0] == (out / kernel.object.filename()).string());
  check_members_written(kernel, out);

  // Text mode says what it did.
  auto text_out = dir / "text_out";
  auto result = cli.run({"get", key, "--out", text_out.string()});
  CHECK(result.exit_code == 0);
  CHECK(contains(result.out, "hit " + key));
  CHECK(contains(result.out, "wrote 3 files"));
  check_members_written(kernel, text_out);
}

TEST_CASE("cli::get and has --desc --scenario find the entry put stored") {
  TempDir dir;
  Cli cli(dir);
  auto kernel = make_kernel(dir / "k", "relu", 64);
  auto desc = cli.descriptor_file(kernel);
  std::string key = cli.put(kernel)["key"];

  auto out = dir / "out";
  auto document =
      cli.run_json({"get", "--desc", desc.string(), "--scenario", k_test_scenario, "--out", out.string()});
  CHECK(document["hit"] == true);
  CHECK(document["key"] == key);
  check_members_written(kernel, out);

  CHECK(cli.run({"has", "--desc", desc.string(), "--scenario", k_test_scenario}).exit_code == 0);
  // The same descriptor in another scenario is a miss.
  auto miss = cli.run_json({"get", "--desc", desc.string(), "--scenario", k_infer_scenario, "--out",
                            (dir / "out2").string()},
                           1);
  CHECK(miss["hit"] == false);
  CHECK(miss["key"] != key);
  CHECK(cli.run({"has", "--desc", desc.string(), "--scenario", k_infer_scenario}).exit_code == 1);
}

TEST_CASE("cli::put keeps an existing entry (stored:false) unless --replace is given") {
  TempDir dir;
  Cli cli(dir);
  auto first = make_kernel(dir / "first", "square", 16);
  // Same descriptor, different object bytes: what a rebuild with another compiler flag would give.
  auto second = first;
  second.object = opcache::test::compile_object(dir / "second", first.stem,
                                                "int " + first.stem + "__kernel0(int x) { return x * 3; }\n");
  REQUIRE(read_text(second.object) != read_text(first.object));
  second.metadata = dir / "second" / first.metadata.filename();
  second.info = dir / "second" / first.info.filename();
  fs::copy_file(first.metadata, second.metadata);
  fs::copy_file(first.info, second.info);

  auto stored = cli.put(first);
  CHECK(stored["stored"] == true);

  auto again = cli.put(second);
  CHECK(again["stored"] == false);
  CHECK(again["key"] == stored["key"]);
  CHECK(again["digest"] == stored["digest"]);

  auto text = cli.run({"put", "--desc", cli.descriptor_file(second).string(), "--scenario", k_test_scenario,
                       second.object.string(), second.metadata.string(), second.info.string()});
  CHECK(text.exit_code == 0);
  CHECK(contains(text.out, "already present " + stored["key"].get<std::string>()));

  std::string key = stored["key"];
  cli.run_json({"get", key, "--out", (dir / "out1").string()});
  check_members_written(first, dir / "out1");

  auto replaced = cli.put(second, k_test_scenario, {"--replace"});
  CHECK(replaced["stored"] == true);
  CHECK(replaced["key"] == key);
  CHECK(replaced["digest"] != stored["digest"]);
  cli.run_json({"get", key, "--out", (dir / "out2").string()});
  check_members_written(second, dir / "out2");

  auto stats = cli.run_json({"stats"});
  CHECK(stats["entries"] == 1);
  CHECK(stats["counters"]["stores"] == 2);
  CHECK(stats["counters"]["already_present"] == 2);
}

TEST_CASE("cli::put with a member file that does not exist exits 2 naming the file") {
  // Observed behaviour: CLI11's ExistingFile check rejects it as a usage error
  // (2), while a missing --desc file is "not found" (1).
  TempDir dir;
  Cli cli(dir);
  write_text(dir / "d.json", R"({"op_type":"Add"})");
  auto result = cli.run({"put", "--desc", (dir / "d.json").string(), "--scenario", k_test_scenario,
                         (dir / "missing.o").string()});
  CHECK(result.exit_code == 2);
  CHECK(contains(result.err, "missing.o"));
  CHECK(cli.run_json({"ls"})["count"] == 0);
}

TEST_CASE("cli::has exits 0 when an entry is present and 1 when it is not") {
  TempDir dir;
  Cli cli(dir);
  auto kernel = make_kernel(dir / "k", "square", 16);
  std::string key = cli.put(kernel)["key"];

  auto present = cli.run({"has", key});
  CHECK(present.exit_code == 0);
  CHECK(present.out == "present " + key + "\n");
  auto absent = cli.run({"has", k_absent_key});
  CHECK(absent.exit_code == 1);
  CHECK(absent.out == std::string("absent ") + k_absent_key + "\n");

  auto document = cli.run_json({"has", key});
  CHECK(document == json({{"key", key}, {"present", true}}));
  document = cli.run_json({"has", k_absent_key}, 1);
  CHECK(document == json({{"key", k_absent_key}, {"present", false}}));
}

TEST_CASE("cli::get exits 1 on a miss and prints hit:false in --json mode") {
  TempDir dir;
  Cli cli(dir);
  auto out = dir / "out";
  auto document = cli.run_json({"get", k_absent_key, "--out", out.string()}, 1);
  CHECK(document == json({{"key", k_absent_key}, {"hit", false}}));

  auto text = cli.run({"get", k_absent_key, "--out", out.string()});
  CHECK(text.exit_code == 1);
  CHECK(text.out.empty());
  CHECK(contains(text.err, std::string("miss: no entry for ") + k_absent_key));
  // A miss writes no files.
  CHECK((!fs::exists(out) || fs::is_empty(out)));
}

TEST_CASE("cli::rm exits 0 for present keys and 1 when any key is absent") {
  TempDir dir;
  Cli cli(dir);
  std::string a = cli.put(make_kernel(dir / "a", "square", 16))["key"];
  std::string b = cli.put(make_kernel(dir / "b", "relu", 16))["key"];

  auto removed = cli.run({"rm", a});
  CHECK(removed.exit_code == 0);
  CHECK(removed.out == "removed " + a + "\n");
  CHECK(cli.run({"has", a}).exit_code == 1);
  CHECK(cli.run({"has", b}).exit_code == 0);

  auto absent = cli.run({"rm", a});
  CHECK(absent.exit_code == 1);
  CHECK(contains(absent.err, "not found: " + a));

  auto mixed = cli.run_json({"rm", b, k_absent_key}, 1);
  CHECK(mixed == json({{"removed", {b}}, {"absent", {k_absent_key}}}));
  CHECK(cli.run_json({"ls"})["count"] == 0);
  CHECK(cli.run_json({"stats"})["counters"]["removals"] == 2);
}

// ---------------------------------------------------------------------------
// ls

TEST_CASE("cli::ls lists entries in text and --json, filtered by --op-type and --scenario") {
  TempDir dir;
  Cli cli(dir);
  auto square = make_kernel(dir / "square", "square", 16);
  auto relu = make_kernel(dir / "relu", "relu", 16);
  std::string square_train = cli.put(square)["key"];
  std::string relu_train = cli.put(relu)["key"];
  std::string square_infer = cli.put(square, k_infer_scenario)["key"];

  auto keys_of = [](const json& document) {
    std::vector<std::string> keys;
    for (const auto& entry : document["entries"]) {
      keys.push_back(entry["key"]);
    }
    return keys;
  };
  auto sorted = [](std::vector<std::string> keys) {
    std::sort(keys.begin(), keys.end());
    return keys;
  };

  auto all = cli.run_json({"ls"});
  CHECK(all["count"] == 3);
  CHECK(keys_of(all) == sorted({square_train, relu_train, square_infer}));
  for (const auto& entry : all["entries"]) {
    if (entry["key"] == relu_train) {
      CHECK(entry["op_type"] == "relu");
      CHECK(entry["raw_bytes"] == raw_size_of(relu));
      CHECK(entry["scenario"] == json({{"device_mode", "single"},
                                       {"phase", "train"},
                                       {"toolchain", "8.0.RC2"},
                                       {"soc", "Ascend910B1"}}));
      CHECK(entry["hits"] == 0);
      CHECK(entry["pinned"] == false);
    }
  }

  CHECK(keys_of(cli.run_json({"ls", "--op-type", "square"})) == sorted({square_train, square_infer}));
  CHECK(keys_of(cli.run_json({"ls", "--scenario", "phase=infer"})) == std::vector<std::string>{square_infer});
  CHECK(keys_of(cli.run_json({"ls", "--scenario", "phase=train"})) == sorted({square_train, relu_train}));
  CHECK(keys_of(cli.run_json({"ls", "--scenario", "phase=train", "--op-type", "square"})) ==
        std::vector<std::string>{square_train});
  CHECK(keys_of(cli.run_json({"ls", "--scenario", "device=single,soc=Ascend910B1,toolchain=8.0.RC2"})).size() == 3);
  CHECK(cli.run_json({"ls", "--scenario", "device=multi"})["count"] == 0);
  CHECK(cli.run_json({"ls", "--op-type", "MatMul"})["count"] == 0);

  auto text = cli.run({"ls", "--op-type", "square"});
  REQUIRE(text.exit_code == 0);
  auto lines = split_lines(text.out);
  REQUIRE(lines.size() == 4);  // header, two entries, count
  CHECK(lines[0].rfind("KEY", 0) == 0);
  CHECK(contains(lines[0], "OP TYPE"));
  auto square_keys = sorted({square_train, square_infer});
  CHECK(lines[1].rfind(square_keys[0], 0) == 0);
  CHECK(lines[2].rfind(square_keys[1], 0) == 0);
  CHECK(contains(lines[1], "square"));
  CHECK(contains(text.out, "single/infer/8.0.RC2/Ascend910B1"));
  CHECK(lines[3] == "2 entries");

  SUBCASE("a bad --scenario filter is exit 2 naming the field") {
    auto bad_phase = cli.run({"ls", "--scenario", "phase=bad"});
    CHECK(bad_phase.exit_code == 2);
    CHECK(contains(bad_phase.err, "phase"));
    CHECK(contains(bad_phase.err, "\"bad\""));
    auto unknown = cli.run({"ls", "--scenario", "color=red"});
    CHECK(unknown.exit_code == 2);
    CHECK(contains(unknown.err, "\"color\""));
  }
}

TEST_CASE("cli::ls --limit and --after page through entries in key order") {
  TempDir dir;
  Cli cli(dir);
  std::vector<std::string> keys;
  for (int length : {4, 8, 12}) {
    keys.push_back(cli.put(make_kernel(dir / std::to_string(length), "add", length))["key"]);
  }
  std::sort(keys.begin(), keys.end());

  auto page_keys = [&cli](std::vector<std::string> args) {
    args.insert(args.begin(), "ls");
    auto document = cli.run_json(args);
    std::vector<std::string> result;
    for (const auto& entry : document["entries"]) {
      result.push_back(entry["key"]);
    }
    CHECK(document["count"] == result.size());
    return result;
  };

  CHECK(page_keys({"--limit", "2"}) == std::vector<std::string>{keys[0], keys[1]});
  CHECK(page_keys({"--limit", "2", "--after", keys[1]}) == std::vector<std::string>{keys[2]});
  CHECK(page_keys({"--after", keys[0]}) == std::vector<std::string>{keys[1], keys[2]});
  CHECK(page_keys({"--after", keys[2]}).empty());
  CHECK(page_keys({"--limit", "0"}).empty());
  CHECK(page_keys({"--limit", "1", "--op-type", "add", "--after", keys[0]}) == std::vector<std::string>{keys[1]});
}

// ---------------------------------------------------------------------------
// stats / verify / version

TEST_CASE("cli::stats --json counts stores, hits and misses exactly") {
  TempDir dir;
  Cli cli(dir);
  auto a = make_kernel(dir / "a", "square", 16);
  auto b = make_kernel(dir / "b", "relu", 32);
  auto put_a = cli.put(a, k_test_scenario, {"--build-ms", "1500"});
  auto put_b = cli.put(b);
  std::string key_a = put_a["key"];
  std::string key_b = put_b["key"];

  cli.run_json({"get", key_a, "--out", (dir / "o1").string()});
  cli.run_json({"get", key_a, "--out", (dir / "o2").string()});
  cli.run_json({"get", key_b, "--out", (dir / "o3").string()});
  cli.run_json({"get", k_absent_key, "--out", (dir / "o4").string()}, 1);

  auto stats = cli.run_json({"stats"});
  CHECK(stats["cache_dir"] == cli.cache().string());
  CHECK(stats["entries"] == 2);
  CHECK(stats["pinned"] == 0);
  CHECK(stats["raw_bytes"] == raw_size_of(a) + raw_size_of(b));
  CHECK(stats["bundle_bytes"] == put_a["bundle_bytes"].get<std::int64_t>() + put_b["bundle_bytes"].get<std::int64_t>());
  const auto& counters = stats["counters"];
  CHECK(counters["stores"] == 2);
  CHECK(counters["hits"] == 3);
  CHECK(counters["misses"] == 1);
  CHECK(counters["bytes_served"] == 2 * raw_size_of(a) + raw_size_of(b));
  CHECK(counters["compile_ms_saved"] == 3000);
  CHECK(counters.value("already_present", 0) == 0);
  CHECK(counters.value("corrupt_entries", 0) == 0);

  auto text = cli.run({"stats"});
  CHECK(text.exit_code == 0);
  CHECK(contains(text.out, "3 / 1 (hit rate 75.0 %)"));
  CHECK(contains(text.out, "3.0 s"));  // compile time saved
}

TEST_CASE("cli::verify exits 0 on a clean store and reports what it checked") {
  TempDir dir;
  Cli cli(dir);
  auto put_a = cli.put(make_kernel(dir / "a", "square", 16));
  auto put_b = cli.put(make_kernel(dir / "b", "relu", 16));

  auto report = cli.run_json({"verify"});
  CHECK(report["ok"] == true);
  CHECK(report["entries_checked"] == 2);
  CHECK(report["objects_checked"] == 2);
  CHECK(report["bytes_checked"] ==
        put_a["bundle_bytes"].get<std::int64_t>() + put_b["bundle_bytes"].get<std::int64_t>());
  CHECK(report["problems"] == json::array());

  auto text = cli.run({"verify"});
  CHECK(text.exit_code == 0);
  CHECK(contains(text.out, "checked 2 entries"));
  CHECK(contains(text.out, "0 problems"));
}

TEST_CASE("cli::verify exits 3 on a corrupted object, --repair drops that entry and keeps the others") {
  TempDir dir;
  Cli cli(dir);
  auto a = make_kernel(dir / "a", "square", 16);
  auto b = make_kernel(dir / "b", "relu", 16);
  auto put_a = cli.put(a);
  auto put_b = cli.put(b);
  std::string key_a = put_a["key"];
  std::string key_b = put_b["key"];

  // Flip one byte in the middle of a's object file.
  auto object = object_path(cli.cache(), put_a["digest"]);
  REQUIRE(fs::exists(object));
  fs::permissions(object, fs::perms::owner_write, fs::perm_options::add);
  std::string bytes = read_text(object);
  REQUIRE(bytes.size() > 16);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
  {
    std::ofstream out(object, std::ios::binary | std::ios::trunc);
    out << bytes;
  }

  auto report = cli.run_json({"verify"}, 3);
  CHECK(report["ok"] == false);
  CHECK(report["entries_checked"] == 2);
  REQUIRE(report["problems"].size() == 1);
  CHECK(report["problems"][0]["kind"] == "corrupt_entry");
  CHECK(report["problems"][0]["subject"] == key_a);
  CHECK(report["problems"][0]["repaired"] == false);
  CHECK_FALSE(report["problems"][0]["detail"].get<std::string>().empty());

  auto text = cli.run({"verify"});
  CHECK(text.exit_code == 3);
  CHECK(contains(text.out, "corrupt_entry " + key_a));
  CHECK(contains(text.out, "--repair"));

  auto repaired = cli.run_json({"verify", "--repair"});
  CHECK(repaired["ok"] == true);
  REQUIRE(repaired["problems"].size() == 1);
  CHECK(repaired["problems"][0]["kind"] == "corrupt_entry");
  CHECK(repaired["problems"][0]["subject"] == key_a);
  CHECK(repaired["problems"][0]["repaired"] == true);
  CHECK_FALSE(fs::exists(object));

  CHECK(cli.run({"get", key_a, "--out", (dir / "out_a").string()}).exit_code == 1);
  CHECK(cli.run({"has", key_a}).exit_code == 1);
  auto hit = cli.run_json({"get", key_b, "--out", (dir / "out_b").string()});
  CHECK(hit["hit"] == true);
  check_members_written(b, dir / "out_b");

  auto clean = cli.run_json({"verify"});
  CHECK(clean["ok"] == true);
  CHECK(clean["entries_checked"] == 1);
  CHECK(clean["problems"] == json::array());
}

TEST_CASE("cli::get of a corrupted object is a miss (exit 1) and never writes the bad bytes") {
  TempDir dir;
  Cli cli(dir);
  auto a = make_kernel(dir / "a", "square", 16);
  auto put_a = cli.put(a);
  auto object = object_path(cli.cache(), put_a["digest"]);
  fs::permissions(object, fs::perms::owner_write, fs::perm_options::add);
  std::string bytes = read_text(object);
  bytes[bytes.size() - 5] = static_cast<char>(bytes[bytes.size() - 5] ^ 0x01);
  {
    std::ofstream out(object, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  auto out = dir / "out";
  auto miss = cli.run_json({"get", put_a["key"], "--out", out.string()}, 1);
  CHECK(miss["hit"] == false);
  CHECK((!fs::exists(out) || fs::is_empty(out)));
  auto counters = cli.run_json({"stats"})["counters"];
  CHECK(counters["corrupt_entries"] == 1);
  CHECK(counters["misses"] == 1);
  CHECK(counters.value("hits", 0) == 0);
}

TEST_CASE("cli::version prints the version and the format versions, --json has the same fields") {
  auto text = opcache::test::run_cli({"version"}, hermetic());
  CHECK(text.exit_code == 0);
  CHECK(text.out == std::string("opcache ") + opcache::k_version_string + " (key opcache-key-v1, bundle format " +
                        std::to_string(opcache::store::k_bundle_format_version) + ", index schema " +
                        std::to_string(opcache::store::k_index_schema_version) + ")\n");

  auto json_run = opcache::test::run_cli({"--json", "version"}, hermetic());
  REQUIRE(json_run.exit_code == 0);
  auto document = json::parse(json_run.out);
  CHECK(document == json({{"version", opcache::k_version_string},
                          {"key_derivation", "opcache-key-v1"},
                          {"bundle_format", opcache::store::k_bundle_format_version},
                          {"index_schema", opcache::store::k_index_schema_version}}));
}

// ---------------------------------------------------------------------------
// Global options, errors, cache directory

TEST_CASE("cli accepts global options after the subcommand") {
  TempDir dir;
  auto kernel = make_kernel(dir / "k", "square", 16);
  auto desc = dir / "d.json";
  write_text(desc, kernel.descriptor_json);
  auto cache = (dir / "cache").string();
  std::vector<std::string> put_args{"put", "--cache-dir", cache, "--json", "--desc", desc.string(), "--scenario",
                                    k_test_scenario};
  for (const auto& file : kernel.files()) {
    put_args.push_back(file.string());
  }
  auto put = opcache::test::run_cli(put_args, hermetic());
  REQUIRE(put.exit_code == 0);
  std::string key = json::parse(put.out)["key"];

  auto out = dir / "out";
  auto get = opcache::test::run_cli({"get", "--cache-dir", cache, key, "--out", out.string()}, hermetic());
  CHECK(get.exit_code == 0);
  check_members_written(kernel, out);

  auto stats = opcache::test::run_cli({"stats", "-C", cache, "--json"}, hermetic());
  REQUIRE(stats.exit_code == 0);
  CHECK(json::parse(stats.out)["cache_dir"] == cache);
  CHECK(json::parse(stats.out)["entries"] == 1);
}

TEST_CASE("cli uses OPCACHE_DIR when --cache-dir is not given, and --cache-dir wins over it") {
  TempDir dir;
  auto env_cache = (dir / "from_env").string();
  auto stats = opcache::test::run_cli({"--json", "stats"}, hermetic({{"OPCACHE_DIR", env_cache}}));
  REQUIRE(stats.exit_code == 0);
  CHECK(json::parse(stats.out)["cache_dir"] == env_cache);
  CHECK(fs::is_directory(env_cache));

  auto flag_cache = (dir / "from_flag").string();
  auto flagged =
      opcache::test::run_cli({"--json", "--cache-dir", flag_cache, "stats"}, hermetic({{"OPCACHE_DIR", env_cache}}));
  REQUIRE(flagged.exit_code == 0);
  CHECK(json::parse(flagged.out)["cache_dir"] == flag_cache);
}

TEST_CASE("cli --json errors are one JSON object with ok:false, error and message on stdout") {
  TempDir dir;
  Cli cli(dir);
  write_text(dir / "d.json", R"({"op_type":"Add"})");

  SUBCASE("a bad scenario") {
    auto result = cli.run({"--json", "key", "--desc", (dir / "d.json").string(), "--scenario", "phase=bad"});
    CHECK(result.exit_code == 2);
    auto document = json::parse(result.out);
    CHECK(document["ok"] == false);
    CHECK(document["error"] == "usage");
    CHECK(contains(document["message"].get<std::string>(), "phase"));
    CHECK(contains(result.err, "opcache: error: "));
  }
  SUBCASE("a malformed key") {
    auto result = cli.run({"--json", "has", "xyz"});
    CHECK(result.exit_code == 2);
    auto document = json::parse(result.out);
    CHECK(document["error"] == "usage");
    CHECK(contains(document["message"].get<std::string>(), "\"xyz\""));
  }
  SUBCASE("a missing descriptor file") {
    auto result =
        cli.run({"--json", "key", "--desc", (dir / "missing.json").string(), "--scenario", k_test_scenario});
    CHECK(result.exit_code == 2);
    auto document = json::parse(result.out);
    CHECK(document["error"] == "usage");
    CHECK(contains(document["message"].get<std::string>(), "missing.json"));
  }
  SUBCASE("a cache directory that cannot be created") {
    write_text(dir / "regular_file", "x");
    auto result = opcache::test::run_cli(
        {"--json", "--cache-dir", (dir / "regular_file" / "cache").string(), "stats"}, hermetic());
    CHECK(result.exit_code == 5);
    auto document = json::parse(result.out);
    CHECK(document["error"] == "io");
    CHECK(contains(document["message"].get<std::string>(), (dir / "regular_file" / "cache").string()));
  }
  SUBCASE("an option value rejected by the parser") {
    // docs/cli.md: with --json, every error also prints {"ok":false,"error","message"} on stdout.
    auto result = cli.run({"--json", "ls", "--limit", "abc"});
    CHECK(result.exit_code == 2);
    INFO("stdout: ", result.out, "\nstderr: ", result.err);
    auto document = json::parse(result.out, nullptr, false);
    REQUIRE_FALSE(document.is_discarded());
    CHECK(document["ok"] == false);
    CHECK(document["error"] == "usage");
    CHECK(contains(document["message"].get<std::string>(), "--limit"));
  }
}

TEST_CASE("cli exits 5 naming the path when --cache-dir cannot be created") {
  TempDir dir;
  write_text(dir / "regular_file", "not a directory");
  auto cache = dir / "regular_file" / "cache";
  auto result = opcache::test::run_cli({"--cache-dir", cache.string(), "stats"}, hermetic());
  CHECK(result.exit_code == 5);
  CHECK(result.out.empty());
  CHECK(contains(result.err, cache.string()));
  CHECK(read_text(dir / "regular_file") == "not a directory");

  // The cache directory itself being a regular file is the same failure.
  auto as_file = opcache::test::run_cli({"--cache-dir", (dir / "regular_file").string(), "stats"}, hermetic());
  CHECK(as_file.exit_code == 5);
  CHECK(contains(as_file.err, (dir / "regular_file").string()));
}
