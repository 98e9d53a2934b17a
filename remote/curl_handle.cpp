#include "remote/curl_handle.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "base/text.hpp"
#include "base/try.hpp"
#include "remote/curl_library.hpp"

namespace opcache::remote {

namespace {

// Query parameters whose values are secrets (presigned URLs, tokens).
constexpr std::array<std::string_view, 8> k_secret_parameters = {
    "x-amz-signature", "x-amz-credential", "x-amz-security-token", "token",
    "access_token",    "signature",        "awsaccesskeyid",       "x-goog-signature",
};

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool is_secret_parameter(std::string_view name) {
  const std::string lower = lowercase(name);
  return std::find(k_secret_parameters.begin(), k_secret_parameters.end(), lower) != k_secret_parameters.end();
}

std::string redact_query(std::string_view query) {
  std::string out;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    out += (eq != std::string_view::npos && is_secret_parameter(name)) ? std::string(name) + "=REDACTED"
                                                                        : std::string(pair);
    if (amp == std::string_view::npos) {
      break;
    }
    out += '&';
    query.remove_prefix(amp + 1);
  }
  return out;
}

const char* reason_phrase(long status) noexcept {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
  }
}

std::string request_prefix(std::string_view what, std::string_view method, std::string_view url) {
  std::string out(what);
  out += ' ';
  out += method;
  out += ' ';
  out += redact_url(url);
  return out;
}

}  // namespace

Status ensure_curl_initialized() {
  OPCACHE_TRY(load_curl());
  static std::once_flag once;
  static CURLcode outcome = CURLE_OK;
  std::call_once(once, [] { outcome = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (outcome != CURLE_OK) {
    return Error::internal(std::string("curl_global_init failed: ") + curl_easy_strerror(outcome));
  }
  return {};
}

Result<EasyHandle> make_easy_handle() {
  if (auto status = ensure_curl_initialized(); !status) {
    return status.error();
  }
  EasyHandle handle(curl_easy_init());
  if (!handle) {
    return Error::internal("curl_easy_init failed (out of memory?)");
  }
  return handle;
}

Status append_header(HeaderList& list, std::string_view line) {
  if (line.find_first_of("\r\n") != std::string_view::npos) {
    return Error::usage("HTTP header line contains a line break: " + std::string(line.substr(0, line.find(':'))));
  }
  const std::string copy(line);
  curl_slist* appended = curl_slist_append(list.get(), copy.c_str());
  if (appended == nullptr) {
    return Error::internal("curl_slist_append failed (out of memory?)");
  }
  // On success curl_slist_append returns the same head when the list was not empty.
  (void)list.release();
  list.reset(appended);
  return {};
}

EasyHandlePool::Lease::~Lease() {
  if (m_pool != nullptr && m_handle) {
    m_pool->release(std::move(m_handle));
  }
}

Result<EasyHandlePool::Lease> EasyHandlePool::acquire() {
  {
    base::MutexLock lock(m_mutex);
    if (!m_idle.empty()) {
      EasyHandle handle = std::move(m_idle.back());
      m_idle.pop_back();
      return Lease(this, std::move(handle));
    }
  }
  auto handle = make_easy_handle();
  if (!handle) {
    return handle.error();
  }
  return Lease(this, std::move(handle).value());
}

void EasyHandlePool::release(EasyHandle handle) noexcept {
  // Clears options (callbacks, buffers that are about to dangle) but keeps
  // live connections and caches, which is the point of pooling.
  curl_easy_reset(handle.get());
  base::MutexLock lock(m_mutex);
  if (m_idle.size() < m_max_idle) {
    m_idle.push_back(std::move(handle));
  }
}

void ResponseHeaders::install(CURL* handle) {
  curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, &ResponseHeaders::on_header);
  curl_easy_setopt(handle, CURLOPT_HEADERDATA, this);
}

std::optional<std::string> ResponseHeaders::get(std::string_view lowercase_name) const {
  for (const auto& [name, value] : m_headers) {
    if (name == lowercase_name) {
      return value;
    }
  }
  return std::nullopt;
}

std::size_t ResponseHeaders::on_header(char* data, std::size_t size, std::size_t count, void* user) {
  static_cast<ResponseHeaders*>(user)->add_line(std::string_view(data, size * count));
  return size * count;
}

void ResponseHeaders::add_line(std::string_view line) {
  if (line.substr(0, 5) == "HTTP/") {
    m_headers.clear();
    return;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) {
    return;  // the blank line ending the headers, or an obsolete folded line
  }
  m_headers.emplace_back(lowercase(base::trim_space(line.substr(0, colon))), std::string(base::trim_space(line.substr(colon + 1))));
}

std::string redact_url(std::string_view url) {
  std::string out;
  const std::size_t scheme_end = url.find("://");
  std::size_t authority_start = 0;
  if (scheme_end != std::string_view::npos) {
    authority_start = scheme_end + 3;
    out.append(url.substr(0, authority_start));
  }
  std::string_view rest = url.substr(authority_start);
  const std::size_t authority_end = std::min(rest.find_first_of("/?#"), rest.size());
  const std::size_t at = rest.substr(0, authority_end).rfind('@');
  if (at != std::string_view::npos) {
    rest.remove_prefix(at + 1);
  }
  rest = rest.substr(0, rest.find('#'));
  const std::size_t question = rest.find('?');
  out.append(rest.substr(0, question));
  if (question != std::string_view::npos) {
    out += '?';
    out += redact_query(rest.substr(question + 1));
  }
  return out;
}

Error transfer_error(std::string_view what, std::string_view method, std::string_view url, CURLcode code,
                     std::string_view error_buffer) {
  std::string message = request_prefix(what, method, url) + ": " + curl_easy_strerror(code);
  if (!error_buffer.empty()) {
    message += " (";
    message += base::trim_space(error_buffer);
    message += ')';
  }
  return code == CURLE_OPERATION_TIMEDOUT ? Error::timeout(std::move(message)) : Error::remote(std::move(message));
}

Error http_status_error(std::string_view what, std::string_view method, std::string_view url, long status,
                        std::string_view detail) {
  std::string message = request_prefix(what, method, url) + ": HTTP " + std::to_string(status);
  if (const char* reason = reason_phrase(status); *reason != '\0') {
    message += ' ';
    message += reason;
  }
  if (!detail.empty()) {
    message += ": ";
    message += detail;
  }
  return (status == 408 || status == 504) ? Error::timeout(std::move(message)) : Error::remote(std::move(message));
}

bool is_transient(CURLcode code) noexcept {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
      return true;
    default:
      return false;
  }
}

bool is_transient_status(long status) noexcept { return status == 429 || (status >= 500 && status <= 599); }

}  // namespace opcache::remote
