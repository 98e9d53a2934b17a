// A check shared by the tests of user-facing parsers: a result must be a
// `usage` error whose message names what the user has to fix.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "opcache/result.hpp"

namespace opcache::test {

/// REQUIREs that `result` failed, CHECKs that it is a `usage` error and that
/// its message contains every one of `needles`.
template <typename R>
void expect_usage(const R& result, const std::vector<std::string>& needles) {
  REQUIRE_FALSE(result.ok());
  INFO("message: " << result.error().message());
  CHECK(result.error().code() == ErrorCode::usage);
  for (const auto& needle : needles) {
    CHECK_MESSAGE(result.error().message().find(needle) != std::string::npos,
                  "expected \"" << needle << "\" in the message");
  }
}

}  // namespace opcache::test
