#include "remote/backoff.hpp"

#include <algorithm>
#include <random>
#include <thread>

namespace opcache::remote {

std::chrono::milliseconds backoff_delay(int retry, std::optional<long> retry_after_s) {
  constexpr long k_cap_ms = 5000;
  if (retry_after_s && *retry_after_s >= 0 && *retry_after_s * 1000 <= k_cap_ms) {
    return std::chrono::milliseconds(*retry_after_s * 1000);
  }
  thread_local std::mt19937 random{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  const double base = 100.0 * static_cast<double>(1L << std::clamp(retry - 1, 0, 10));
  return std::chrono::milliseconds(std::min(k_cap_ms, static_cast<long>(base * jitter(random))));
}

void backoff_sleep(int retry, std::optional<long> retry_after_s) {
  std::this_thread::sleep_for(backoff_delay(retry, retry_after_s));
}

}  // namespace opcache::remote
