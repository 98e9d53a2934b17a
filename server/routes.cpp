#include "server/routes.hpp"

#include "server/request_dispatch.hpp"

namespace opcache::server {

namespace {

ApiResponse handle_add_signatures(Api& api, const ApiRequest& request) {
  return api.add_signatures(request.route.key, request.body);
}

ApiResponse handle_query(Api& api, const ApiRequest& request) {
  return api.query(request.body);
}

ApiResponse handle_fetch(Api& api, const ApiRequest& request) {
  return api.fetch(request.body);
}

ApiResponse handle_read_entry(Api& api, const ApiRequest& request) {
  return api.get_entry(request.route.key, request.method == "HEAD", request.if_none_match, request.redirect);
}

// Consumes the request's upload: runs once.
ApiResponse handle_put_entry(Api& api, const ApiRequest& request) {
  if (!request.upload) {
    return error_response(500, "internal", "no upload body for PUT of " + request.route.key);
  }
  return api.put_entry(request.route.key, std::move(*request.upload), request.signatures);
}

ApiResponse handle_delete_entry(Api& api, const ApiRequest& request) {
  return api.delete_entry(request.route.key);
}

ApiResponse handle_list(Api& api, const ApiRequest& request) {
  return api.list(request.parameters);
}

ApiResponse handle_renew_lease(Api& api, const ApiRequest& request) {
  return api.renew_lease(request.route.key, request.route.lease_id);
}

ApiResponse handle_release_lease(Api& api, const ApiRequest& request) {
  return api.release_lease(request.route.key, request.route.lease_id);
}

ApiResponse handle_acquire_lease(Api& api, const ApiRequest& request) {
  return api.acquire_lease(request.route.key, request.body, request.token_name);
}

ApiResponse handle_status(Api& api, const ApiRequest&) {
  return api.status();
}

ApiResponse handle_metrics(Api& api, const ApiRequest&) {
  return api.metrics();
}

ApiResponse handle_stats_summary(Api& api, const ApiRequest& request) {
  return api.stats_summary(request.parameters);
}

ApiResponse handle_stats_timeseries(Api& api, const ApiRequest& request) {
  return api.stats_timeseries(request.parameters);
}

ApiResponse handle_stats_misses(Api& api, const ApiRequest& request) {
  return api.stats_misses(request.parameters);
}

ApiResponse handle_stats_tokens(Api& api, const ApiRequest& request) {
  return api.stats_tokens(request.parameters);
}

ApiResponse handle_ui(Api& api, const ApiRequest& request) {
  return api.ui(request.route.resource, request.may_read);
}

ApiResponse handle_healthz(Api& api, const ApiRequest&) {
  return api.healthz();
}

ApiResponse handle_explain(Api& api, const ApiRequest& request) {
  return api.explain(request.body);
}

ApiResponse handle_revoke(Api& api, const ApiRequest& request) {
  return api.revoke(request.body);
}

ApiResponse handle_revocations(Api& api, const ApiRequest& request) {
  return api.revocations(request.parameters);
}

ApiResponse handle_unrevoke(Api& api, const ApiRequest& request) {
  return api.unrevoke(request.route.key);
}

ApiResponse handle_fetch_manifests(Api& api, const ApiRequest& request) {
  return api.fetch_exec_manifests(request.body);
}

ApiResponse handle_read_manifest(Api& api, const ApiRequest& request) {
  return api.get_exec_manifest(request.route.key, request.method == "HEAD");
}

ApiResponse handle_put_manifest(Api& api, const ApiRequest& request) {
  return api.put_exec_manifest(request.route.key, request.body);
}

using enum RouteId;
using enum Thread;
constexpr auto k_none = BodyKind::none;
constexpr auto k_small = BodyKind::small;
constexpr auto k_upload = BodyKind::upload;
constexpr bool k_waits = true;
using enum UsageRule;

// clang-format off
constexpr RouteSpec k_routes[] = {
// id                name          methods      pattern                          scope          body      thread        ?wait=    usage       handler
  {signatures,       "signatures", "POST",      "/v1/entries/{key}/signatures", Scope::write,  k_small,  worker,       false,    request,    handle_add_signatures},
  {query,            "query",      "POST",      "/v1/entries/query",            Scope::read,   k_small,  worker,       false,    request,    handle_query},
  // Reads up to k_fetch_response_bytes of bundles into one response.
  {fetch,            "fetch",      "POST",      "/v1/entries/fetch",            Scope::read,   k_small,  worker,       false,    batch,      handle_fetch},
  {entry_read,       "entry",      "GET, HEAD", "/v1/entries/{key}",            Scope::read,   k_none,   storage_read, k_waits,  lookup,     handle_read_entry},
  {entry_put,        "entry",      "PUT",       "/v1/entries/{key}",            Scope::write,  k_upload, worker,       false,    upload,     handle_put_entry},
  {entry_delete,     "entry",      "DELETE",    "/v1/entries/{key}",            Scope::admin,  k_none,   worker,       false,    request,    handle_delete_entry},
  {list,             "list",       "GET, HEAD", "/v1/entries",                  Scope::read,   k_none,   worker,       false,    request,    handle_list},
  {lease_renew,      "lease",      "PUT",       "/v1/leases/{key}/{id}",        Scope::write,  k_none,   io,           false,    request,    handle_renew_lease},
  {lease_release,    "lease",      "DELETE",    "/v1/leases/{key}/{id}",        Scope::write,  k_none,   io,           false,    request,    handle_release_lease},
  // Checks the storage for the entry when it grants: a worker's job.
  {lease_acquire,    "lease",      "POST",      "/v1/leases/{key}",             Scope::write,  k_small,  worker,       false,    lease,      handle_acquire_lease},
  {status,           "status",     "GET, HEAD", "/v1/status",                   Scope::read,   k_none,   worker,       false,    monitoring, handle_status},
  {metrics,          "metrics",    "GET, HEAD", "/metrics",                     Scope::read,   k_none,   worker,       false,    monitoring, handle_metrics},
  // The summary asks the storage for its gauges; timeseries and tokens are in memory.
  {stats_summary,    "stats",      "GET, HEAD", "/v1/stats/summary",            Scope::read,   k_none,   worker,       false,    monitoring, handle_stats_summary},
  {stats_timeseries, "stats",      "GET, HEAD", "/v1/stats/timeseries",         Scope::read,   k_none,   io,           false,    monitoring, handle_stats_timeseries},
  // Lists the storage for the nearest variant of each missed group.
  {stats_misses,     "stats",      "GET, HEAD", "/v1/stats/misses",             Scope::read,   k_none,   worker,       false,    monitoring, handle_stats_misses},
  {stats_tokens,     "stats",      "GET, HEAD", "/v1/stats/tokens",             Scope::admin,  k_none,   io,           false,    monitoring, handle_stats_tokens},
  // The page holds no data and needs no token; its script asks for one.
  {ui_root,          "ui",         "GET, HEAD", "/ui",                          Scope::none,   k_none,   io,           false,    monitoring, handle_ui},
  {ui,               "ui",         "GET, HEAD", "/ui/{file}",                   Scope::none,   k_none,   page,         false,    monitoring, handle_ui},
  {healthz,          "healthz",    "GET, HEAD", "/healthz",                     Scope::none,   k_none,   io,           false,    monitoring, handle_healthz},
  // Opens up to 1,000 bundles of one op type (100 on S3): a worker's job.
  {explain,          "explain",    "POST",      "/v1/explain",                  Scope::read,   k_small,  worker,       false,    monitoring, handle_explain},
  {revoke,           "revocations","POST",      "/v1/revocations",              Scope::admin,  k_small,  worker,       false,    request,    handle_revoke},
  {revocations,      "revocations","GET, HEAD", "/v1/revocations",              Scope::read,   k_none,   worker,       false,    request,    handle_revocations},
  {unrevoke,         "revocations","DELETE",    "/v1/revocations/{key}",        Scope::admin,  k_none,   worker,       false,    request,    handle_unrevoke},
  // Exec manifests (api_manifests.cpp): not lookups of kernels, so not counted.
  // The PUT's body may be up to store::k_max_manifest_bytes (small_body_limit).
  // Reads up to k_manifest_batch_bytes of manifests into one response.
  {manifest_fetch,   "manifest",   "POST",      "/v1/manifests/fetch",          Scope::read,   k_small,  worker,       false,    monitoring, handle_fetch_manifests},
  {manifest_read,    "manifest",   "GET, HEAD", "/v1/manifests/{key}",          Scope::read,   k_none,   worker,       false,    monitoring, handle_read_manifest},
  {manifest_put,     "manifest",   "PUT",       "/v1/manifests/{key}",          Scope::write,  k_small,  worker,       false,    monitoring, handle_put_manifest},
};
// clang-format on

// The slot of capture `name` in `captures`, or nullptr for a name patterns do not use.
std::string* capture_slot(PathCaptures& captures, std::string_view name) {
  return name == "key" ? &captures.key : name == "id" ? &captures.id : name == "file" ? &captures.file : nullptr;
}

// How much of `path` a capture takes when `after` is the rest of its pattern;
// std::nullopt when the path cannot match.
std::optional<std::size_t> capture_length(std::string_view path, std::string_view after) {
  const auto literal = after.substr(0, after.find('{'));
  if (literal.empty()) {
    return path.size();
  }
  if (literal.size() == after.size()) {  // the literal ends the pattern: it must end the path
    if (path.size() < literal.size() || path.substr(path.size() - literal.size()) != literal) {
      return std::nullopt;
    }
    return path.size() - literal.size();
  }
  const auto at = path.find(literal);
  return at == std::string_view::npos ? std::nullopt : std::optional<std::size_t>(at);
}

}  // namespace

std::string_view usage_rule_name(UsageRule rule) noexcept {
  switch (rule) {
    case UsageRule::monitoring:
      return "—";
    case UsageRule::request:
      return "request";
    case UsageRule::lookup:
      return "lookup";
    case UsageRule::batch:
      return "batch";
    case UsageRule::upload:
      return "upload";
    case UsageRule::lease:
      return "lease";
  }
  return "?";
}

std::span<const RouteSpec> routes() noexcept {
  return k_routes;
}

const RouteSpec* find_route(RouteId id) noexcept {
  for (const RouteSpec& spec : k_routes) {
    if (spec.id == id) {
      return &spec;
    }
  }
  return nullptr;
}

std::string_view route_name(RouteId id) noexcept {
  const RouteSpec* spec = find_route(id);
  return spec != nullptr ? spec->name : "unknown";
}

bool has_method(std::string_view methods, std::string_view method) noexcept {
  while (!methods.empty()) {
    const auto comma = methods.find(", ");
    if (methods.substr(0, comma) == method) {
      return true;
    }
    methods = comma == std::string_view::npos ? std::string_view() : methods.substr(comma + 2);
  }
  return false;
}

std::optional<PathCaptures> match_pattern(std::string_view pattern, std::string_view path) {
  PathCaptures captures;
  while (true) {
    const auto open = pattern.find('{');
    const auto literal = pattern.substr(0, open);
    if (path.substr(0, literal.size()) != literal) {
      return std::nullopt;
    }
    path.remove_prefix(literal.size());
    if (open == std::string_view::npos) {
      return path.empty() ? std::optional(std::move(captures)) : std::nullopt;
    }
    const auto close = pattern.find('}', open);
    std::string* slot = capture_slot(captures, pattern.substr(open + 1, close - open - 1));
    pattern = close == std::string_view::npos ? std::string_view() : pattern.substr(close + 1);
    const auto length = capture_length(path, pattern);
    if (slot == nullptr || !length) {
      return std::nullopt;
    }
    *slot = std::string(path.substr(0, *length));
    path.remove_prefix(*length);
  }
}

}  // namespace opcache::server
