// `opcache serve`'s settings through the real CLI (cli/cmd_serve.cpp): flags
// from the table, ranges, precedence flag > environment > [serve] file >
// default, --no- forms, refused values (exit 2 naming what was wrong), and
// `opcache serve` becoming the opcache-serve program (cli/program.cpp).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/cli_runner.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

namespace {

using opcache::test::contains;
using opcache::test::hermetic;
using opcache::test::ProcessResult;
using opcache::test::TempDir;

// `opcache [--config FILE] serve --storage DIR --tokens <missing> <args>`:
// the tokens file is missing on purpose, so a run whose settings pass the
// checks stops at start-up with "--tokens: ..." instead of serving.
ProcessResult serve(const TempDir& temp, const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env = {}, const std::string& serve_section = {}) {
  std::vector<std::string> full;
  if (!serve_section.empty()) {
    const auto config = temp / "serve.conf";
    opcache::test::write_text(config, "[serve]\n" + serve_section);
    full = {"--config", config.string()};
  }
  full.insert(full.end(),
              {"serve", "--storage", (temp / "storage").string(), "--tokens", (temp / "missing-tokens").string()});
  full.insert(full.end(), args.begin(), args.end());
  auto result = opcache::test::run_cli(full, hermetic(env));
  INFO("stderr: " << result.err);
  return result;
}

constexpr const char* k_needs_keys = "--require-signature needs --trusted-keys";
constexpr const char* k_started = "--tokens: ";

}  // namespace

TEST_CASE("cli::serve --max-body below its range is refused (exit 2) naming the flag and the value") {
  TempDir temp;
  auto result = serve(temp, {"--max-body", "5"});
  CHECK(result.exit_code == 2);
  CHECK(contains(result.err, "--max-body \"5\" must be an integer from 1024 to 1099511627776"));
  auto junk = serve(temp, {"--threads", "2x"});
  CHECK(junk.exit_code == 2);
  CHECK(contains(junk.err, "--threads \"2x\" must be an integer from 1 to 256"));
}

TEST_CASE("cli::serve a malformed OPCACHE_SERVE_* value fails with exit 2 naming the variable and the value") {
  TempDir temp;
  auto result = serve(temp, {}, {{"OPCACHE_SERVE_THREADS", "many"}});
  CHECK(result.exit_code == 2);
  CHECK(contains(result.err, "environment variable OPCACHE_SERVE_THREADS \"many\" must be an integer from 1 to 256"));
  auto boolean = serve(temp, {}, {{"OPCACHE_SERVE_ANONYMOUS_READ", "maybe"}});
  CHECK(boolean.exit_code == 2);
  CHECK(contains(boolean.err, "environment variable OPCACHE_SERVE_ANONYMOUS_READ \"maybe\" must be true or false"));
}

TEST_CASE("cli::serve takes a flag over the environment over the [serve] file over the default") {
  // require_signature without trusted keys is refused after the sources are
  // merged, so the outcome shows which source won.
  TempDir temp;
  CHECK(contains(serve(temp, {}).err, k_started));  // default: off
  const std::string file_on = "require_signature = on\n";
  auto from_file = serve(temp, {}, {}, file_on);
  CHECK(from_file.exit_code == 2);
  CHECK(contains(from_file.err, k_needs_keys));
  const std::map<std::string, std::string> env_off = {{"OPCACHE_SERVE_REQUIRE_SIGNATURE", "no"}};
  CHECK(contains(serve(temp, {}, env_off, file_on).err, k_started));
  auto flag_on = serve(temp, {"--require-signature"}, env_off, file_on);
  CHECK(flag_on.exit_code == 2);
  CHECK(contains(flag_on.err, k_needs_keys));
  CHECK(contains(serve(temp, {"--no-require-signature"}, {{"OPCACHE_SERVE_REQUIRE_SIGNATURE", "1"}}).err, k_started));
  CHECK(contains(serve(temp, {"--no-require-signature"}, {}, file_on).err, k_started));
}

TEST_CASE("cli::serve a boolean flag and its --no- form together are a usage error") {
  TempDir temp;
  auto result = serve(temp, {"--anonymous-read", "--no-anonymous-read"});
  CHECK(result.exit_code == 2);
  CHECK(contains(result.err, "--no-anonymous-read"));
}

TEST_CASE("cli::serve --help lists every setting with its variable, range and default") {
  auto result = opcache::test::run_cli({"serve", "--help"}, hermetic());
  CHECK(result.exit_code == 0);
  CHECK(contains(result.out, "--no-anonymous-read"));
  CHECK(contains(result.out, "OPCACHE_SERVE_MAX_BODY"));
  CHECK(contains(result.out, "1024..1099511627776"));
  CHECK(contains(result.out, "--bundle-cache"));
}

TEST_CASE("cli::serve is run by opcache-serve beside opcache, which gets the whole command line") {
  // The server's own flag (--hash-token), a global option before the word
  // (--json) and standard input all reach the program opcache serve runs.
  const auto line = opcache::test::run_cli({"--json", "serve", "--hash-token", "--token-name", "ci"},
                                           [] {
                                             auto options = hermetic();
                                             options.stdin_data = "s3cret\n";
                                             return options;
                                           }());
  CHECK(line.exit_code == 0);
  CHECK(contains(line.out, " ci read"));
  const auto direct = opcache::test::run_process(
      // Run directly, the word `serve` may be left out.
      {(std::filesystem::path(opcache::test::cli_path()).parent_path() / "opcache-serve").string(), "--hash-token",
       "--token-name", "ci"},
      [] {
        auto options = hermetic();
        options.stdin_data = "s3cret\n";
        return options;
      }());
  CHECK(direct.exit_code == 0);
  CHECK(direct.out == line.out);
}

TEST_CASE("cli::serve without opcache-serve beside opcache is exit 2 naming the missing program") {
  TempDir temp;
  const auto lonely = temp / "opcache";
  std::filesystem::copy_file(opcache::test::cli_path(), lonely);
  std::filesystem::permissions(lonely, std::filesystem::perms::owner_all);
  const auto result = opcache::test::run_process({lonely.string(), "serve", "--help"}, hermetic());
  CHECK(result.exit_code == 2);
  CHECK(contains(result.err, (temp / "opcache-serve").string() + " is missing"));
  CHECK(contains(result.err, "opcache_serve target"));
  const auto json = opcache::test::run_process({lonely.string(), "--json", "serve"}, hermetic());
  CHECK(json.exit_code == 2);
  const auto document = nlohmann::json::parse(json.out, nullptr, false);
  CHECK(document.value("error", "") == "usage");
  CHECK(contains(document.value("message", ""), "opcache-serve is missing"));
  // Every other command still runs without it.
  CHECK(opcache::test::run_process({lonely.string(), "version"}, hermetic()).exit_code == 0);
}
