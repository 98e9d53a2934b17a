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

}  // namespace

ApiCall plan_call(Api& api, const ServerConfig& config, bool reads_are_local, ApiRequest request_in) {
  auto request = std::make_shared<const ApiRequest>(std::move(request_in));
  const std::string& name = request->route.name;
  const std::string& method = request->method;
  auto on_worker = [](std::function<ApiResponse()> run) { return ApiCall{std::move(run), false}; };
  auto in_place = [](std::function<ApiResponse()> run) { return ApiCall{std::move(run), true}; };

  if (name == "healthz") {
    return in_place([&api] { return api.healthz(); });
  }
  if (name == "entry" && method == "DELETE") {
    return on_worker([&api, request] { return api.delete_entry(request->route.key); });
  }
  if (name == "entry") {
    auto wait = wait_of(request->parameters, config.max_wait_s);
    if (!wait) {
      return refuse(400, "bad_request", wait.error().message());
    }
    ApiCall call{[&api, request] {
                   return api.get_entry(request->route.key, request->method == "HEAD", request->if_none_match);
                 },
                 reads_are_local};
    call.wait = *wait;
    return call;
  }
  if (name == "signatures") {
    return on_worker([&api, request] { return api.add_signatures(request->route.key, request->body); });
  }
  if (name == "lease" && method == "POST") {
    // Checks the storage for the entry when it grants: a worker's job.
    return on_worker([&api, request] { return api.acquire_lease(request->route.key, request->body, request->token_name); });
  }
  if (name == "lease" && method == "PUT") {
    return in_place([&api, request] { return api.renew_lease(request->route.key, request->route.lease_id); });
  }
  if (name == "lease" && method == "DELETE") {
    return in_place([&api, request] { return api.release_lease(request->route.key, request->route.lease_id); });
  }
  if (name == "query") {
    return on_worker([&api, request] { return api.query(request->body); });
  }
  if (name == "list") {
    return on_worker([&api, request] { return api.list(request->parameters); });
  }
  if (name == "status") {
    return on_worker([&api] { return api.status(); });
  }
  if (name == "stats") {
    // The summary asks the storage for its gauges; the rest is in memory.
    const bool in_memory = request->route.resource != "summary";
    return {[&api, request] { return api.stats(request->route.resource, request->parameters); }, in_memory};
  }
  if (name == "ui") {
    const bool in_memory = request->route.resource != "index.html" || !request->may_read;
    return {[&api, request] { return api.ui(request->route.resource, request->may_read); }, in_memory};
  }
  if (name == "metrics") {
    return on_worker([&api] { return api.metrics(); });
  }
  return refuse(500, "internal", "no handler for route " + name);
}

}  // namespace opcache::server
