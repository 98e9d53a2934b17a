// The one HTTP(S) request engine of remote/: runs a request on a pooled
// libcurl easy handle, attempt after attempt, under the one retry policy
// (remote/backoff.hpp). Both the opcache-server client (http_remote.cpp) and
// the S3 client (s3/client.cpp) send every request through it; they supply
// only what differs per request (a Transfer).
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "opcache/result.hpp"
#include "remote/backoff.hpp"
#include "remote/curl_handle.hpp"

namespace opcache::remote {

/// The per-request part of a transfer, supplied by a client. Used by one
/// thread at a time; must outlive the RequestEngine::perform call.
class Transfer {
 public:
  virtual ~Transfer() = default;

  /// Sets the request's own options on `handle` (URL, method, headers, body
  /// and response callbacks); the engine has already set the common ones
  /// (timeouts, error buffer, user agent, no signals, no redirects). An error
  /// ends the request before anything is sent.
  virtual Status configure(CURL* handle) = 0;

  /// Prepares another attempt: rewinds the body and sink, forgets the
  /// previous response. An error ends the request with that error.
  virtual Status rewind() = 0;

  /// A local failure a callback recorded during the last attempt (a write to
  /// disk failed, a size limit was exceeded): never retried, it becomes the
  /// request's error. nullopt when there was none.
  virtual std::optional<Error> local_error() const = 0;
};

/// Limits and identity shared by every request of one client.
struct EngineOptions {
  long connect_timeout_ms = 2000;  ///< per attempt, to establish the connection
  long timeout_ms = 30000;         ///< per attempt, for the whole request including the body
  RetryPolicy retry;
  std::string user_agent = "opcache";
  std::string ca_file;  ///< https: trust these CA certificates (PEM) instead of the system's; empty: system
};

/// How a request ended: an HTTP response (code CURLE_OK, any status: the
/// caller interprets it) or a libcurl failure, after `attempts` attempts.
struct TransferOutcome {
  CURLcode code = CURLE_OK;
  long status = 0;
  int attempts = 0;
  std::string error_text;  ///< libcurl's error buffer of the last attempt; may be empty
};

/// Thread-safe: perform() may run concurrently from many threads; connections
/// are reused through a pool of easy handles.
class RequestEngine {
 public:
  /// An engine with `options`, waiting through `timing` (tests inject theirs).
  explicit RequestEngine(EngineOptions options, RetryTiming timing = RetryTiming::system());

  /// Runs `transfer` until an attempt is final under the retry policy. Errors
  /// are local ones only (Transfer::configure, rewind, local_error; no easy
  /// handle); a transport failure is an outcome with its CURLcode.
  Result<TransferOutcome> perform(Transfer& transfer);

  /// The options given at construction.
  const EngineOptions& options() const noexcept { return m_options; }

  /// Aborts the requests in progress (within about a second: libcurl's
  /// progress callback) and every later one, with CURLE_ABORTED_BY_CALLBACK
  /// and no retry. For a process that is ending while a background request
  /// hangs: its thread can then be joined before exit. Thread-safe; not
  /// undone.
  void cancel() noexcept { m_cancelled = true; }

 private:
  Result<AttemptResult> attempt(Transfer& transfer, TransferOutcome& outcome);
  static int on_progress(void* engine, curl_off_t, curl_off_t, curl_off_t, curl_off_t);

  EngineOptions m_options;
  RetryTiming m_timing;
  EasyHandlePool m_pool;
  std::atomic<bool> m_cancelled{false};
};

/// " (after N attempts)" when N > 1, else "": a suffix for error messages.
std::string attempts_suffix(int attempts);

}  // namespace opcache::remote
