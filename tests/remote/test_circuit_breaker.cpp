// The circuit breaker (remote/circuit_breaker.hpp) with an injected clock:
// opening, the cool-down, closing, sharing through the state file.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>

#include "remote/circuit_breaker.hpp"
#include "base/file_io.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::remote;
using opcache::test::TempDir;

namespace {

struct FakeClock {
  std::int64_t now_ms = 1'700'000'000'000;
  std::function<std::int64_t()> function() {
    return [this] { return now_ms; };
  }
};

}  // namespace

TEST_CASE("remote::CircuitBreaker opens on a failure for exactly the cool-down") {
  TempDir temp;
  FakeClock clock;
  CircuitBreaker breaker(temp.path() / "remotes", "http://a", 60, clock.function());
  CHECK(breaker.allows());
  breaker.record_failure("connection refused");
  CHECK(std::filesystem::exists(breaker.state_file()));
  CHECK_FALSE(breaker.allows());
  clock.now_ms += 59'999;
  CHECK_FALSE(breaker.allows());
  clock.now_ms += 1;
  CHECK(breaker.allows());
}

TEST_CASE("remote::CircuitBreaker closes on a success and removes its state file") {
  TempDir temp;
  FakeClock clock;
  CircuitBreaker breaker(temp.path() / "remotes", "http://a", 60, clock.function());
  breaker.record_failure("timeout");
  breaker.record_success();
  CHECK_FALSE(std::filesystem::exists(breaker.state_file()));
  CHECK(breaker.allows());
}

TEST_CASE("remote::CircuitBreaker is shared through the state directory, per remote") {
  TempDir temp;
  FakeClock clock;
  CircuitBreaker first(temp.path() / "remotes", "http://a", 60, clock.function());
  CircuitBreaker same_remote(temp.path() / "remotes", "http://a", 60, clock.function());
  CircuitBreaker other_remote(temp.path() / "remotes", "http://b", 60, clock.function());
  first.record_failure("refused");
  CHECK_FALSE(same_remote.allows());
  CHECK(other_remote.allows());
  CHECK(first.state_file() == same_remote.state_file());
  CHECK(first.state_file() != other_remote.state_file());
  CHECK(first.state_file().filename() == remote_id("http://a") + ".breaker");
}

TEST_CASE("remote::CircuitBreaker with no cool-down never opens, and ignores an unreadable state file") {
  TempDir temp;
  FakeClock clock;
  CircuitBreaker off(temp.path() / "remotes", "http://a", 0, clock.function());
  off.record_failure("refused");
  CHECK(off.allows());
  CHECK_FALSE(std::filesystem::exists(off.state_file()));

  CircuitBreaker on(temp.path() / "remotes", "http://a", 60, clock.function());
  REQUIRE(opcache::base::ensure_directory(temp.path() / "remotes").ok());
  REQUIRE(opcache::base::write_file_atomic(on.state_file(), "not json").ok());
  CHECK(on.allows());
}

TEST_CASE("remote::CircuitBreaker writes nothing through a remotes/ directory that is a symlink") {
  TempDir temp;
  FakeClock clock;
  std::filesystem::create_directories(temp.path() / "outside");
  std::filesystem::create_directory_symlink(temp.path() / "outside", temp.path() / "remotes");
  CircuitBreaker breaker(temp.path() / "remotes", "http://a", 60, clock.function());
  breaker.record_failure("connection refused");
  CHECK(std::filesystem::is_empty(temp.path() / "outside"));
  CHECK(breaker.allows());  // without its file each process finds out for itself
}
