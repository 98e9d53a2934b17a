// base/temporary_directory: a directory that lives for one scope.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <utility>

#include "base/temporary_directory.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using opcache::base::TemporaryDirectory;
using opcache::test::TempDir;

TEST_CASE("base::TemporaryDirectory is created under its parent with the prefix and removed with its contents") {
  TempDir temp;
  fs::path created;
  {
    auto directory = TemporaryDirectory::create(temp.path(), ".build-");
    REQUIRE(directory.ok());
    created = directory->path();
    CHECK(created.parent_path() == temp.path());
    CHECK(created.filename().string().rfind(".build-", 0) == 0);
    CHECK(created.filename().string().size() == std::string(".build-").size() + 16);
    REQUIRE(fs::is_directory(created));
    fs::create_directory(created / "sub");
    opcache::test::write_text(created / "sub" / "k.o", "object");
  }
  CHECK_FALSE(fs::exists(created));
  CHECK(fs::is_empty(temp.path()));
}

TEST_CASE("base::TemporaryDirectory moved keeps one owner, and a missing parent is an io error naming the path") {
  TempDir temp;
  auto first = TemporaryDirectory::create(temp.path(), "a-");
  REQUIRE(first.ok());
  const fs::path path = first->path();
  {
    TemporaryDirectory moved = std::move(*first);
    CHECK(first->path().empty());
    CHECK(moved.path() == path);
    CHECK(fs::is_directory(path));
  }
  CHECK_FALSE(fs::exists(path));  // removed once, by the new owner

  auto missing = TemporaryDirectory::create(temp / "no" / "such", "b-");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == opcache::ErrorCode::io);
  CHECK(missing.error().message().find((temp / "no" / "such").string()) != std::string::npos);
}
