// base::read_small_file: the whole file, up to a bound, whatever its reported size.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "base/file_io.hpp"
#include "tests/support/temp_dir.hpp"

TEST_CASE("base::read_small_file reads files up to the bound and refuses one byte more") {
  opcache::test::TempDir temp;
  const auto path = temp.path() / "record";
  for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{70000}}) {
    CAPTURE(size);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << std::string(size, 'x');
    auto exact = opcache::base::read_small_file(path, size);
    REQUIRE(exact.ok());
    CHECK(*exact == std::string(size, 'x'));
    auto roomy = opcache::base::read_small_file(path, size + 100000);
    REQUIRE(roomy.ok());
    CHECK(roomy->size() == size);
    if (size > 0) {
      auto over = opcache::base::read_small_file(path, size - 1);
      REQUIRE_FALSE(over.ok());
      CHECK(over.error().code() == opcache::ErrorCode::corrupt);
    }
  }
}

TEST_CASE("base::read_small_file reads past a size the file system under-reports") {
  // /proc reports 0 bytes for files that hold more: the buffer must grow.
  auto status = opcache::base::read_small_file("/proc/self/status", 1 << 20);
  REQUIRE(status.ok());
  CHECK(status->size() > 200);
  CHECK(status->rfind("Name:", 0) == 0);
  CHECK(status->find("VmRSS:") != std::string::npos);
  auto bounded = opcache::base::read_small_file("/proc/self/status", 100);
  REQUIRE_FALSE(bounded.ok());
  CHECK(bounded.error().code() == opcache::ErrorCode::corrupt);
}
