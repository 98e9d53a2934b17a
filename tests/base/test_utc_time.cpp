// base/utc_time: a moment as UTC text in the format its reader expects.
#include <doctest/doctest.h>

#include <string>

#include "base/utc_time.hpp"

using opcache::base::utc_text;

TEST_CASE("base::utc_text formats Unix milliseconds in UTC, whole seconds only") {
  // 2026-11-25T07:05:09.999Z
  const std::int64_t ms = 1795590309999;
  CHECK(utc_text(ms, "%Y-%m-%dT%H:%M:%SZ") == "2026-11-25T07:05:09Z");
  CHECK(utc_text(ms, "%Y%m%d%H%M%S") == "20261125070509");
  CHECK(utc_text(ms, "%Y-%m-%d %H:%M UTC") == "2026-11-25 07:05 UTC");
  CHECK(utc_text(0, "%Y-%m-%dT%H:%M:%SZ") == "1970-01-01T00:00:00Z");
}

TEST_CASE("base::utc_text gives an empty string when the text would not fit") {
  CHECK(utc_text(0, "%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y") == "");
}
