// The global options of the `opcache` command (cli/context.cpp): one option
// per settable row of the settings table; a repeatable option such as
// --remote takes exactly one value per occurrence, so the positional keys
// after it stay keys, in every subcommand and in every spelling.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/opcache.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::test::hermetic;
using opcache::test::TempDir;

namespace {

// `opcache --json args...` with its JSON output; requires exit 0.
json run_json(std::vector<std::string> args) {
  args.insert(args.begin(), "--json");
  auto result = opcache::test::run_cli(args, hermetic());
  INFO("stdout: ", result.out, "\nstderr: ", result.err);
  REQUIRE(result.exit_code == 0);
  return json::parse(result.out);
}

// A local cache holding one kernel, and an empty file remote next to it.
struct Stores {
  TempDir dir;
  std::string cache = (dir / "cache").string();
  std::string remote = "file://" + (dir / "remote").string();
  std::string key;

  Stores() {
    auto kernel = opcache::test::make_kernel(dir / "k", "square", 16);
    opcache::test::write_text(dir / "d.json", kernel.descriptor_json);
    std::vector<std::string> put{"--cache-dir", cache, "put", "--desc", (dir / "d.json").string(), "--scenario",
                                 opcache::test::k_test_scenario};
    for (const auto& file : kernel.files()) {
      put.push_back(file.string());
    }
    key = run_json(put)["key"].get<std::string>();
  }
};

}  // namespace

TEST_CASE("cli::GlobalOptions push and pull --remote URL KEY take KEY as a key, not as a second remote") {
  Stores stores;
  auto pushed = run_json({"--cache-dir", stores.cache, "push", "--remote", stores.remote, stores.key});
  CHECK(pushed["requested"] == 1);
  CHECK(pushed["transferred"] == 1);

  const auto fresh = (stores.dir / "fresh").string();
  auto pulled = run_json({"--cache-dir", fresh, "pull", "--remote", stores.remote, stores.key});
  CHECK(pulled["requested"] == 1);
  CHECK(pulled["transferred"] == 1);
  CHECK(run_json({"--cache-dir", fresh, "ls"})["entries"].size() == 1);
}

TEST_CASE("cli::GlobalOptions --remote=URL and the global form before the subcommand take one value each") {
  Stores stores;
  SUBCASE("--remote=URL after the subcommand") {
    auto pushed = run_json({"--cache-dir", stores.cache, "push", "--remote=" + stores.remote, stores.key});
    CHECK(pushed["transferred"] == 1);
  }
  SUBCASE("opcache --remote URL push KEY") {
    auto pushed = run_json({"--cache-dir", stores.cache, "--remote", stores.remote, "push", stores.key});
    CHECK(pushed["transferred"] == 1);
  }
  SUBCASE("two --remote occurrences are two remotes, in order") {
    const auto second = "file://" + (stores.dir / "second").string();
    auto config = run_json({"--cache-dir", stores.cache, "--remote", stores.remote, "config", "--remote", second});
    REQUIRE(config["remotes"].size() == 2);
    CHECK(config["remotes"][0].get<std::string>().find(stores.dir.path().string() + "/remote") != std::string::npos);
    CHECK(config["remotes"][1].get<std::string>().find(stores.dir.path().string() + "/second") != std::string::npos);
  }
  SUBCASE("a word after a single-valued option is not taken as a second value") {
    auto result = opcache::test::run_cli({"--cache-dir", stores.cache, "--mode", "force", "extra", "config"},
                                         hermetic());
    CHECK(result.exit_code == 2);
    CHECK(result.err.find("extra") != std::string::npos);
  }
}

// The CLI registers only the global options a command line names before its
// `--` (cli/context.hpp, NamedOptions): every spelling must still be read,
// and help must still list every one.
TEST_CASE("cli::GlobalOptions registered by name: every spelling is read, help lists them all") {
  Stores stores;
  SUBCASE("-C DIR, --cache-dir=DIR and the attached short form -CDIR name the same cache") {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"-C", stores.cache, "ls"}, std::vector<std::string>{"--cache-dir=" + stores.cache, "ls"},
          std::vector<std::string>{"ls", "-C", stores.cache}, std::vector<std::string>{"-C" + stores.cache, "ls"}}) {
      CAPTURE(args[0]);
      CHECK(run_json(args)["entries"].size() == 1);
    }
  }
  SUBCASE("an option after `--` is the command's, not opcache's") {
    const auto out = (stores.dir / "out").string();
    auto result = opcache::test::run_cli({"--cache-dir", stores.cache, "exec", "--desc", (stores.dir / "d.json").string(),
                                          "--scenario", opcache::test::k_test_scenario, "--out", out, "--", "sh",
                                          "-c", "echo x > \"$0\"/f", out, "--mode", "force"},
                                         hermetic());
    INFO("stderr: ", result.err);
    CHECK(result.exit_code == 0);
    CHECK(fs::exists(fs::path(out) / "f"));
    CHECK(run_json({"--cache-dir", stores.cache, "ls"})["entries"].size() == 2);  // stored, in the named cache
  }
  SUBCASE("an unknown option is still named") {
    auto result = opcache::test::run_cli({"--cache-dri", stores.cache, "ls"}, hermetic());
    CHECK(result.exit_code == 2);
    CHECK(result.err.find("--cache-dri") != std::string::npos);
  }
  SUBCASE("--help lists every settable option of the settings table") {
    auto help = opcache::test::run_cli({"--help"}, hermetic());
    REQUIRE(help.exit_code == 0);
    for (const auto& row : opcache::setting_descriptors()) {
      if (!row.settable || row.flag.empty()) {
        continue;
      }
      const std::string flag(row.flag);
      const std::string first = flag.substr(0, flag.find(','));
      CAPTURE(first);
      CHECK(help.out.find(first) != std::string::npos);
    }
  }
}
