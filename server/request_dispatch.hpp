// Which Api handler answers a routed request, and where it may run, as the
// route's row in server/routes.hpp says. Shared by the sessions
// (server/http_session.cpp) and the request fuzzer
// (tests/fuzz/fuzz_server_request.cpp), so that what is fuzzed is what is
// served.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "remote/signature_header.hpp"
#include "server/api.hpp"
#include "server/server_config.hpp"

namespace opcache::server {

/// A routed and authorized request, with its body read.
struct ApiRequest {
  Route route;
  std::string method;
  std::map<std::string, std::string> parameters;  ///< decoded query parameters
  std::string if_none_match;                      ///< the If-None-Match header, or empty
  std::string body;                               ///< a small body (BodyKind::small), else empty
  std::string token_name;                         ///< who the request was authorized as
  bool may_read = false;                          ///< whether read scope would be granted (for the dashboard's page)
  std::shared_ptr<base::AtomicFile> upload;       ///< BodyKind::upload: the body, complete; the handler consumes it
  store::Signatures signatures;                   ///< an upload's X-Opcache-Signature headers (upload_signatures)
  DownloadRedirect redirect =
      DownloadRedirect::no;  ///< whether a GET of an entry may be 307 to the bucket (download_redirect)
};

/// A planned handler call: callable as `ApiResponse()`, any number of times
/// (unless the handler consumes an upload), on any thread. Copies share one
/// request. One allocation per request, where a std::function capturing a
/// shared request took two.
class HandlerCall {
 public:
  /// The call of `handler` with `api` and `request`.
  HandlerCall(Api& api, RouteHandler handler, ApiRequest&& request);
  /// A call that answers error_response(status, code, message) without a handler.
  static HandlerCall refusal(int status, std::string code, std::string message);

  /// Runs the handler (or answers the refusal).
  ApiResponse operator()() const;

 private:
  struct Job;
  explicit HandlerCall(std::shared_ptr<const Job> job) : m_job(std::move(job)) {}
  std::shared_ptr<const Job> m_job;
};

/// The handler call of one request.
struct ApiCall {
  /// Runs the handler; owns the request, so it may run on any thread, and
  /// more than once (a waiting request re-runs it) unless it consumes an
  /// upload.
  HandlerCall run;
  /// True when the handler does not wait on storage (memory, or a local
  /// store's index and file open): answer it where the request was read.
  bool on_io_thread = false;
  /// GET or HEAD of an entry with ?wait=SECONDS (capped at --max-wait): hold
  /// the request up to this long while `run` answers 404
  /// (server/entry_wait.hpp). Zero: answer at once.
  std::chrono::seconds wait{0};
};

/// The signatures of an upload's X-Opcache-Signature headers, every value
/// through parse_signature_headers (`usage` error when one is malformed).
/// `Fields` is any header container with equal_range(name) (Beast's fields),
/// so the session and the request fuzzer read them alike.
template <class Fields>
Result<store::Signatures> upload_signatures(const Fields& fields) {
  std::vector<std::string> values;
  for (auto [it, end] = fields.equal_range(remote::k_signature_header); it != end; ++it) {
    values.emplace_back(it->value());
  }
  return parse_signature_headers(values);
}

/// The call for `request`: its route's handler, on its route's thread. A
/// malformed ?wait= is a call answering 400 bad_request; RouteId::unknown a
/// call answering 500 internal. `reads_are_local` is the storage's
/// (Storage::reads_are_local). Thread-safe; `api` must outlive the call.
/// `request` is moved from (taken by reference: an ApiRequest is some twenty
/// strings and containers, each move of it costs a GET ~1,000 instructions).
ApiCall plan_call(Api& api, const ServerConfig& config, bool reads_are_local, ApiRequest&& request);
/// The call for a copy of `request`.
inline ApiCall plan_call(Api& api, const ServerConfig& config, bool reads_are_local, const ApiRequest& request) {
  return plan_call(api, config, reads_are_local, ApiRequest(request));
}

}  // namespace opcache::server
