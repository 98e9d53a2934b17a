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
  return {[=] { return error_response(status, code, message); }, true};
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

ApiCall plan_call(Api& api, const ServerConfig& config, bool reads_are_local, ApiRequest request_in) {
  auto request = std::make_shared<ApiRequest>(std::move(request_in));
  const RouteSpec* spec = find_route(request->route.id);
  if (spec == nullptr) {
    return refuse(500, "internal", "no handler for route " + std::string(route_name(request->route.id)));
  }
  ApiCall call{[&api, request, handler = spec->handler] { return handler(api, *request); },
               on_io_thread(spec->thread, reads_are_local, *request)};
  if (spec->waits) {
    auto wait = wait_of(request->parameters, config.max_wait_s);
    if (!wait) {
      return refuse(400, "bad_request", wait.error().message());
    }
    call.wait = *wait;
  }
  return call;
}

}  // namespace opcache::server
