// Waiting between retries of idempotent requests: exponential backoff with
// jitter, so many clients retrying after one outage do not retry in step.
#pragma once

#include <chrono>
#include <optional>

namespace opcache::remote {

/// The delay before retry number `retry` (1 for the first retry): 100 ms ×
/// 2^(retry-1), scaled by a random factor in [0.5, 1.5), at most 5 s; a
/// server's Retry-After (seconds) is used instead when given and ≤ 5 s.
std::chrono::milliseconds backoff_delay(int retry, std::optional<long> retry_after_s = std::nullopt);

/// Sleeps for backoff_delay(retry, retry_after_s).
void backoff_sleep(int retry, std::optional<long> retry_after_s = std::nullopt);

}  // namespace opcache::remote
