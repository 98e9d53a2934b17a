// HTTP API v1 of `opcache serve` (docs/protocol.md): routing, and handlers
// that parse and validate, call the storage, and map outcomes to statuses.
// Independent of the HTTP library: the session layer (http_session.cpp,
// with http_response.cpp) converts to and from Beast.
#pragma once

#include <array>
#include <chrono>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.hpp"
#include "server/auth.hpp"
#include "server/entry_events.hpp"
#include "server/lease_book.hpp"
#include "server/metrics.hpp"
#include "server/routes.hpp"
#include "server/server_config.hpp"
#include "server/storage.hpp"
#include "server/usage_stats.hpp"
#include "store/exec_manifest.hpp"
#include "store/signature.hpp"
#include "store/trust.hpp"

namespace opcache::server {

struct RevokeRequest;

/// The revision of HTTP API v1 this server speaks (docs/protocol.md, the
/// version notes), reported by GET /v1/status as "revision".
inline constexpr int k_api_revision = 10;

/// Largest in-memory request body (a query for 10,000 keys is ~700 KB).
inline constexpr std::size_t k_small_body_limit = 2u << 20;

/// Largest in-memory body of a request to `route` (BodyKind::small):
/// store::k_max_manifest_bytes for PUT /v1/manifests/{key} (an exec manifest
/// of 32 builds that read many files each), else k_small_body_limit. Pure.
inline std::size_t small_body_limit(RouteId route) noexcept {
  return route == RouteId::manifest_put ? store::k_max_manifest_bytes : k_small_body_limit;
}

/// Most bundle bytes one POST /v1/entries/fetch response carries; the keys
/// beyond are answered "later" (a bundle larger than this alone: "too_large").
inline constexpr std::int64_t k_fetch_response_bytes = 8 << 20;

/// Most keys one POST /v1/revocations may revoke.
inline constexpr std::size_t k_max_revoke_keys = 1000;
/// Most tombstones one GET /v1/revocations lists (and its default limit).
inline constexpr std::size_t k_max_revocations_page = 10000;
/// The header of a 410 answer to HEAD (and GET) of a revoked key: the
/// reason, percent-encoded.
inline constexpr std::string_view k_revoked_header = "X-Opcache-Revoked";

/// What a request's method and path resolve to.
struct Route {
  /// The route (server/routes.hpp); for a method the path does not take
  /// (405), the path's first route, whose name labels the request.
  RouteId id = RouteId::unknown;
  std::string key;               ///< for /v1/entries/{key}, /v1/entries/{key}/signatures and /v1/leases/{key}[/{id}]
  std::string resource;          ///< ui: the file ("" for /ui, "index.html" for /ui/)
  std::string lease_id;          ///< for /v1/leases/{key}/{id}
  Scope scope = Scope::none;
  BodyKind body = BodyKind::none;
  int error_status = 0;          ///< 404 / 405 / 400 when the route itself is wrong
  std::string error_code;        ///< with error_status: not_found, method_not_allowed or invalid_key
  std::string error_message;
  std::string allow;             ///< for 405: the allowed methods
};

/// Command keys per POST /v1/manifests/fetch.
inline constexpr std::size_t k_manifest_batch_keys = 1000;

/// Manifest text per answer of POST /v1/manifests/fetch; the keys beyond go
/// to "again" (one manifest may reach store::k_max_manifest_bytes).
inline constexpr std::size_t k_manifest_batch_bytes = 16 * 1024 * 1024;

/// The keys of the JSON array `listed` (at most `max_keys`) into `keys`; or
/// the answer to give instead: 413 too_many_keys (naming `what`), 400
/// invalid_key naming the first that is not a key. Pure.
std::optional<ApiResponse> read_key_array(const nlohmann::json& listed, std::size_t max_keys, const std::string& what,
                                          std::vector<std::string>& keys);

/// The keys of a JSON request body {"keys": ["<64 hex>", ...]} (at most
/// `max_keys`) into `keys`; or the answer to give instead: 400 bad_request
/// (`what` names the request) or invalid_key, 413 too_many_keys. Pure.
std::optional<ApiResponse> read_key_list(const std::string& body, std::size_t max_keys, const std::string& what,
                                         std::vector<std::string>& keys);

/// Resolves a method and a path (without query string) by the routes of
/// server/routes.hpp.
Route match_route(std::string_view method, std::string_view path);

/// A response before it is turned into HTTP.
struct ApiResponse {
  int status = 200;
  /// A literal or other text that outlives the response (a string kept
  /// here would be allocated per answer: a bundle's type is too long to be
  /// held inline).
  std::string_view content_type = "application/json";
  std::string body;
  std::optional<StoredBundle> bundle;  ///< streamed as the body instead of `body`
  bool head_only = false;              ///< HEAD: headers (incl. Content-Length) without a body
  std::vector<std::pair<std::string, std::string>> headers;
  std::string log_detail;  ///< written to the server's log by the session; never sent
  /// A batch fetch's answers about each kernel, for the usage statistics; never sent.
  std::shared_ptr<const std::vector<FetchedKernel>> fetched;
};

/// A JSON error body {"error": code, "message": message} with `status`.
ApiResponse error_response(int status, const std::string& code, const std::string& message);

/// A JSON response `body` with `status`.
ApiResponse json_response(int status, const nlohmann::json& body);

/// The response for a failed storage call: 503 "unavailable" for `remote`
/// and `timeout` errors, else 500 "internal". The error's own message names
/// files and endpoints, so it goes to the server's log (log_detail), and the
/// client is told only what kind of failure it was.
ApiResponse storage_failure(const Error& error);

/// A request target ("path?query") split and percent-decoded.
struct Target {
  std::string path;                               ///< decoded; '+' stays '+' (RFC 3986)
  std::map<std::string, std::string> parameters;  ///< decoded; '+' is a space (form encoding); last one wins
};

/// Splits "path?query" and percent-decodes the path and the query parameters.
/// A '%' not followed by two hex digits is a `usage` error naming the part.
/// Pure; thread-safe.
Result<Target> split_target(std::string_view target);

/// A request's route and query parameters.
struct RoutedTarget {
  std::string path;  ///< decoded path (the raw one when it could not be decoded)
  std::map<std::string, std::string> parameters;
  Route route;       ///< match_route's answer, or 400 bad_request for a malformed target
};

/// split_target then match_route; a malformed target routes to a 400
/// "bad_request" error. Pure; thread-safe.
RoutedTarget route_target(std::string_view method, std::string_view target);

/// 400 bad_request naming the first of the query `parameters` that is not
/// in `allowed` (and listing those), or std::nullopt when all are known.
std::optional<ApiResponse> unknown_parameter(const std::map<std::string, std::string>& parameters,
                                             std::initializer_list<std::string_view> allowed);

/// Applies a partial scenario "phase=train,soc=X" (fields device or
/// device_mode, phase, toolchain, soc) to a listing query; an item that is
/// not FIELD=VALUE or names another field is a `usage` error. Pure.
Status apply_scenario_filter(const std::string& spec, ListQuery& query);

/// The integer query parameter `name` (absent: `fallback`), from `low` to
/// `high`; else a `usage` error naming the parameter, its value and the range.
Result<long> integer_parameter(const std::map<std::string, std::string>& parameters, const std::string& name,
                               long fallback, long low, long high);

/// The signatures of a PUT's X-Opcache-Signature header values (each one
/// or more comma-separated "<public key base64>:<signature base64>"); a
/// signer given twice counts once. A malformed value is a `usage` error
/// naming the header. Pure; thread-safe.
Result<store::Signatures> parse_signature_headers(const std::vector<std::string>& values);

/// 410 `revoked` for `tombstone`: {"error","message","key","reason","time"}
/// and the X-Opcache-Revoked header; `what` starts the message ("key").
ApiResponse revoked_response(const store::Tombstone& tombstone, const std::string& what);

/// An answer about a present entry with the headers a 200 to its GET
/// carries: Content-Type of a bundle, ETag "<digest>" and one
/// X-Opcache-Signature per signature; status 304 when `if_none_match` is that
/// ETag, else 200 (the caller adds the bundle, or turns it into a 307).
ApiResponse entry_response(const std::string& digest, const store::Signatures& signatures,
                           std::string_view if_none_match);

/// Whether the client of a GET of an entry said it follows a 307 to the
/// bucket: the request header `X-Opcache-Redirect: 1` (remote::k_redirect_header,
/// API v1 revision 9, docs/protocol.md "GET /v1/entries/{key}"). A server
/// never redirects a client that did not say so.
enum class DownloadRedirect { no, allowed };

/// DownloadRedirect::allowed when `header_value` (of X-Opcache-Redirect) is a
/// true boolean (base::parse_bool: 1, true, on, yes), else no (absent,
/// false, malformed). Pure.
DownloadRedirect download_redirect(std::string_view header_value);

/// The handlers. Thread-safe (the storage and metrics are).
class Api {
 public:
  Api(Storage& storage, Metrics& metrics, const ServerConfig& config);

  /// GET or HEAD /v1/entries/{key}: 200 with the bundle (headers only for
  /// `head_only`), 304 when `if_none_match` is its ETag, 404 when absent,
  /// 410 when revoked. With config.redirect_downloads, a storage that
  /// locates bundles (s3://) and a GET whose client allows it (`redirect`),
  /// a present entry is 307 to a presigned URL of its object instead, with
  /// the ETag and signature headers of a 200 (api_redirect.cpp).
  ApiResponse get_entry(const std::string& key, bool head_only, std::string_view if_none_match,
                        DownloadRedirect redirect = DownloadRedirect::no);
  /// Verifies `upload` (a complete body) against `key`, checks `signatures`
  /// (each must verify for the key and bundle digest: else 403
  /// bad_signature; with config.require_signature one must be by a trusted
  /// key: else 403 signature_required / untrusted_signature) and stores it
  /// with them. A refused upload stores nothing and is counted by reason.
  ApiResponse put_entry(const std::string& key, base::AtomicFile upload, const store::Signatures& signatures = {});
  /// POST /v1/entries/{key}/signatures: adds the signatures of the JSON
  /// `body` ({"signatures": [{"public_key", "signature"}]}) to the stored
  /// entry: 200 with the count added, 404 when absent, 400 for a malformed
  /// body, 403 bad_signature when one does not verify (nothing added).
  ApiResponse add_signatures(const std::string& key, const std::string& body);
  /// Reads config.trusted_keys_file (when set) and judges later uploads by
  /// it; on failure keeps the keys it had and returns the error, prefixed
  /// "--trusted-keys". Called at start-up and on SIGHUP. Thread-safe.
  Status load_trusted_keys();
  /// How many keys the server trusts now.
  std::size_t trusted_key_count() const;
  ApiResponse delete_entry(const std::string& key);
  /// POST /v1/leases/{key}: 201 granting the build lease on `key` to the
  /// holder named in the JSON `body` ({"holder": "host:pid", "request":
  /// "<random id>"}, both optional; the holder defaults to `token_name`; a
  /// retry with the live lease's request id gets it again), 409 lease_held
  /// naming the live holder, or 200
  /// {"present": true} when the entry is stored already (docs/protocol.md
  /// "Build leases"). 400 for a malformed body.
  ApiResponse acquire_lease(const std::string& key, const std::string& body, const std::string& token_name);
  /// PUT /v1/leases/{key}/{id}: renews the live lease for config.lease_ttl_s
  /// (200); 404 lease_not_found when `id` is no longer the live lease.
  ApiResponse renew_lease(const std::string& key, const std::string& id);
  /// DELETE /v1/leases/{key}/{id}: ends the lease and wakes the requests
  /// waiting on `key` (200); 404 lease_not_found as for renew.
  ApiResponse release_lease(const std::string& key, const std::string& id);
  /// The build leases (shared with the waiting requests of http_session).
  LeaseBook& leases() noexcept { return *m_leases; }
  /// Keeps the leases in `book` from now on (the server's start chooses the
  /// bucket's book for replicas over one s3:// storage); call before serving.
  void use_leases(std::unique_ptr<LeaseBook> book) { m_leases = std::move(book); }
  /// Wake-ups of requests waiting on an entry: put_entry and release_lease
  /// notify them.
  EntryEvents& events() noexcept { return m_events; }
  /// POST /v1/revocations (api_revocations.cpp): writes a tombstone for
  /// each key of the JSON `body` ({"keys": [...], "reason": "..."}) and
  /// deletes its entry: 200 {"revoked": [{"key","deleted"}], "reason",
  /// "time"}; 400 for a malformed body.
  ApiResponse revoke(const std::string& body);
  /// DELETE /v1/revocations/{key}: removes the tombstone (200), 404 when
  /// the key is not revoked.
  ApiResponse unrevoke(const std::string& key);
  /// GET /v1/revocations?since=SECONDS&limit=N: the tombstones revoked at
  /// `since` or later, oldest first: 200 {"now","revocations","truncated"}.
  ApiResponse revocations(const std::map<std::string, std::string>& parameters);
  /// GET /v1/manifests/{key} (api_manifests.cpp): 200 with the exec manifest
  /// of the command key `command_key` as JSON text (docs/formats.md "Exec
  /// manifests"), 404 not_found when none is stored (or the stored one is not
  /// a valid manifest of the key: logged, replaced by the next PUT).
  ApiResponse get_exec_manifest(const std::string& command_key, bool head_only);
  /// PUT /v1/manifests/{key}: merges the manifest of the JSON `body` into
  /// the stored one (the body's builds first, at most
  /// store::k_max_manifest_builds), one PUT of a key at a time on this
  /// server: 200 {"command_key", "builds"} with the merged count; 400
  /// corrupt_manifest for a body that is not a valid manifest, 409
  /// key_mismatch when its command_key is not the URL's, 413 when larger
  /// than store::k_max_manifest_bytes.
  ApiResponse put_exec_manifest(const std::string& command_key, const std::string& body);
  /// POST /v1/manifests/fetch (revision 10): the exec manifests of the JSON
  /// `body`'s command keys ({"keys": [...]}, at most k_manifest_batch_keys):
  /// 200 {"manifests": {KEY: manifest, ...}, "again": [KEY, ...]}, a key
  /// without a (valid) stored manifest in neither, the keys left once the
  /// answer holds k_manifest_batch_bytes of manifests in "again"; 400 for a
  /// malformed body, 413 too_many_keys.
  ApiResponse fetch_exec_manifests(const std::string& body);
  ApiResponse query(const std::string& body);
  /// POST /v1/entries/fetch (api_fetch.cpp): the bundles of the body's keys
  /// ({"keys": [...]}, at most config.max_query_keys) or of its filter
  /// ({"scenario": "...", "op_type": "...", "limit": N}, as GET /v1/entries)
  /// as one bundle stream (remote/bundle_stream.hpp), at most
  /// k_fetch_response_bytes of bundles; 400 for a malformed body, 413 for
  /// too many keys.
  ApiResponse fetch(const std::string& body);
  /// POST /v1/explain: the stored entries of the body's descriptor's op type
  /// nearest to its descriptor + scenario, and what differs (api_explain.cpp).
  ApiResponse explain(const std::string& body);
  ApiResponse list(const std::map<std::string, std::string>& parameters);
  ApiResponse status();
  /// The statistics (docs/protocol.md "Statistics"), each with its query
  /// `parameters`; 400 for an unknown or malformed parameter.
  /// GET /v1/stats/summary?window=
  ApiResponse stats_summary(const std::map<std::string, std::string>& parameters);
  /// GET /v1/stats/timeseries?window=&step=
  ApiResponse stats_timeseries(const std::map<std::string, std::string>& parameters);
  /// GET /v1/stats/misses?limit=
  ApiResponse stats_misses(const std::map<std::string, std::string>& parameters);
  /// GET /v1/stats/tokens (no parameters)
  ApiResponse stats_tokens(const std::map<std::string, std::string>& parameters);
  /// GET /ui/{file}: the dashboard (server/dashboard.hpp). When `may_read`
  /// (the request would be allowed to read the statistics), index.html
  /// carries the figures as tables for browsers without JavaScript.
  ApiResponse ui(const std::string& file, bool may_read);
  /// The usage statistics the session records every answered request in.
  UsageStats& usage() noexcept { return m_usage; }
  ApiResponse metrics();
  ApiResponse healthz();

  /// A fresh temp file for an upload body.
  Result<base::AtomicFile> create_upload() { return m_storage.create_upload(); }

 private:
  std::shared_ptr<const store::TrustedKeys> trusted_keys() const;
  // GET /v1/entries/{key} answered by a redirect to the bucket
  // (api_redirect.cpp): 307, or 304 for a matching `if_none_match`, or the
  // answer about an absent key; std::nullopt when the bundle cannot be
  // handed out by URL (get_entry then serves it).
  std::optional<ApiResponse> redirect_entry(const std::string& key, std::string_view if_none_match);
  // The answer about a key the storage does not hold: 410 when it is
  // revoked, else 404.
  ApiResponse absent_entry(const std::string& key);
  // The 403 refusing a revocation whose signatures do not verify, or that is
  // unsigned (or signed by no trusted key, or signed too long before or after
  // `now_s`) on a server with trusted keys; std::nullopt when it may go on.
  std::optional<ApiResponse> refuse_revocation(const RevokeRequest& request, std::int64_t now_s);
  // The "leases" object of GET /v1/status.
  nlohmann::json lease_status();
  // The body of GET /v1/status, with the storage's `gauges`.
  nlohmann::json status_body(const StorageGauges& gauges);
  // The body of GET /v1/stats/summary (api_stats.cpp), with the storage's `gauges`.
  nlohmann::json summary(StatsWindow window, const StorageGauges& gauges);
  // The 403 refusing `signatures` for the entry (key, digest), counted; or
  // std::nullopt when the upload may be stored.
  std::optional<ApiResponse> refuse_signatures(const std::string& key, const std::string& digest,
                                               const store::Signatures& signatures);

  Storage& m_storage;
  Metrics& m_metrics;
  const ServerConfig& m_config;
  mutable base::Mutex m_trust_mutex;
  std::shared_ptr<const store::TrustedKeys> m_trusted GUARDED_BY(m_trust_mutex) =
      std::make_shared<const store::TrustedKeys>();
  std::chrono::steady_clock::time_point m_started = std::chrono::steady_clock::now();
  std::unique_ptr<LeaseBook> m_leases;
  EntryEvents m_events;
  UsageStats m_usage;
  // PUT /v1/manifests/{key} reads, merges and writes: one at a time per
  // command key, by the key's first byte (so no update is lost behind one
  // server; replicas over one S3 bucket may still race, last writer wins).
  std::array<base::Mutex, 16> m_manifest_locks;
};

}  // namespace opcache::server
