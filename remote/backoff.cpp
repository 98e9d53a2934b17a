#include "remote/backoff.hpp"

#include <algorithm>
#include <random>
#include <thread>

#include "remote/curl_handle.hpp"

namespace opcache::remote {

RetryTiming RetryTiming::system() {
  return RetryTiming{[](std::chrono::milliseconds delay) { std::this_thread::sleep_for(delay); },
                     [] {
                       thread_local std::mt19937_64 random{std::random_device{}()};
                       return std::uniform_real_distribution<double>(0.0, 1.0)(random);
                     }};
}

std::chrono::milliseconds backoff_delay(int retry, double unit) noexcept {
  const long ceiling = std::min<long>(k_backoff_cap.count(), k_backoff_base.count() << std::clamp(retry - 1, 0, 10));
  const double share = std::clamp(unit, 0.0, 1.0);
  return std::chrono::milliseconds(ceiling / 2 + static_cast<long>(share * static_cast<double>(ceiling - ceiling / 2)));
}

std::optional<std::chrono::milliseconds> retry_delay(const RetryPolicy& policy, const AttemptResult& result,
                                                     int attempts, double unit) noexcept {
  if (attempts > std::max(0, policy.retries)) {
    return std::nullopt;
  }
  if (result.code != CURLE_OK) {
    const bool timed_out = result.code == CURLE_OPERATION_TIMEDOUT;
    if (!is_transient(result.code) || (timed_out && !policy.retry_timeouts)) {
      return std::nullopt;
    }
    return backoff_delay(attempts, unit);
  }
  if (!is_transient_status(result.status)) {
    return std::nullopt;
  }
  const std::chrono::seconds retry_after{std::max(0L, result.retry_after_s)};
  if (retry_after > k_max_retry_after) {
    return std::nullopt;
  }
  return std::max<std::chrono::milliseconds>(backoff_delay(attempts, unit), retry_after);
}

}  // namespace opcache::remote
