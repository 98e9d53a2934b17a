// store/single_flight: lock and failure files stay inside locks/.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "store/single_flight.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::test::TempDir;
namespace fs = std::filesystem;

TEST_CASE("store::SingleFlight refuses a locks/ directory that is a symlink and writes nothing through it") {
  TempDir temp;
  fs::create_directories(temp / "outside");
  fs::create_directories(temp / "cache");
  fs::create_directory_symlink(temp / "outside", temp / "cache" / "locks");
  opcache::store::SingleFlight flight(temp / "cache" / "locks", std::chrono::milliseconds(1000),
                                      std::chrono::milliseconds(1));
  bool built = false;
  auto outcome = flight.run(
      std::string(64, 'a'), [] { return opcache::Result<bool>(false); },
      [&]() -> opcache::Status {
        built = true;
        return opcache::Error::build_failed("compiler crashed");
      });
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.error().message().find((temp / "cache" / "locks").string() + " is a symlink") != std::string::npos);
  CHECK_FALSE(built);
  CHECK(fs::is_empty(temp / "outside"));
}
