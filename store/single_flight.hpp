// Single flight across processes: when many processes miss the same key at
// once, one builds and the others wait for its result (the fix for the
// multi-card compile storms and timeouts MindSpore documents).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "opcache/result.hpp"

namespace opcache::store {

/// The outcome of a flight.
enum class FlightOutcome {
  hit,    ///< the result was there (at once, or after waiting for another builder)
  built,  ///< this process built it
};

/// Coordinates builders of the same key through lock files in `locks_dir`.
/// Protocol (docs/architecture.md "Single flight"):
///  1. try_hit() without any lock: the common, lock-free hit path;
///  2. lock locks/<key>.lock, waiting up to `timeout`; a crashed holder's lock
///     is released by the kernel, so a waiter takes over within one poll;
///  3. try_hit() again: the holder we waited for may have stored it;
///  4. if we waited and the build we waited for failed (a failure record newer
///     than our wait began), return that failure without building again;
///  5. otherwise build(); on failure leave a failure record for the waiters.
/// Safe to use from several threads only with distinct keys per thread.
class SingleFlight {
 public:
  SingleFlight(std::filesystem::path locks_dir, std::chrono::milliseconds timeout,
               std::chrono::milliseconds poll = std::chrono::milliseconds(20));

  /// `try_hit` returns true when the result is available (and delivered);
  /// `build` builds and stores it, or fails (its error goes to the waiters,
  /// with code build_failed). Waiting longer than the timeout is `timeout`.
  Result<FlightOutcome> run(const std::string& key, const std::function<Result<bool>()>& try_hit,
                            const std::function<Status()>& build) const;

  /// Path of the lock file of `key`.
  std::filesystem::path lock_path(const std::string& key) const;
  /// Path of the failure record of `key`.
  std::filesystem::path failure_path(const std::string& key) const;

 private:
  struct Failure {
    long pid = 0;
    std::int64_t time_ms = 0;
    std::string message;
  };
  std::optional<Failure> read_failure(const std::string& key) const;
  void record_failure(const std::string& key, const Error& error) const;

  std::filesystem::path m_locks_dir;
  std::chrono::milliseconds m_timeout;
  std::chrono::milliseconds m_poll;
};

}  // namespace opcache::store
