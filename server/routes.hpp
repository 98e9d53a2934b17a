// The team server's routes, declared once (docs/protocol.md "Routes"): each
// route's methods, path pattern, scope, request body, handler, thread and
// whether the usage statistics count it. The router (api.cpp match_route), the
// dispatch (request_dispatch.cpp plan_call), the metrics, the access log, the
// usage statistics and the request fuzzer all read this one table, so a route
// cannot be known to some of them and missing from the others.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "server/auth.hpp"

namespace opcache::server {

class Api;
struct ApiRequest;
struct ApiResponse;

/// A route of the server: one row of routes(). `unknown` is no route (a path
/// the server does not serve, or a malformed target).
enum class RouteId {
  unknown,
  signatures,        ///< POST /v1/entries/{key}/signatures
  query,             ///< POST /v1/entries/query
  fetch,             ///< POST /v1/entries/fetch
  entry_read,        ///< GET, HEAD /v1/entries/{key}
  entry_put,         ///< PUT /v1/entries/{key}
  entry_delete,      ///< DELETE /v1/entries/{key}
  list,              ///< GET, HEAD /v1/entries
  lease_renew,       ///< PUT /v1/leases/{key}/{id}
  lease_release,     ///< DELETE /v1/leases/{key}/{id}
  lease_acquire,     ///< POST /v1/leases/{key}
  status,            ///< GET, HEAD /v1/status
  metrics,           ///< GET, HEAD /metrics
  stats_summary,     ///< GET, HEAD /v1/stats/summary
  stats_timeseries,  ///< GET, HEAD /v1/stats/timeseries
  stats_misses,      ///< GET, HEAD /v1/stats/misses
  stats_tokens,      ///< GET, HEAD /v1/stats/tokens
  ui_root,           ///< GET, HEAD /ui (a redirect to /ui/)
  ui,                ///< GET, HEAD /ui/{file}
  healthz,           ///< GET, HEAD /healthz
  explain,           ///< POST /v1/explain
  revoke,            ///< POST /v1/revocations
  revocations,       ///< GET, HEAD /v1/revocations
  unrevoke,          ///< DELETE /v1/revocations/{key}
  manifest_fetch,    ///< POST /v1/manifests/fetch
  manifest_read,     ///< GET, HEAD /v1/manifests/{key}
  manifest_put,      ///< PUT /v1/manifests/{key}
};

/// How a request's body is read.
enum class BodyKind {
  none,    ///< no body expected (any sent is refused)
  small,   ///< read into memory, up to k_small_body_limit
  upload,  ///< streamed into a storage temp file, up to max_body_bytes
};

/// Where a route's handler runs.
enum class Thread {
  io,            ///< in memory: answered on the I/O thread that read the request
  worker,        ///< waits on the storage: on the worker pool, holding an in-flight slot
  storage_read,  ///< on the I/O thread when the storage's reads are local (Storage::reads_are_local), else a worker
  page,          ///< the dashboard's page: a worker when it carries the figures (index.html for a reader), else I/O
};

/// How the usage statistics count a route's requests (docs/protocol.md
/// "Statistics"; server/usage_stats applies it, server/kernel_lookups makes
/// each kernel count once per client).
enum class UsageRule {
  monitoring,  ///< not counted at all (status, statistics, metrics, health, the page, explain, manifests)
  request,     ///< a request, nothing more
  lookup,      ///< a request, and an answer about the kernel {key}: found, sent or absent
  batch,       ///< a request, and an answer about the kernel of each of its frames
  upload,      ///< a request, an upload when stored, and the uploading client built that kernel
  lease,       ///< a request; a lease granted means the client builds that kernel
};

/// The rule's name in docs/protocol.md's route table ("—" for monitoring).
std::string_view usage_rule_name(UsageRule rule) noexcept;

/// A route's handler: answers `request` with `api`.
using RouteHandler = ApiResponse (*)(Api& api, const ApiRequest& request);

/// One route.
struct RouteSpec {
  RouteId id;
  std::string_view name;     ///< the metric label and access-log name; routes of one path share it
  std::string_view methods;  ///< "GET, HEAD": as in an Allow header
  /// The path: literal text and captures {key} (a cache key), {id} (a lease
  /// id) and {file} (a file of the dashboard). A capture takes the text up
  /// to the first occurrence of the literal after it, or up to the literal
  /// that ends the pattern (which must end the path), or the rest of the path.
  std::string_view pattern;
  Scope scope;  ///< what the request needs (docs/protocol.md "Authentication")
  BodyKind body;
  Thread thread;
  bool waits;    ///< takes ?wait=SECONDS (server/entry_wait.hpp)
  UsageRule usage;  ///< how the usage statistics count it
  RouteHandler handler;
};

/// Every route, in the order the router tries their patterns (the first
/// pattern that matches the path wins; a path's routes differ by method).
std::span<const RouteSpec> routes() noexcept;

/// The row of `id`, or nullptr for RouteId::unknown.
const RouteSpec* find_route(RouteId id) noexcept;

/// The metric label of `id` ("unknown" for RouteId::unknown).
std::string_view route_name(RouteId id) noexcept;

/// Whether `method` is one of `methods` ("GET, HEAD").
bool has_method(std::string_view methods, std::string_view method) noexcept;

/// What a path's captures hold.
struct PathCaptures {
  std::string key;   ///< {key}
  std::string id;    ///< {id}
  std::string file;  ///< {file}
};

/// The captures of `path` if it matches `pattern` (see RouteSpec::pattern),
/// else std::nullopt. Captures may be empty. Pure.
std::optional<PathCaptures> match_pattern(std::string_view pattern, std::string_view path);

}  // namespace opcache::server
