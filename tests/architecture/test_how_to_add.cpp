// docs/architecture.md "How to add": the places a new route, setting, remote
// kind or layout touches that neither the compiler nor another test names.
// (Commands, and the section's own file names: test_how_to_add.py.)
//
// Each enum that names one of them (server::RouteId, remote::RemoteKind,
// layouts::Layout) is listed below by a switch with no default, which is an
// error here (-Werror=switch, the pragma below, whatever the build's
// options) until a new value has its case: the compiler names that value,
// and the tests then check its other places.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "layouts/layout.hpp"
#include "opcache_test_paths.hpp"
#include "remote/remote_store.hpp"
#include "server/routes.hpp"
#include "store/setting_table.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test::how_to_add {

#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"

// The name of each RouteId value, "" past the last one (the values are
// consecutive from 0: no value of the enum sets its number).
std::string_view route_id_name(server::RouteId id) {
  using enum server::RouteId;
  // clang-format off
  switch (id) {  // no default: a new RouteId is an error here until it has its case
    case unknown: return "unknown";
    case signatures: return "signatures";
    case query: return "query";
    case fetch: return "fetch";
    case entry_read: return "entry_read";
    case entry_put: return "entry_put";
    case entry_delete: return "entry_delete";
    case list: return "list";
    case lease_renew: return "lease_renew";
    case lease_release: return "lease_release";
    case lease_acquire: return "lease_acquire";
    case status: return "status";
    case metrics: return "metrics";
    case stats_summary: return "stats_summary";
    case stats_timeseries: return "stats_timeseries";
    case stats_misses: return "stats_misses";
    case stats_tokens: return "stats_tokens";
    case ui_root: return "ui_root";
    case ui: return "ui";
    case healthz: return "healthz";
    case explain: return "explain";
    case revoke: return "revoke";
    case revocations: return "revocations";
    case unrevoke: return "unrevoke";
    case manifest_fetch: return "manifest_fetch";
    case manifest_read: return "manifest_read";
    case manifest_put: return "manifest_put";
  }
  // clang-format on
  return "";
}

// The name of each RemoteKind value, "" past the last one.
std::string_view remote_kind_name(remote::RemoteKind kind) {
  switch (kind) {  // no default: a new RemoteKind is an error here until it has its case
    case remote::RemoteKind::server:
      return "server";
    case remote::RemoteKind::s3:
      return "s3";
    case remote::RemoteKind::file:
      return "file";
  }
  return "";
}

// The name of each Layout value, "" past the last one.
std::string_view layout_value_name(layouts::Layout layout) {
  switch (layout) {  // no default: a new Layout is an error here until it has its case
    case layouts::Layout::mindspore:
      return "mindspore";
    case layouts::Layout::cann:
      return "cann";
    case layouts::Layout::torchair:
      return "torchair";
  }
  return "";
}

#pragma GCC diagnostic pop

// Every value of an enum whose values are consecutive from 0, as `listed` says.
template <typename Enum, typename Listed>
std::vector<Enum> every_value(Listed listed) {
  std::vector<Enum> values;
  for (int i = 0; listed(static_cast<Enum>(i)); ++i) {
    values.push_back(static_cast<Enum>(i));
  }
  return values;
}

std::string source_text(const std::string& relative) {
  return read_text(std::filesystem::path(OPCACHE_SOURCE_DIR) / relative);
}

// The lines of `text` from the line `heading` to the next heading of its level or above.
std::string doc_section(const std::string& text, const std::string& heading) {
  const auto start = text.find("\n" + heading + "\n");
  REQUIRE_MESSAGE(start != std::string::npos, "no heading \"", heading, "\"");
  const std::string level = heading.substr(0, heading.find(' '));
  auto end = std::string::npos;
  for (std::size_t n = 1; n <= level.size(); ++n) {
    end = std::min(end, text.find("\n" + std::string(n, '#') + " ", start + 1));
  }
  return text.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
}

// The lines of `text` that start with `prefix` (a Markdown table: "| ").
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    if (line.rfind(prefix, 0) == 0) {
      lines.push_back(line);
    }
  }
  return lines;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// The choices `--layout` shows in a command's --help: "--layout TEXT:{auto,mindspore,cann,torchair}=auto".
std::set<std::string> layout_choices(const std::string& help) {
  const auto option = help.find("--layout ");
  const auto open = help.find('{', option);
  const auto close = help.find('}', open);
  REQUIRE_MESSAGE(option != std::string::npos, "no --layout in the help");
  REQUIRE_MESSAGE((open != std::string::npos && close != std::string::npos && open < help.find('\n', option)),
                  "--layout shows no choices in the help");
  std::set<std::string> choices;
  std::istringstream list(help.substr(open + 1, close - open - 1));
  for (std::string choice; std::getline(list, choice, ',');) {
    choices.insert(choice);
  }
  return choices;
}

// "http://, https://, s3:// or file://" as its prefixes.
std::vector<std::string> scheme_prefixes() {
  std::string names = remote::remote_scheme_names();
  std::vector<std::string> prefixes;
  for (std::size_t at = 0; at < names.size();) {
    const auto comma = names.find(", ", at);
    const auto last = names.find(" or ", at);
    const auto end = std::min(comma, last);
    prefixes.push_back(names.substr(at, end - at));
    at = end == std::string::npos ? names.size() : end + (end == comma ? 2 : 4);
  }
  return prefixes;
}

TEST_CASE("architecture::how to add a route: every RouteId has its row in the route table") {
  const auto ids = every_value<opcache::server::RouteId>([](auto id) { return !route_id_name(id).empty(); });
  REQUIRE(ids.size() > 20);
  for (const auto id : ids) {
    if (id == opcache::server::RouteId::unknown) {
      CHECK(opcache::server::find_route(id) == nullptr);
      continue;
    }
    CHECK_MESSAGE(opcache::server::find_route(id) != nullptr,
                  ("RouteId::" + std::string(route_id_name(id)) + " has no row in k_routes (server/routes.cpp)"));
  }
  CHECK(opcache::server::routes().size() == ids.size() - 1);
}

TEST_CASE("architecture::how to add a setting: docs/configuration.md's table has its flag, variable and key") {
  const std::string doc = source_text("docs/configuration.md");
  std::string table;
  for (const auto& row : lines_starting(doc_section(doc, "## Precedence"), "| ")) {
    table += row + "\n";
  }
  REQUIRE(table.find("| setting | flag | environment |") != std::string::npos);
  for (const auto& spec : opcache::store::setting_specs()) {
    const auto& info = spec.info;
    const std::string missing =
        "docs/configuration.md's table (\"Precedence\") does not name the setting " + std::string(info.name) + "'s ";
    if (!info.flag.empty()) {
      const std::string flag = opcache::store::primary_flag(spec);
      CHECK_MESSAGE(table.find("`" + flag) != std::string::npos, (missing + "flag " + flag));
    }
    if (!info.env.empty()) {
      const std::string env(info.env);
      CHECK_MESSAGE(table.find("`" + env + "`") != std::string::npos, (missing + "variable " + env));
    }
    if (!info.config_key.empty()) {
      const std::string key(info.config_key);
      CHECK_MESSAGE(table.find("`" + key + "`") != std::string::npos, (missing + "[cache] key " + key));
    }
  }
}

TEST_CASE("architecture::how to add a remote kind: each kind has a URL prefix, and docs/remotes.md lists it") {
  using opcache::remote::RemoteKind;
  const auto kinds = every_value<RemoteKind>([](auto kind) { return !remote_kind_name(kind).empty(); });
  const auto prefixes = scheme_prefixes();
  REQUIRE(kinds.size() >= 3);
  REQUIRE(prefixes.size() >= kinds.size());
  for (const auto kind : kinds) {
    const bool opened = std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& prefix) {
      const auto* scheme = opcache::remote::find_remote_scheme(prefix + "x");
      return scheme != nullptr && scheme->kind == kind;
    });
    CHECK_MESSAGE(opened, ("RemoteKind::" + std::string(remote_kind_name(kind)) +
                           " has no row in k_schemes (remote/remote_store.cpp): no URL opens it"));
  }
  const std::string doc = source_text("docs/remotes.md");
  std::string urls;
  for (const auto& row : lines_starting(doc_section(doc, "## Configuring remotes"), "| `")) {
    urls += row.substr(0, row.find(" | ")) + "\n";  // the URL column
  }
  for (const auto& prefix : prefixes) {
    CHECK_MESSAGE(urls.find("`" + prefix) != std::string::npos,
                  ("docs/remotes.md's table of remote URLs (\"Configuring remotes\") has no row for " + prefix));
  }
}

TEST_CASE("architecture::how to add a layout: its name, import and export, the fuzz target and the docs") {
  using opcache::layouts::Layout;
  const auto layouts = every_value<Layout>([](auto layout) { return !layout_value_name(layout).empty(); });
  REQUIRE(layouts.size() >= 3);
  const auto import_help = opcache::test::run_cli({"import", "--help"}, opcache::test::hermetic());
  const auto export_help = opcache::test::run_cli({"export", "--help"}, opcache::test::hermetic());
  REQUIRE(import_help.exit_code == 0);
  REQUIRE(export_help.exit_code == 0);
  const std::string fuzz = source_text("tests/fuzz/fuzz_layouts.cpp");
  const std::string integration = lowercase(source_text("docs/integration.md"));
  const auto export_rows = lines_starting(doc_section(source_text("docs/cli.md"), "## Commands"), "| `export ");
  REQUIRE(export_rows.size() == 1);
  for (const auto layout : layouts) {
    const std::string name = opcache::layouts::to_string(layout);
    const std::string value = "Layout::" + std::string(layout_value_name(layout));
    CHECK_MESSAGE(!name.empty(), (value + " has no row in the layout table k_layouts (layouts/layout.cpp)"));
    if (name.empty()) {
      continue;
    }
    CHECK_MESSAGE(opcache::layouts::parse_layout(name) == layout,
                  ("parse_layout (layouts/layout.cpp) does not read \"" + name + "\", the name of " + value));
    CHECK_MESSAGE(layout_choices(import_help.out).count(name) == 1,
                  ("opcache import --layout does not take " + name + " (cli/cmd_layouts.cpp)"));
    CHECK_MESSAGE(layout_choices(export_help.out).count(name) == 1,
                  ("opcache export --layout does not take " + name + " (cli/cmd_layouts.cpp)"));
    CHECK_MESSAGE(fuzz.find("layouts::scan_" + name + "(") != std::string::npos,
                  ("tests/fuzz/fuzz_layouts.cpp does not scan a tree of " + name + " (layouts::scan_" + name + ")"));
    CHECK_MESSAGE(integration.find("\n## " + name) != std::string::npos,
                  ("docs/integration.md has no section (\"## " + name + " …\") on the layout " + name));
    CHECK_MESSAGE(export_rows.front().find(name) != std::string::npos,
                  ("docs/cli.md's row of export does not name the layout " + name));
  }
}

}  // namespace opcache::test::how_to_add
