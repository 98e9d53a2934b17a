// Values the `opcache` command reads from its tables and parsers, not from
// lists of its own: the --layout choices of import and export are the layout
// table's names, and integer options and remote attributes are read by
// base::parse_integer and refused with the value and the range.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "layouts/layout.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

namespace opcache::test::cli_values {

// The choices a command's --help shows for --layout, in order:
// "--layout TEXT:{auto,mindspore,cann,torchair}=auto" gives auto, mindspore, cann, torchair.
std::vector<std::string> help_layout_choices(const std::string& command) {
  const auto help = run_cli({command, "--help"}, hermetic());
  REQUIRE(help.exit_code == 0);
  const auto option = help.out.find("--layout TEXT:{");
  REQUIRE_MESSAGE(option != std::string::npos, help.out);
  const auto open = help.out.find('{', option);
  const auto close = help.out.find('}', open);
  REQUIRE(close != std::string::npos);
  std::vector<std::string> choices;
  std::string list = help.out.substr(open + 1, close - open - 1) + ",";
  for (std::size_t at = 0, comma; (comma = list.find(',', at)) != std::string::npos; at = comma + 1) {
    choices.push_back(list.substr(at, comma - at));
  }
  return choices;
}

// The layout table's names, after `first`.
std::vector<std::string> table_names(std::vector<std::string> first = {}) {
  for (const auto& row : layouts::layout_table()) {
    first.emplace_back(row.name);
  }
  return first;
}

}  // namespace opcache::test::cli_values

TEST_CASE("cli::import and export take as --layout the names of the layout table, in its order, and nothing else") {
  using namespace opcache::test::cli_values;
  REQUIRE(opcache::layouts::layout_table().size() >= 3);
  CHECK(help_layout_choices("import") == table_names({"auto"}));
  CHECK(help_layout_choices("export") == table_names());
  for (const auto& row : opcache::layouts::layout_table()) {
    CHECK(opcache::layouts::to_string(row.layout) == std::string(row.name));
    CHECK(opcache::layouts::parse_layout(row.name) == row.layout);
  }
  CHECK_FALSE(opcache::layouts::parse_layout("auto").has_value());
  CHECK_FALSE(opcache::layouts::parse_layout("MindSpore").has_value());
  opcache::test::TempDir temp;
  const auto refused = opcache::test::run_cli({"export", temp.path().string(), "--layout", "ccache"},
                                              opcache::test::hermetic());
  CHECK(refused.exit_code == 2);
  CHECK(opcache::test::contains(refused.err, "--layout: ccache not in {mindspore,cann,torchair}"));
}

TEST_CASE("cli integer options are read as base::parse_integer reads them and refused with the value and the range") {
  opcache::test::TempDir temp;
  const opcache::test::CliRunner cli(temp);
  const std::string object = (temp.path() / "k.o").string();
  opcache::test::write_text(object, "object");
  struct Refused {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Refused> refused = {
      {{"export", temp.path().string(), "--ranks", "0"}, "--ranks: \"0\" must be an integer from 1 to 65536"},
      {{"export", temp.path().string(), "--ranks", "8x"}, "--ranks: \"8x\" must be an integer from 1 to 65536"},
      {{"ls", "--limit", "-1"}, "--limit: \"-1\" must be an integer of 0 or more"},
      {{"ls", "--limit", "1e3"}, "--limit: \"1e3\" must be an integer of 0 or more"},
      {{"put", "--desc", "d.json", "--scenario", "phase=train", "--build-ms", "fast", object},
       "--build-ms: \"fast\" must be an integer of 0 or more"},
  };
  for (const auto& [args, message] : refused) {
    CAPTURE(opcache::test::CliRunner::join(args));
    const auto result = cli.run(args);
    CHECK(result.exit_code == 2);
    CHECK_MESSAGE(opcache::test::contains(result.err, message), result.err);
  }
  const auto listed = cli.run({"ls", "--limit", "+2"});
  CHECK_MESSAGE(listed.exit_code == 0, listed.err);
}

TEST_CASE("cli refuses a remote with parallelism=0 naming the attribute and the range, where it once took 1") {
  opcache::test::TempDir temp;
  const opcache::test::CliRunner cli(temp);
  const std::string remote = "file://" + (temp.path() / "share").string();
  const auto result = cli.run({"--remote", remote + "|parallelism=0", "push"});
  CHECK(result.exit_code == 2);
  const std::string message = "--remote " + remote + ": parallelism \"0\" must be an integer from 1 to 256";
  CHECK_MESSAGE(opcache::test::contains(result.err, message), result.err);
}
