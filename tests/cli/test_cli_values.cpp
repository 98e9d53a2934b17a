// Values the `opcache` command reads from its tables, not from lists of its
// own: the --layout choices of import and export are the layout table's names.
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
