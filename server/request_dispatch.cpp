#include "server/request_dispatch.hpp"

#include <algorithm>
#include <memory>

namespace opcache::server {

namespace {

// The ?wait= of a GET or HEAD of an entry, capped at `max_wait_s`; 0 when absent.
Result<std::chrono::seconds> wait_of(const std::map<std::string, std::string>& parameters, int max_wait_s) {
  auto seconds = integer_parameter(parameters, "wait", 0, 0, 3600);
  if (!seconds) {
    return seconds.error();
  }
  return std::chrono::seconds(std::min<long>(*seconds, max_wait_s));
}

// A call answering an error without a handler.
ApiCall refuse(int status, std::string code, std::string message) {
  return {HandlerCall::refusal(status, std::move(code), std::move(message)), true};
}

// Whether a handler on `thread` answers `request` on the I/O thread.
bool on_io_thread(Thread thread, bool reads_are_local, const ApiRequest& request) {
  switch (thread) {
    case Thread::io:
      return true;
    case Thread::worker:
      return false;
    case Thread::storage_read:
      return reads_are_local;
    case Thread::page:
      // The page for a reader carries the figures, which ask the storage for its gauges.
      return request.route.resource != "index.html" || !request.may_read;
  }
  return false;
}

}  // namespace

// What a HandlerCall runs: a handler with its request, or a refusal (no handler).
struct HandlerCall::Job {
  Job(Api* api_, RouteHandler handler_, ApiRequest&& request_, int status_ = 0, std::string code_ = {},
      std::string message_ = {})
      : api(api_),
        handler(handler_),
        request(std::move(request_)),
        status(status_),
        code(std::move(code_)),
        message(std::move(message_)) {}

  Api* api = nullptr;
  RouteHandler handler = nullptr;
  ApiRequest request;
  int status = 0;
  std::string code;
  std::string message;
};

HandlerCall::HandlerCall(Api& api, RouteHandler handler, ApiRequest&& request)
    // Built in place: the request is moved once (a temporary Job moved its strings twice).
    : m_job(std::make_shared<const Job>(&api, handler, std::move(request))) {}

HandlerCall HandlerCall::refusal(int status, std::string code, std::string message) {
  return HandlerCall(
      std::make_shared<const Job>(nullptr, nullptr, ApiRequest{}, status, std::move(code), std::move(message)));
}

ApiResponse HandlerCall::operator()() const {
  if (m_job->handler == nullptr) {
    return error_response(m_job->status, m_job->code, m_job->message);
  }
  return m_job->handler(*m_job->api, m_job->request);
}

ApiCall plan_call(Api& api, const ServerConfig& config, bool reads_are_local, ApiRequest&& request) {
  const RouteSpec* spec = find_route(request.route.id);
  if (spec == nullptr) {
    return refuse(500, "internal", "no handler for route " + std::string(route_name(request.route.id)));
  }
  std::chrono::seconds waits{0};
  if (spec->waits) {
    auto wait = wait_of(request.parameters, config.max_wait_s);
    if (!wait) {
      return refuse(400, "bad_request", wait.error().message());
    }
    waits = *wait;
  }
  const bool on_io = on_io_thread(spec->thread, reads_are_local, request);
  return {HandlerCall(api, spec->handler, std::move(request)), on_io, waits};
}

}  // namespace opcache::server
