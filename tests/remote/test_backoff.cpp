// The one retry policy (remote/backoff.hpp): backoff bounds with jitter, the
// cap, Retry-After, and which outcomes are retried. Pure functions: no waiting.
#include <doctest/doctest.h>

#include <chrono>

#include "remote/backoff.hpp"

using namespace opcache::remote;
using std::chrono::milliseconds;

namespace {

AttemptResult http(long status, long retry_after_s = 0) { return AttemptResult{CURLE_OK, status, retry_after_s}; }
AttemptResult failed(CURLcode code) { return AttemptResult{code, 0, 0}; }

}  // namespace

TEST_CASE("remote::Backoff doubles from 100 ms with equal jitter between half the ceiling and the ceiling") {
  CHECK(backoff_delay(1, 0.0) == milliseconds(50));
  CHECK(backoff_delay(1, 0.999) <= milliseconds(100));
  CHECK(backoff_delay(1, 0.999) >= milliseconds(99));
  CHECK(backoff_delay(2, 0.0) == milliseconds(100));
  CHECK(backoff_delay(3, 0.5) == milliseconds(300));
  CHECK(backoff_delay(5, 0.0) == milliseconds(800));
  CHECK(backoff_delay(0, 0.0) == backoff_delay(1, 0.0));  // below 1 counts as the first retry
}

TEST_CASE("remote::Backoff never exceeds the cap, however many retries") {
  for (int retry = 1; retry <= 64; ++retry) {
    for (double unit : {0.0, 0.25, 0.5, 0.999}) {
      const auto delay = backoff_delay(retry, unit);
      CHECK(delay <= k_backoff_cap);
      CHECK(delay >= milliseconds(50));
    }
  }
  CHECK(backoff_delay(6, 0.0) == k_backoff_cap / 2);
  CHECK(backoff_delay(40, 1.0) == k_backoff_cap);
}

TEST_CASE("remote::Backoff retries 429, 5xx and transient transport failures, nothing else") {
  const RetryPolicy policy{2, true};
  CHECK(retry_delay(policy, http(503), 1, 0.0) == backoff_delay(1, 0.0));
  CHECK(retry_delay(policy, http(500), 2, 0.0) == backoff_delay(2, 0.0));
  CHECK(retry_delay(policy, http(429), 1, 0.0).has_value());
  CHECK(retry_delay(policy, failed(CURLE_COULDNT_CONNECT), 1, 0.0) == backoff_delay(1, 0.0));
  CHECK(retry_delay(policy, failed(CURLE_RECV_ERROR), 1, 0.0).has_value());
  CHECK(retry_delay(policy, failed(CURLE_OPERATION_TIMEDOUT), 1, 0.0).has_value());
  CHECK_FALSE(retry_delay(policy, http(200), 1, 0.0).has_value());
  CHECK_FALSE(retry_delay(policy, http(404), 1, 0.0).has_value());
  CHECK_FALSE(retry_delay(policy, http(403), 1, 0.0).has_value());
  CHECK_FALSE(retry_delay(policy, failed(CURLE_URL_MALFORMAT), 1, 0.0).has_value());
  CHECK_FALSE(retry_delay(policy, failed(CURLE_WRITE_ERROR), 1, 0.0).has_value());
}

TEST_CASE("remote::Backoff stops after the policy's retries, and at once with none") {
  CHECK(retry_delay(RetryPolicy{2, true}, http(503), 2, 0.0).has_value());
  CHECK_FALSE(retry_delay(RetryPolicy{2, true}, http(503), 3, 0.0).has_value());
  CHECK_FALSE(retry_delay(RetryPolicy{0, true}, http(503), 1, 0.0).has_value());
  CHECK_FALSE(retry_delay(RetryPolicy{-3, true}, http(503), 1, 0.0).has_value());
}

TEST_CASE("remote::Backoff does not retry a timeout when the policy says a lookup costs one timeout") {
  const RetryPolicy lookup{2, false};
  CHECK_FALSE(retry_delay(lookup, failed(CURLE_OPERATION_TIMEDOUT), 1, 0.0).has_value());
  CHECK(retry_delay(lookup, failed(CURLE_COULDNT_CONNECT), 1, 0.0).has_value());
}

TEST_CASE("remote::Backoff honours Retry-After up to the limit and gives up beyond it") {
  const RetryPolicy policy{2, true};
  CHECK(retry_delay(policy, http(503, 3), 1, 0.0) == milliseconds(3000));
  CHECK(retry_delay(policy, http(429, 5), 1, 0.0) == milliseconds(5000));
  CHECK_FALSE(retry_delay(policy, http(503, 6), 1, 0.0).has_value());
  CHECK_FALSE(retry_delay(policy, http(503, 3600), 1, 0.0).has_value());
  // A date in the past reads as a negative delay: no pause beyond the backoff.
  CHECK(retry_delay(policy, http(503, -20), 1, 0.0) == backoff_delay(1, 0.0));
  // Retry-After never shortens the backoff.
  CHECK(retry_delay(RetryPolicy{30, true}, http(503, 1), 20, 1.0) == milliseconds(2000));
}

TEST_CASE("remote::Backoff system timing draws uniform numbers from 0 up to 1") {
  auto timing = RetryTiming::system();
  for (int i = 0; i < 1000; ++i) {
    const double unit = timing.random_unit();
    CHECK(unit >= 0.0);
    CHECK(unit < 1.0);
  }
}
