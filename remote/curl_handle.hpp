// A small RAII layer over libcurl, shared by every HTTP(S) client in remote/
// (the S3 client, and the opcache server client): process-wide initialisation,
// owned easy handles and header lists, a pool of easy handles that keeps
// connections alive between requests, response-header capture, and the mapping
// of transfer outcomes to opcache's `Error` vocabulary.
//
// Messages built here name the method and a redacted URL (no user info, no
// credential-like query parameters); credentials never appear in them.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.hpp"
#include "opcache/result.hpp"

namespace opcache::remote {

/// Initialises libcurl once per process (curl_global_init under std::call_once).
/// Thread-safe; every later call returns the outcome of the first one. Call it
/// before creating any handle (make_easy_handle() does).
Status ensure_curl_initialized();

/// Deleter for `CURL*` (curl_easy_cleanup).
struct EasyHandleDeleter {
  void operator()(CURL* handle) const noexcept { curl_easy_cleanup(handle); }
};

/// Deleter for `curl_slist*` (curl_slist_free_all).
struct HeaderListDeleter {
  void operator()(curl_slist* list) const noexcept { curl_slist_free_all(list); }
};

/// An owned easy handle. Not thread-safe: one transfer at a time.
using EasyHandle = std::unique_ptr<CURL, EasyHandleDeleter>;

/// An owned header list (nullptr is the empty list).
using HeaderList = std::unique_ptr<curl_slist, HeaderListDeleter>;

/// A new easy handle (initialising libcurl first). `internal` error when
/// libcurl cannot allocate one.
Result<EasyHandle> make_easy_handle();

/// Appends the raw header line `line` ("Name: value") to `list`. Lines with CR
/// or LF are a `usage` error (header injection); allocation failure is `internal`.
Status append_header(HeaderList& list, std::string_view line);

/// A thread-safe pool of easy handles. Handles keep their connection cache,
/// DNS cache and TLS sessions between requests, so reusing them reuses
/// connections. A leased handle is reset (curl_easy_reset: options cleared,
/// connections kept) when it comes back. At most `max_idle` handles are kept.
class EasyHandlePool {
 public:
  /// A handle on loan from the pool; returned to it on destruction. Move-only.
  class Lease {
   public:
    Lease(Lease&& other) noexcept : m_pool(std::exchange(other.m_pool, nullptr)), m_handle(std::move(other.m_handle)) {}
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();

    /// The leased handle; valid for the lifetime of the lease.
    CURL* get() const noexcept { return m_handle.get(); }

   private:
    friend class EasyHandlePool;
    Lease(EasyHandlePool* pool, EasyHandle handle) : m_pool(pool), m_handle(std::move(handle)) {}

    EasyHandlePool* m_pool;
    EasyHandle m_handle;
  };

  /// An empty pool keeping at most `max_idle` idle handles.
  explicit EasyHandlePool(std::size_t max_idle = 16) : m_max_idle(max_idle) {}
  EasyHandlePool(const EasyHandlePool&) = delete;
  EasyHandlePool& operator=(const EasyHandlePool&) = delete;

  /// An idle handle, or a new one when none is idle. The pool must outlive the lease.
  Result<Lease> acquire();

 private:
  void release(EasyHandle handle) noexcept;

  std::size_t m_max_idle;
  base::Mutex m_mutex;
  std::vector<EasyHandle> m_idle GUARDED_BY(m_mutex);
};

/// Response headers of one transfer, captured by a header callback. Names are
/// lowercased; values are trimmed. A new status line (after "100 Continue" or
/// a redirect) discards the headers of the previous response.
class ResponseHeaders {
 public:
  /// Installs the callback on `handle` (CURLOPT_HEADERFUNCTION/HEADERDATA).
  /// `*this` must outlive the transfer and must not move meanwhile.
  void install(CURL* handle);

  /// Clears all captured headers (before a retry).
  void clear() noexcept { m_headers.clear(); }

  /// The first value of `lowercase_name`, or nullopt when absent.
  std::optional<std::string> get(std::string_view lowercase_name) const;

  /// All headers in arrival order.
  const std::vector<std::pair<std::string, std::string>>& all() const noexcept { return m_headers; }

 private:
  static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user);
  void add_line(std::string_view line);

  std::vector<std::pair<std::string, std::string>> m_headers;
};

/// Routes the response body of transfers on `handle` to `target.*Method(data,
/// bytes)`, which returns the bytes it consumed (fewer aborts the transfer).
/// Typed state instead of a loose `void*`; `target` must outlive the transfer.
template <auto Method, class Target>
void set_write_callback(CURL* handle, Target& target) {
  curl_write_callback callback = [](char* data, std::size_t size, std::size_t count, void* user) -> std::size_t {
    return (static_cast<Target*>(user)->*Method)(data, size * count);
  };
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &target);
}

/// Makes `handle` upload: `target.*Read(buffer, capacity)` fills the body
/// (returns bytes, 0 at the end, CURL_READFUNC_ABORT to fail) and
/// `target.*Seek(offset)` rewinds it (returns false when it cannot).
/// `target` must outlive the transfer.
template <auto Read, auto Seek, class Target>
void set_read_callbacks(CURL* handle, Target& target) {
  curl_read_callback read = [](char* buffer, std::size_t size, std::size_t count, void* user) -> std::size_t {
    return (static_cast<Target*>(user)->*Read)(buffer, size * count);
  };
  curl_seek_callback seek = [](void* user, curl_off_t offset, int origin) -> int {
    if (origin != SEEK_SET) {
      return CURL_SEEKFUNC_CANTSEEK;
    }
    return (static_cast<Target*>(user)->*Seek)(offset) ? CURL_SEEKFUNC_OK : CURL_SEEKFUNC_CANTSEEK;
  };
  curl_easy_setopt(handle, CURLOPT_READFUNCTION, read);
  curl_easy_setopt(handle, CURLOPT_READDATA, &target);
  curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, seek);
  curl_easy_setopt(handle, CURLOPT_SEEKDATA, &target);
}

/// `url` without user info ("user:pass@") and with the values of credential-like
/// query parameters (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token,
/// token, access_token, signature, ...) replaced by "REDACTED". Safe for messages.
std::string redact_url(std::string_view url);

/// The error for a transfer that libcurl could not complete: `timeout` for
/// CURLE_OPERATION_TIMEDOUT, `remote` otherwise. The message is
/// "<what> <METHOD> <redacted url>: <curl's description> (<error buffer>)".
/// `what` names the client ("S3", "opcache server"); `error_buffer` may be empty.
Error transfer_error(std::string_view what, std::string_view method, std::string_view url, CURLcode code,
                     std::string_view error_buffer);

/// The error for an HTTP response that is not a success: `timeout` for 408 and
/// 504, `remote` otherwise. The message is
/// "<what> <METHOD> <redacted url>: HTTP <status> <reason>[: <detail>]".
Error http_status_error(std::string_view what, std::string_view method, std::string_view url, long status,
                        std::string_view detail);

/// True for libcurl failures worth retrying: connection refused or reset,
/// DNS failure, timeouts, a connection that closed early. False for bad URLs,
/// callback aborts (local write/read failures) and size limits.
bool is_transient(CURLcode code) noexcept;

/// True for HTTP statuses worth retrying: 429 and every 5xx.
bool is_transient_status(long status) noexcept;

}  // namespace opcache::remote
