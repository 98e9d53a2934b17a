// Issue 37's last rules read from one place on the command line: push and
// pull's --parallel is checked by base/value_parse as every other integer
// option (its refusal worded as theirs), and --remote's help names the URL
// schemes of remote/'s scheme table instead of a list of its own.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "opcache/opcache.hpp"
#include "remote/remote_store.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

namespace opcache::test::issue37_cli {

// The line of `opcache --help` that describes --remote.
std::string remote_help_line() {
  const auto help = run_cli({"--help"}, hermetic());
  REQUIRE(help.exit_code == 0);
  const auto option = help.out.find("  --remote ");
  REQUIRE_MESSAGE(option != std::string::npos, help.out);
  return help.out.substr(option, help.out.find('\n', option) - option);
}

}  // namespace opcache::test::issue37_cli

TEST_CASE("cli::push and pull refuse a --parallel outside 1..256 with base::integer_refusal's message") {
  opcache::test::TempDir temp;
  const opcache::test::CliRunner cli(temp);
  const std::string usage = " (run `opcache --help` or `opcache COMMAND --help`)\n";
  for (const std::string command : {"push", "pull"}) {
    for (const std::string flag : {"--parallel", "-j"}) {
      for (const std::string value : {"0", "x", "257", "1.5"}) {
        CAPTURE(command + " " + flag + " " + value);
        const auto result = cli.run({command, flag, value});
        CHECK(result.exit_code == 2);
        CHECK(result.err ==
              "opcache: error: --parallel: \"" + value + "\" must be an integer from 1 to 256" + usage);
      }
    }
  }
  // The bounds themselves pass the check: with no remote configured, the command itself refuses.
  for (const std::string value : {"1", "256"}) {
    const auto result = cli.run({"push", "--parallel", value});
    CAPTURE(result.err);
    CHECK_FALSE(opcache::test::contains(result.err, "--parallel"));
  }
}

TEST_CASE("cli::--remote's help names every URL scheme of the remote scheme table, as the C ABI's schema does") {
  const std::string schemes = opcache::remote::remote_scheme_names();
  REQUIRE(opcache::test::contains(schemes, "s3://"));
  const auto line = opcache::test::issue37_cli::remote_help_line();
  CHECK_MESSAGE(opcache::test::contains(line, "a URL starts with " + schemes), line);
  for (const std::string prefix : {"http://", "https://", "s3://", "file://"}) {
    REQUIRE(opcache::remote::find_remote_scheme(prefix + "x") != nullptr);
    CHECK(opcache::test::contains(line, prefix));
  }
  bool found = false;
  for (const auto& row : opcache::setting_descriptors()) {
    if (row.flag == "--remote") {
      found = true;
      CHECK(opcache::test::contains(std::string(row.help), "a URL starts with " + schemes));
    }
  }
  CHECK(found);
}
