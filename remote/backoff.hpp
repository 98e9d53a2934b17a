// The one retry policy for idempotent HTTP(S) requests, used by the request
// engine (remote/request_engine.hpp) and so by every remote client: which
// outcomes are retried, and how long to wait first (exponential backoff with
// jitter, so many clients retrying after one outage do not retry in step; a
// server's Retry-After is honoured up to a limit). docs/remotes.md, "Retries".
//
// Pure functions of their arguments: the randomness and the sleeping are
// injected (RetryTiming), so tests check the policy without waiting.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <functional>
#include <optional>

namespace opcache::remote {

/// The delay before the first retry, before jitter.
inline constexpr std::chrono::milliseconds k_backoff_base{100};
/// No backoff delay (before Retry-After) exceeds this.
inline constexpr std::chrono::milliseconds k_backoff_cap{2000};
/// A Retry-After longer than this ends the retries: the request fails now
/// rather than block a build for the server's chosen pause.
inline constexpr std::chrono::seconds k_max_retry_after{5};

/// How many retries, and whether a request that ran out of time is retried.
struct RetryPolicy {
  int retries = 2;             ///< extra attempts after the first; negative counts as 0
  bool retry_timeouts = true;  ///< false: a timeout ends the request (a lookup must cost one timeout)
};

/// What one attempt produced, as far as the policy cares.
struct AttemptResult {
  CURLcode code = CURLE_OK;  ///< CURLE_OK when an HTTP response arrived
  long status = 0;           ///< the HTTP status when code is CURLE_OK
  long retry_after_s = 0;    ///< CURLINFO_RETRY_AFTER: seconds (both header forms); ≤ 0 when absent or past
};

/// The injectable side of waiting: a sleep and a source of uniform numbers in
/// [0, 1). Copyable; the functions must be callable from any thread.
struct RetryTiming {
  std::function<void(std::chrono::milliseconds)> sleep;
  std::function<double()> random_unit;

  /// std::this_thread::sleep_for and a thread-local Mersenne Twister.
  static RetryTiming system();
};

/// The backoff before retry number `retry` (1 for the first): with ceiling
/// c = min(k_backoff_cap, k_backoff_base × 2^(retry-1)), a delay in [c/2, c]
/// chosen by `unit` ∈ [0, 1) ("equal jitter"). `retry` < 1 counts as 1.
std::chrono::milliseconds backoff_delay(int retry, double unit) noexcept;

/// Whether to retry after `attempts` attempts (≥ 1), the last of which gave
/// `result`, and after how long; nullopt: do not retry. Retried: transient
/// libcurl failures (curl_handle.hpp is_transient; timeouts only when the
/// policy says so) and HTTP 429 and 5xx, while attempts ≤ policy.retries.
/// A Retry-After above k_max_retry_after ends the retries; a shorter one
/// lengthens the delay to at least that many seconds.
std::optional<std::chrono::milliseconds> retry_delay(const RetryPolicy& policy, const AttemptResult& result,
                                                     int attempts, double unit) noexcept;

}  // namespace opcache::remote
