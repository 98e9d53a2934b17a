#include "server/api.hpp"

#include <sys/stat.h>

#include "base/value_parse.hpp"
#include "opcache/version.hpp"
#include "remote/signature_header.hpp"
#include "store/bundle_reader.hpp"
#include "base/byte_stream.hpp"
#include "base/json_parse.hpp"
#include "base/percent_coding.hpp"
#include "server/lease_table.hpp"
#include "store/key.hpp"
#include "base/try.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

constexpr std::string_view k_stats_prefix = "/v1/stats/";

// Decodes one part of a request target; `what` names it in the error.
Result<std::string> decode_part(std::string_view text, base::PlusSign plus, const std::string& what) {
  auto decoded = base::percent_decode(text, plus);
  if (!decoded) {
    return Error::usage(what + " \"" + std::string(text) + "\" has a '%' not followed by two hexadecimal digits");
  }
  return std::move(*decoded);
}

}  // namespace

ApiResponse json_response(int status, const json& body) {
  ApiResponse response;
  response.status = status;
  // Messages quote the client's decoded path and parameters, which need not be
  // UTF-8: replace bad bytes (U+FFFD) rather than throw, which would end the server.
  response.body = body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  return response;
}

ApiResponse storage_failure(const Error& error) {
  const bool unavailable = error.code() == ErrorCode::remote || error.code() == ErrorCode::timeout;
  ApiResponse response =
      unavailable ? error_response(503, "unavailable", "the server's storage did not answer; retry later")
                  : error_response(500, "internal", "the server's storage failed; its log says why");
  response.log_detail = "storage failure: " + error.message();
  return response;
}

namespace {

std::uint64_t source_size(int fd) {
  struct stat info {};
  return ::fstat(fd, &info) == 0 ? static_cast<std::uint64_t>(info.st_size) : 0;
}

std::string quoted_etag(const std::string& digest) {
  std::string etag;
  etag.reserve(digest.size() + 2);  // one allocation ("\"" + digest + "\"" made two)
  etag += '"';
  etag += digest;
  etag += '"';
  return etag;
}

}  // namespace

Status apply_scenario_filter(const std::string& spec, ListQuery& query) {
  std::size_t start = 0;
  while (start < spec.size()) {
    std::size_t end = spec.find(',', start);
    std::string item = spec.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? spec.size() : end + 1;
    auto equals = item.find('=');
    if (equals == std::string::npos) {
      return Error::usage("scenario filter item \"" + item + "\" is not FIELD=VALUE");
    }
    std::string field = item.substr(0, equals);
    std::string value = item.substr(equals + 1);
    std::string* slot = field == "device" || field == "device_mode" ? &query.device_mode
                        : field == "phase"                          ? &query.phase
                        : field == "toolchain"                      ? &query.toolchain
                        : field == "soc"                            ? &query.soc
                                                                    : nullptr;
    if (slot == nullptr) {
      return Error::usage("scenario filter field \"" + field + "\" is unknown (allowed: device, phase, toolchain, soc)");
    }
    *slot = value;
  }
  return {};
}

std::optional<ApiResponse> unknown_parameter(const std::map<std::string, std::string>& parameters,
                                             std::initializer_list<std::string_view> allowed) {
  for (const auto& [name, value] : parameters) {
    bool known = false;
    for (auto allowed_name : allowed) {
      known = known || name == allowed_name;
    }
    if (!known) {
      std::string names;
      for (auto allowed_name : allowed) {
        names += (names.empty() ? "" : ", ") + std::string(allowed_name);
      }
      return error_response(400, "bad_request",
                            "unknown parameter \"" + name + "\" (allowed: " + (names.empty() ? "none" : names) + ")");
    }
  }
  return std::nullopt;
}

Result<long> integer_parameter(const std::map<std::string, std::string>& parameters, const std::string& name,
                               long fallback, long low, long high) {
  auto it = parameters.find(name);
  if (it == parameters.end()) {
    return fallback;
  }
  auto value = base::parse_integer(it->second, low, high);
  if (!value) {
    return Error::usage(name + "=\"" + it->second + "\" " + value.error().message());
  }
  return static_cast<long>(*value);
}

namespace {

// The answer for a path no route takes: 404, naming the statistics there are
// for a path under /v1/stats/.
void not_found(Route& route, std::string_view path) {
  route.error_status = 404;
  route.error_code = "not_found";
  if (path.substr(0, k_stats_prefix.size()) != k_stats_prefix) {
    route.error_message =
        "no such endpoint: " + std::string(path) + " (the API lives under /v1/, see docs/protocol.md)";
    return;
  }
  std::vector<std::string_view> names;
  for (const RouteSpec& spec : routes()) {
    if (spec.pattern.substr(0, k_stats_prefix.size()) == k_stats_prefix) {
      names.push_back(spec.pattern.substr(k_stats_prefix.size()));
    }
  }
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + std::string(names[i]);
  }
  route.error_message =
      "no such statistics: " + std::string(path) + " (there are " + std::string(k_stats_prefix) + list + ")";
}

// The route of the first pattern `path` matches, with its captures in `route`; nullptr when none does.
const RouteSpec* match_path(std::string_view path, Route& route) {
  for (const RouteSpec& spec : routes()) {
    if (auto captures = match_pattern(spec.pattern, path)) {
      route.key = std::move(captures->key);
      route.lease_id = std::move(captures->id);
      // /ui/ is the page itself.
      route.resource = spec.id == RouteId::ui && captures->file.empty() ? "index.html" : std::move(captures->file);
      return &spec;
    }
  }
  return nullptr;
}

// The route of `pattern` that takes `method`, or nullptr after a 405 in `route` listing those methods.
const RouteSpec* match_method(std::string_view pattern, std::string_view method, std::string_view path, Route& route) {
  std::string allow;
  for (const RouteSpec& spec : routes()) {
    if (spec.pattern != pattern) {
      continue;
    }
    if (has_method(spec.methods, method)) {
      return &spec;
    }
    allow += (allow.empty() ? "" : ", ") + std::string(spec.methods);
  }
  route.error_status = 405;
  route.error_code = "method_not_allowed";
  route.error_message = std::string(method) + " is not allowed on " + std::string(path);
  route.allow = std::move(allow);
  return nullptr;
}

// Whether the captures of `pattern` in `route` are valid; else the 400 in `route`.
bool valid_captures(std::string_view pattern, Route& route) {
  if (pattern.find("{key}") != std::string_view::npos) {
    if (auto valid = store::check_key(route.key); !valid) {
      route.error_status = 400;
      route.error_code = "invalid_key";
      route.error_message = valid.error().message();
      return false;
    }
  }
  if (pattern.find("{id}") != std::string_view::npos) {
    const bool valid = !route.lease_id.empty() && route.lease_id.size() <= 64 &&
                       route.lease_id.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!valid) {
      route.error_status = 400;
      route.error_code = "invalid_lease";
      route.error_message =
          "\"" + route.lease_id + "\" is not a lease id (lowercase hex, as POST /v1/leases/{key} gave)";
      return false;
    }
  }
  return true;
}

}  // namespace

Route match_route(std::string_view method, std::string_view path) {
  Route route;
  const RouteSpec* on_path = match_path(path, route);
  if (on_path == nullptr) {
    not_found(route, path);
    return route;
  }
  route.id = on_path->id;
  const RouteSpec* spec = match_method(on_path->pattern, method, path, route);
  if (spec == nullptr) {
    return route;
  }
  route.id = spec->id;
  if (valid_captures(spec->pattern, route)) {
    route.scope = spec->scope;
    route.body = spec->body;
  }
  return route;
}

ApiResponse error_response(int status, const std::string& code, const std::string& message) {
  return json_response(status, {{"error", code}, {"message", message}});
}

Result<Target> split_target(std::string_view target) {
  Target split;
  auto question = target.find('?');
  OPCACHE_TRY_ASSIGN(split.path, decode_part(target.substr(0, question), base::PlusSign::literal, "request path"));
  if (question == std::string_view::npos) {
    return split;
  }
  std::string_view query = target.substr(question + 1);
  std::size_t start = 0;
  while (start < query.size()) {
    auto end = query.find('&', start);
    auto item = query.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    start = end == std::string_view::npos ? query.size() : end + 1;
    auto equals = item.find('=');
    OPCACHE_TRY_ASSIGN(auto name, decode_part(item.substr(0, equals), base::PlusSign::space, "query parameter"));
    std::string value;
    if (equals != std::string_view::npos) {
      OPCACHE_TRY_ASSIGN(value, decode_part(item.substr(equals + 1), base::PlusSign::space, "query parameter " + name));
    }
    split.parameters[name] = std::move(value);
  }
  return split;
}

namespace {

// The route of a bundle's GET or HEAD, the request a team server answers
// most, told without walking the table: "/v1/entries/" and a valid key, no
// query, nothing percent-encoded; into `routed` (true) or false for any other
// target, which goes the general way. The general way routes this one alike
// (tests/server/test_router.cpp).
bool route_entry_read(std::string_view method, std::string_view target, RoutedTarget& routed) {
  constexpr std::string_view prefix = "/v1/entries/";
  if (!target.starts_with(prefix) || (method != "GET" && method != "HEAD")) {
    return false;
  }
  const std::string_view key = target.substr(prefix.size());
  if (!store::check_key(key)) {
    return false;
  }
  static const RouteSpec& spec = *find_route(RouteId::entry_read);
  routed.path = target;
  routed.route.id = spec.id;
  routed.route.key = key;
  routed.route.scope = spec.scope;
  routed.route.body = spec.body;
  return true;
}

}  // namespace

RoutedTarget route_target(std::string_view method, std::string_view target) {
  RoutedTarget routed;
  if (route_entry_read(method, target, routed)) {
    return routed;
  }
  auto split = split_target(target);
  if (!split) {
    routed.path = std::string(target.substr(0, target.find('?')));
    routed.route.error_status = 400;
    routed.route.error_code = "bad_request";
    routed.route.error_message = split.error().message();
    return routed;
  }
  routed.path = std::move(split->path);
  routed.parameters = std::move(split->parameters);
  routed.route = match_route(method, routed.path);
  return routed;
}

Api::Api(Storage& storage, Metrics& metrics, const ServerConfig& config)
    : m_storage(storage), m_metrics(metrics), m_config(config), m_leases(std::make_unique<MemoryLeaseBook>()) {}

ApiResponse entry_response(const std::string& digest, const store::Signatures& signatures,
                           std::string_view if_none_match) {
  ApiResponse response{.status = 200,
                       .content_type = "application/vnd.opcache.bundle",
                       .body = {},
                       .bundle = std::nullopt,
                       .head_only = false,
                       .headers = {},
                       .log_detail = {},
                       .fetched = nullptr};
  response.headers.reserve(1 + signatures.size());
  response.headers.push_back({"ETag", quoted_etag(digest)});
  const bool unchanged = if_none_match == response.headers.back().second;
  for (const auto& signature : signatures) {
    response.headers.push_back({remote::k_signature_header, store::format_signature(signature)});
  }
  response.status = unchanged ? 304 : 200;
  return response;
}

DownloadRedirect download_redirect(std::string_view header_value) {
  if (header_value.empty()) {
    return DownloadRedirect::no;  // absent, as on most requests: no refusal's message made and dropped
  }
  auto value = base::parse_bool(header_value);
  return value && *value ? DownloadRedirect::allowed : DownloadRedirect::no;
}

ApiResponse Api::get_entry(const std::string& key, bool head_only, std::string_view if_none_match,
                           DownloadRedirect redirect) {
  if (redirect == DownloadRedirect::allowed && !head_only && m_config.redirect_downloads &&
      m_storage.locates_bundles()) {
    if (auto redirected = redirect_entry(key, if_none_match)) {
      return std::move(*redirected);
    }
  }
  auto found = m_storage.open(key);
  if (!found) {
    return storage_failure(found.error());
  }
  if (!*found) {
    return absent_entry(key);
  }
  ApiResponse response = entry_response((*found)->digest, (*found)->signatures, if_none_match);
  if (response.status == 304) {
    return response;
  }
  response.head_only = head_only;
  response.bundle = std::move(**found);
  return response;
}

ApiResponse Api::absent_entry(const std::string& key) {
  // Revoking deletes the entry, so only a miss can be a revoked key: a hit
  // pays nothing for revocation.
  auto tombstone = m_storage.revocation(key);
  if (!tombstone) {
    return storage_failure(tombstone.error());
  }
  if (*tombstone) {
    return revoked_response(**tombstone, "key");
  }
  return error_response(404, "not_found", "no entry for key " + key);
}

ApiResponse Api::put_entry(const std::string& key, base::AtomicFile upload, const store::Signatures& signatures) {
  auto tombstone = m_storage.revocation(key);
  if (!tombstone) {
    return storage_failure(tombstone.error());
  }
  if (*tombstone) {
    m_metrics.record_rejected_upload("revoked");
    return revoked_response(**tombstone, "upload refused: key");
  }
  if (auto finished = upload.finish_writing(); !finished) {
    return storage_failure(finished.error());
  }
  auto fd = base::open_for_reading(upload.temp_path());
  if (!fd) {
    return storage_failure(fd.error());
  }
  base::FdSource source(fd->get(), upload.temp_path());
  std::string digest;
  auto manifest = store::verify_bundle(source, store::BundleLimits{}, &digest);
  if (!manifest) {
    m_metrics.record_rejected_upload(manifest.error().code() == ErrorCode::corrupt ? "corrupt" : "unreadable");
    if (manifest.error().code() != ErrorCode::corrupt) {
      return storage_failure(manifest.error());
    }
    return error_response(400, "corrupt_bundle", manifest.error().message());
  }
  if (manifest->key != key) {
    m_metrics.record_rejected_upload("key_mismatch");
    return error_response(409, "key_mismatch",
                          "the bundle is for key " + manifest->key + ", not for the URL's key " + key);
  }
  if (auto refused = refuse_signatures(key, digest, signatures)) {
    return std::move(*refused);  // `upload` goes away with this scope: nothing stored
  }
  const auto bytes = static_cast<std::int64_t>(source_size(fd->get()));
  fd->reset();
  auto stored = m_storage.store_verified(std::move(upload), *manifest, digest, bytes, signatures);
  if (!stored) {
    return storage_failure(stored.error());
  }
  // The entry is there: its lease (whoever holds it) has served its purpose,
  // and the requests waiting for it can have it. A lease object left in a
  // bucket by a failed delete only expires: a miss never asks for it again.
  (void)m_leases->release_key(key);
  m_events.notify(key);
  ApiResponse response = json_response(stored->stored ? 201 : 200, {{"key", key},
                                                                   {"digest", stored->digest},
                                                                   {"bytes", stored->bytes},
                                                                   {"stored", stored->stored}});
  response.headers.push_back({"ETag", quoted_etag(stored->digest)});
  return response;
}

ApiResponse Api::delete_entry(const std::string& key) {
  auto removed = m_storage.remove(key);
  if (!removed) {
    return storage_failure(removed.error());
  }
  if (!*removed) {
    return error_response(404, "not_found", "no entry for key " + key);
  }
  return json_response(200, {{"key", key}, {"deleted", true}});
}

std::optional<ApiResponse> read_key_array(const nlohmann::json& listed, std::size_t max_keys, const std::string& what,
                                          std::vector<std::string>& keys) {
  if (listed.size() > max_keys) {
    return error_response(413, "too_many_keys",
                          "at most " + std::to_string(max_keys) + " keys per " + what + ", got " +
                              std::to_string(listed.size()));
  }
  keys.clear();
  for (const auto& key : listed) {
    if (!key.is_string() || !store::check_key(key.get<std::string>())) {
      return error_response(400, "invalid_key", "keys[" + std::to_string(keys.size()) +
                                                    "] is not a cache key (64 lowercase hex characters)");
    }
    keys.push_back(key.get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiResponse> read_key_list(const std::string& body, std::size_t max_keys, const std::string& what,
                                         std::vector<std::string>& keys) {
  auto parsed = base::parse_json(body, "request body");
  if (!parsed) {
    return error_response(400, "bad_request", parsed.error().message());
  }
  auto listed = parsed->find("keys");
  if (!parsed->is_object() || listed == parsed->end() || !listed->is_array()) {
    return error_response(400, "bad_request", "request body must be {\"keys\": [\"<64 hex>\", ...]}");
  }
  return read_key_array(*listed, max_keys, what, keys);
}

ApiResponse Api::query(const std::string& body) {
  std::vector<std::string> wanted;
  if (auto refused = read_key_list(body, m_config.max_query_keys, "query", wanted)) {
    return std::move(*refused);
  }
  auto present = m_storage.present(wanted);
  if (!present) {
    return storage_failure(present.error());
  }
  json found = json::array();
  json missing = json::array();
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    ((*present)[i] ? found : missing).push_back(wanted[i]);
  }
  return json_response(200, {{"present", found}, {"missing", missing}});
}

ApiResponse Api::list(const std::map<std::string, std::string>& parameters) {
  if (auto unknown = unknown_parameter(parameters, {"scenario", "op_type", "after", "limit"})) {
    return std::move(*unknown);
  }
  ListQuery query;
  if (auto scenario = parameters.find("scenario"); scenario != parameters.end()) {
    if (auto applied = apply_scenario_filter(scenario->second, query); !applied) {
      return error_response(400, "bad_request", applied.error().message());
    }
  }
  if (auto op_type = parameters.find("op_type"); op_type != parameters.end()) {
    query.op_type = op_type->second;
  }
  if (auto after = parameters.find("after"); after != parameters.end()) {
    query.after = after->second;
  }
  auto limit = integer_parameter(parameters, "limit", query.limit, 1, 1000);
  if (!limit) {
    return error_response(400, "bad_request", limit.error().message());
  }
  query.limit = static_cast<int>(*limit);
  auto page = m_storage.list(query);
  if (!page) {
    return storage_failure(page.error());
  }
  json entries = json::array();
  for (const auto& entry : page->entries) {
    entries.push_back({{"key", entry.key},
                       {"op_type", entry.op_type},
                       {"scenario", entry.scenario},
                       {"bundle_bytes", entry.bundle_bytes < 0 ? json(nullptr) : json(entry.bundle_bytes)},
                       {"created_ms", entry.created_ms > 0 ? json(entry.created_ms) : json(nullptr)}});
  }
  json body = {{"entries", entries}};
  body["next"] = page->next.empty() ? json(nullptr) : json(page->next);
  return json_response(200, body);
}

ApiResponse Api::status() {
  return json_response(200, status_body(m_storage.gauges()));
}

json Api::status_body(const StorageGauges& gauges) {
  auto optional_number = [](const std::optional<std::int64_t>& value) { return value ? json(*value) : json(nullptr); };
  double uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
  const UsageCounts totals = m_usage.totals();  // kernels, as the statistics count them
  return json({{"version", k_version_string},
               {"api", "v1"},
               {"revision", k_api_revision},
               {"storage", m_storage.public_description()},
               {"entries", optional_number(gauges.entries)},
               {"bytes", optional_number(gauges.bytes)},
               {"hits", totals.hits},
               {"misses", totals.misses},
               {"leases", lease_status()},
               {"uptime_seconds", uptime}});
}

ApiResponse Api::metrics() {
  double uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
  ApiResponse response;
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.body =
      m_metrics.render(m_storage.gauges(), {m_leases->counts(), m_events.waiting()}, m_usage.totals(), uptime);
  return response;
}

ApiResponse Api::healthz() { return json_response(200, {{"status", "ok"}}); }

}  // namespace opcache::server
