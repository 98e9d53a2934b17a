// Reporting a test as skipped (not passed) when the machine lacks something
// it needs. CTest matches the marker (tests/CMakeLists.txt) and reports the
// test as skipped with this reason.
#pragma once

#include <cstdio>
#include <string>

#include <doctest/doctest.h>

namespace opcache::test {

/// Prints "OPCACHE_SKIP: <reason>" to stdout; the caller then returns.
inline void report_skip(const std::string& reason) {
  std::printf("OPCACHE_SKIP: %s\n", reason.c_str());
  std::fflush(stdout);
  MESSAGE("skipped: " << reason);
}

}  // namespace opcache::test

/// Use at the top of a TEST_CASE: skips (and returns) when `condition` holds.
#define OPCACHE_SKIP_IF(condition, reason)     \
  do {                                         \
    if (condition) {                           \
      ::opcache::test::report_skip(reason);    \
      return;                                  \
    }                                          \
  } while (false)
