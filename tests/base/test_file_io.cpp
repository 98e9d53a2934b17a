// base/file_io: reading a file descriptor to the end of a buffer.
#include <doctest/doctest.h>

#include <string>

#include "base/file_io.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::test::TempDir;

TEST_CASE("base::read_up_to fills the buffer, or stops at end of file and says how much it read") {
  TempDir temp;
  const auto path = temp / "data";
  const std::string contents(100000, 'x');
  opcache::test::write_text(path, contents);

  auto fd = opcache::base::open_for_reading(path);
  REQUIRE(fd.ok());
  std::string head(40000, '\0');
  auto got = opcache::base::read_up_to(fd->get(), head.data(), head.size(), path);
  REQUIRE(got.ok());
  CHECK(*got == head.size());
  CHECK(head == contents.substr(0, 40000));

  std::string rest(100000, '\0');  // more room than the file has left
  got = opcache::base::read_up_to(fd->get(), rest.data(), rest.size(), path);
  REQUIRE(got.ok());
  CHECK(*got == 60000);
  CHECK(rest.substr(0, 60000) == contents.substr(40000));

  got = opcache::base::read_up_to(-1, rest.data(), rest.size(), path);
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().message().find("data") != std::string::npos);
}
