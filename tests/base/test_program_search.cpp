// base/program_search: finding the program a command name runs, as execvp(3) does.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "base/program_search.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using opcache::base::EmptyPathEntry;
using opcache::base::find_program;
using opcache::test::TempDir;

namespace {

/// Writes an executable (or, with `executable` false, a plain) file at `path`.
void write_program(const fs::path& path, bool executable) {
  opcache::test::write_text(path, "#!/bin/sh\n");
  fs::permissions(path, executable ? fs::perms(0755) : fs::perms(0644), fs::perm_options::replace);
}

}  // namespace

TEST_CASE("base::find_program takes the first executable regular file of PATH, spelled as its entry joins it") {
  TempDir temp;
  fs::create_directories(temp / "dir0" / "prog");  // a directory of that name: skipped
  write_program(temp / "dir1" / "prog", false);     // not executable: skipped
  write_program(temp / "dir2" / "prog", true);
  write_program(temp / "dir3" / "prog", true);
  const std::string path_list = (temp / "dir0").string() + ":" + (temp / "dir1").string() + ":" +
                                (temp / "dir2").string() + "/:" + (temp / "dir3").string();
  const auto found = find_program("prog", path_list, EmptyPathEntry::skipped);
  REQUIRE(found.has_value());
  CHECK(found->string() == (temp / "dir2" / "prog").string());  // one '/' after an entry that ends in one
  CHECK(find_program("prog", (temp / "dir3").string(), EmptyPathEntry::skipped)->string() ==
        (temp / "dir3" / "prog").string());
  CHECK_FALSE(find_program("absent", path_list, EmptyPathEntry::skipped).has_value());
  CHECK_FALSE(find_program("", path_list, EmptyPathEntry::skipped).has_value());
  CHECK_FALSE(find_program("prog", ":" + (temp / "dir1").string(), EmptyPathEntry::skipped).has_value());
}

TEST_CASE("base::find_program takes a name with a '/' as it is, when it is an executable file") {
  TempDir temp;
  write_program(temp / "tool", true);
  write_program(temp / "data", false);
  CHECK(find_program((temp / "tool").string(), "", EmptyPathEntry::skipped)->string() == (temp / "tool").string());
  CHECK_FALSE(find_program((temp / "data").string(), "", EmptyPathEntry::skipped).has_value());
  CHECK_FALSE(find_program((temp / "none").string(), "/bin", EmptyPathEntry::skipped).has_value());
}
