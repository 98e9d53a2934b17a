// base/safe_directory: walking below a root without following symlinks.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "base/safe_directory.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::base::ensure_directory_beneath;
using opcache::base::SafeDirectory;
using opcache::test::TempDir;
namespace fs = std::filesystem;

TEST_CASE("base::SafeDirectory::child refuses a symlink, even one to a directory, and names it") {
  TempDir temp;
  fs::create_directories(temp / "outside");
  fs::create_directories(temp / "root");
  fs::create_directory_symlink(temp / "outside", temp / "root" / "sub");
  auto root = SafeDirectory::open_root(temp / "root", /*create=*/false);
  REQUIRE(root.ok());
  auto child = root->child("sub", /*create=*/true);
  REQUIRE_FALSE(child.ok());
  CHECK(child.error().code() == opcache::ErrorCode::usage);
  CHECK(child.error().message().find((temp / "root" / "sub").string() + " is a symlink") != std::string::npos);
  CHECK_FALSE(root->child("..", true).ok());
  CHECK_FALSE(root->child("a/b", true).ok());
  auto missing = root->child("missing", /*create=*/false);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == opcache::ErrorCode::not_found);
}

TEST_CASE("base::SafeDirectory::child_status gives an existing child's owner and mode without opening it") {
  TempDir temp;
  fs::create_directories(temp / "root" / "sub");
  fs::permissions(temp / "root" / "sub", fs::perms(0750), fs::perm_options::replace);
  fs::create_directories(temp / "outside");
  fs::create_directory_symlink(temp / "outside", temp / "root" / "link");
  opcache::test::write_text(temp / "root" / "file", "x");
  auto root = SafeDirectory::open_root(temp / "root", /*create=*/false);
  REQUIRE(root.ok());
  auto sub = root->child_status("sub");
  REQUIRE(sub.ok());
  REQUIRE(sub->has_value());
  CHECK((*sub)->owner == ::geteuid());
  CHECK((*sub)->mode == 0750u);
  auto missing = root->child_status("missing");
  REQUIRE(missing.ok());
  CHECK_FALSE(missing->has_value());
  auto link = root->child_status("link");
  REQUIRE_FALSE(link.ok());
  CHECK(link.error().code() == opcache::ErrorCode::usage);
  CHECK(link.error().message().find((temp / "root" / "link").string() + " is a symlink") != std::string::npos);
  auto file = root->child_status("file");
  REQUIRE_FALSE(file.ok());
  CHECK(file.error().message().find("exists and is not a directory") != std::string::npos);
  CHECK_FALSE(root->child_status("..").ok());
}

TEST_CASE("base::ensure_directory_beneath creates every component and refuses a symlink among them") {
  TempDir temp;
  fs::create_directories(temp / "outside");
  REQUIRE(ensure_directory_beneath(temp / "root", "a/b/c").ok());
  CHECK(fs::is_directory(temp / "root" / "a" / "b" / "c"));
  fs::create_directory_symlink(temp / "outside", temp / "root" / "a" / "link");
  auto status = ensure_directory_beneath(temp / "root", "a/link/c");
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message().find("is a symlink") != std::string::npos);
  CHECK(fs::is_empty(temp / "outside"));
}

TEST_CASE("base::SafeDirectory::child creates group-writable setgid directories in a group-shared directory") {
  TempDir temp;
  ::mode_t old = ::umask(022);
  fs::create_directories(temp / "shared");
  REQUIRE(::chmod((temp / "shared").c_str(), 02775) == 0);
  auto shared = SafeDirectory::open_root(temp / "shared", /*create=*/false);
  REQUIRE(shared.ok());
  auto child = shared->child("sub", /*create=*/true);
  ::umask(old);
  REQUIRE(child.ok());
  CHECK((child->mode() & 07777) == 02775);
}
