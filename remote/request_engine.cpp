#include "remote/request_engine.hpp"

#include <array>

#include "base/try.hpp"

namespace opcache::remote {

RequestEngine::RequestEngine(EngineOptions options, RetryTiming timing)
    : m_options(std::move(options)), m_timing(std::move(timing)) {}

int RequestEngine::on_progress(void* engine, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<RequestEngine*>(engine)->m_cancelled ? 1 : 0;  // non-zero aborts the transfer
}

Result<AttemptResult> RequestEngine::attempt(Transfer& transfer, TransferOutcome& outcome) {
  OPCACHE_TRY_ASSIGN(EasyHandlePool::Lease lease, m_pool.acquire());
  CURL* handle = lease.get();
  std::array<char, CURL_ERROR_SIZE> error_buffer{};
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer.data());
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect must never carry credentials elsewhere
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, m_options.connect_timeout_ms);
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, m_options.timeout_ms);
  curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(handle, CURLOPT_USERAGENT, m_options.user_agent.c_str());
  curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, &RequestEngine::on_progress);
  curl_easy_setopt(handle, CURLOPT_XFERINFODATA, this);
  if (!m_options.ca_file.empty()) {
    curl_easy_setopt(handle, CURLOPT_CAINFO, m_options.ca_file.c_str());
  }
  OPCACHE_TRY(transfer.configure(handle));
  AttemptResult result;
  result.code = curl_easy_perform(handle);
  ++outcome.attempts;
  if (auto failure = transfer.local_error()) {
    return *failure;
  }
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &result.status);
  curl_off_t retry_after = 0;
  if (curl_easy_getinfo(handle, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK) {
    result.retry_after_s = static_cast<long>(retry_after);
  }
  outcome.code = result.code;
  outcome.status = result.code == CURLE_OK ? result.status : 0;
  outcome.error_text = error_buffer.data();
  return result;
}

Result<TransferOutcome> RequestEngine::perform(Transfer& transfer) {
  TransferOutcome outcome;
  while (true) {
    OPCACHE_TRY_ASSIGN(AttemptResult result, attempt(transfer, outcome));
    const auto delay = retry_delay(m_options.retry, result, outcome.attempts, m_timing.random_unit());
    if (!delay || m_cancelled) {
      return outcome;
    }
    m_timing.sleep(*delay);
    OPCACHE_TRY(transfer.rewind());
  }
}

std::string attempts_suffix(int attempts) {
  return attempts > 1 ? " (after " + std::to_string(attempts) + " attempts)" : std::string();
}

}  // namespace opcache::remote
