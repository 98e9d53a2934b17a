// store/directory_sink: members land in the output directory and nowhere else.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "store/directory_sink.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::store::DirectorySink;
using opcache::store::MemberEntry;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::write_text;
namespace fs = std::filesystem;

namespace {

void write_member(DirectorySink& sink, const std::string& name, const std::string& contents) {
  MemberEntry member{name, contents.size(), "", "object"};
  REQUIRE(sink.begin(member).ok());
  REQUIRE(sink.write(contents.data(), contents.size()).ok());
  REQUIRE(sink.end(member).ok());
}

}  // namespace

TEST_CASE("store::DirectorySink replaces a symlink planted at a member name and leaves its target untouched") {
  TempDir temp;
  write_text(temp / "victim", "precious");
  fs::create_directories(temp / "out");
  fs::create_symlink(temp / "victim", temp / "out" / "kernel.o");
  DirectorySink sink(temp / "out");
  write_member(sink, "kernel.o", "new kernel");
  auto published = sink.commit();
  REQUIRE(published.ok());
  CHECK(read_text(temp / "victim") == "precious");
  CHECK_FALSE(fs::is_symlink(temp / "out" / "kernel.o"));
  CHECK(read_text(temp / "out" / "kernel.o") == "new kernel");
}

TEST_CASE("store::DirectorySink refuses member names with '/' or \"..\" before creating anything") {
  TempDir temp;
  fs::create_directories(temp / "out");
  DirectorySink sink(temp / "out");
  for (const std::string name : {"../escape.o", "/tmp/absolute.o", "..", "a/b.o"}) {
    CAPTURE(name);
    CHECK_FALSE(sink.begin(MemberEntry{name, 0, "", "object"}).ok());
  }
  CHECK(fs::is_empty(temp / "out"));
}

TEST_CASE("store::DirectorySink writes into the directory it opened even if the path becomes a symlink meanwhile") {
  TempDir temp;
  fs::create_directories(temp / "outside");
  fs::create_directories(temp / "out");
  DirectorySink sink(temp / "out");
  write_member(sink, "kernel.o", "bytes");
  fs::rename(temp / "out", temp / "out-moved");
  fs::create_directory_symlink(temp / "outside", temp / "out");
  REQUIRE(sink.commit().ok());
  CHECK(fs::is_empty(temp / "outside"));
  CHECK(read_text(temp / "out-moved" / "kernel.o") == "bytes");
}
