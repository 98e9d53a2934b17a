#include "server/api.hpp"

#include <sys/stat.h>

#include "base/value_parse.hpp"
#include "opcache/version.hpp"
#include "remote/signature_header.hpp"
#include "store/bundle_reader.hpp"
#include "base/byte_stream.hpp"
#include "base/json_parse.hpp"
#include "base/percent_coding.hpp"
#include "store/key.hpp"
#include "base/try.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

constexpr std::string_view k_entries_prefix = "/v1/entries/";
constexpr std::string_view k_signatures_suffix = "/signatures";
constexpr std::string_view k_leases_prefix = "/v1/leases/";
constexpr std::string_view k_stats_prefix = "/v1/stats/";
constexpr std::string_view k_ui_prefix = "/ui/";

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

std::string quoted_etag(const std::string& digest) { return "\"" + digest + "\""; }

// Applies a partial scenario "phase=train,soc=X" to a listing query.
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

}  // namespace

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

Route match_route(std::string_view method, std::string_view path) {
  Route route;
  auto only = [&](std::initializer_list<std::string_view> methods, const char* allow) {
    for (auto allowed : methods) {
      if (method == allowed) {
        return true;
      }
    }
    route.error_status = 405;
    route.error_code = "method_not_allowed";
    route.error_message = std::string(method) + " is not allowed on " + std::string(path);
    route.allow = allow;
    return false;
  };
  auto valid_key = [&route] {
    auto valid = store::check_key(route.key);
    if (!valid) {
      route.error_status = 400;
      route.error_code = "invalid_key";
      route.error_message = valid.error().message();
    }
    return static_cast<bool>(valid);
  };
  auto valid_lease_id = [&route] {
    const bool valid = !route.lease_id.empty() && route.lease_id.size() <= 64 &&
                       route.lease_id.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!valid) {
      route.error_status = 400;
      route.error_code = "invalid_lease";
      route.error_message = "\"" + route.lease_id + "\" is not a lease id (lowercase hex, as POST /v1/leases/{key} gave)";
    }
    return valid;
  };
  if (path.substr(0, k_leases_prefix.size()) == k_leases_prefix) {
    route.name = "lease";
    const auto rest = path.substr(k_leases_prefix.size());
    const auto slash = rest.find('/');
    route.key = std::string(rest.substr(0, slash));
    if (slash == std::string_view::npos) {
      if (only({"POST"}, "POST") && valid_key()) {
        route.scope = Scope::write;
        route.body = BodyKind::small;
      }
      return route;
    }
    route.lease_id = std::string(rest.substr(slash + 1));
    if (only({"PUT", "DELETE"}, "PUT, DELETE") && valid_key() && valid_lease_id()) {
      route.scope = Scope::write;
    }
    return route;
  }
  const bool under_entries = path.substr(0, k_entries_prefix.size()) == k_entries_prefix;
  if (under_entries && path.size() > k_signatures_suffix.size() &&
      path.substr(path.size() - k_signatures_suffix.size()) == k_signatures_suffix) {
    route.name = "signatures";
    route.key = std::string(path.substr(k_entries_prefix.size(),
                                        path.size() - k_entries_prefix.size() - k_signatures_suffix.size()));
    if (only({"POST"}, "POST") && valid_key()) {
      route.scope = Scope::write;
      route.body = BodyKind::small;
    }
    return route;
  }
  if (under_entries && path != "/v1/entries/query") {
    route.name = "entry";
    route.key = std::string(path.substr(k_entries_prefix.size()));
    if (!only({"GET", "HEAD", "PUT", "DELETE"}, "GET, HEAD, PUT, DELETE") || !valid_key()) {
      return route;
    }
    route.scope = method == "PUT" ? Scope::write : method == "DELETE" ? Scope::admin : Scope::read;
    route.body = method == "PUT" ? BodyKind::upload : BodyKind::none;
    return route;
  }
  if (path == "/v1/entries/query") {
    route.name = "query";
    if (only({"POST"}, "POST")) {
      route.scope = Scope::read;
      route.body = BodyKind::small;
    }
    return route;
  }
  if (path == "/v1/entries") {
    route.name = "list";
    if (only({"GET", "HEAD"}, "GET, HEAD")) {
      route.scope = Scope::read;
    }
    return route;
  }
  if (path == "/v1/status" || path == "/metrics") {
    route.name = path == "/metrics" ? "metrics" : "status";
    if (only({"GET", "HEAD"}, "GET, HEAD")) {
      route.scope = Scope::read;
    }
    return route;
  }
  if (path.substr(0, k_stats_prefix.size()) == k_stats_prefix) {
    route.resource = std::string(path.substr(k_stats_prefix.size()));
    if (route.resource != "summary" && route.resource != "timeseries" && route.resource != "misses" &&
        route.resource != "tokens") {
      route.resource.clear();
      route.error_status = 404;
      route.error_code = "not_found";
      route.error_message = "no such statistics: " + std::string(path) +
                            " (there are /v1/stats/summary, timeseries, misses and tokens)";
      return route;
    }
    route.name = "stats";
    if (only({"GET", "HEAD"}, "GET, HEAD")) {
      route.scope = route.resource == "tokens" ? Scope::admin : Scope::read;
    }
    return route;
  }
  if (path == "/ui" || path.substr(0, k_ui_prefix.size()) == k_ui_prefix) {
    // The page holds no data and needs no token; its script asks for one.
    route.name = "ui";
    route.resource = path == "/ui" ? "" : path == k_ui_prefix ? "index.html" : std::string(path.substr(k_ui_prefix.size()));
    only({"GET", "HEAD"}, "GET, HEAD");
    return route;
  }
  if (path == "/healthz") {
    route.name = "healthz";
    only({"GET", "HEAD"}, "GET, HEAD");
    return route;
  }
  route.error_status = 404;
  route.error_code = "not_found";
  route.error_message = "no such endpoint: " + std::string(path) + " (the API lives under /v1/, see docs/protocol.md)";
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

RoutedTarget route_target(std::string_view method, std::string_view target) {
  RoutedTarget routed;
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
    : m_storage(storage), m_metrics(metrics), m_config(config) {}

ApiResponse Api::get_entry(const std::string& key, bool head_only, std::string_view if_none_match) {
  auto found = m_storage.open(key);
  if (!found) {
    return storage_failure(found.error());
  }
  if (!*found) {
    return error_response(404, "not_found", "no entry for key " + key);
  }
  ApiResponse response;
  response.content_type = "application/vnd.opcache.bundle";
  response.headers.push_back({"ETag", quoted_etag((*found)->digest)});
  for (const auto& signature : (*found)->signatures) {
    response.headers.push_back({remote::k_signature_header, store::format_signature(signature)});
  }
  if (if_none_match == quoted_etag((*found)->digest)) {
    response.status = 304;
    return response;
  }
  response.head_only = head_only;
  response.bundle = std::move(**found);
  return response;
}

ApiResponse Api::put_entry(const std::string& key, base::AtomicFile upload, const store::Signatures& signatures) {
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
  // and the requests waiting for it can have it.
  m_leases.release_key(key);
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

ApiResponse Api::query(const std::string& body) {
  auto parsed = base::parse_json(body, "request body");
  if (!parsed) {
    return error_response(400, "bad_request", parsed.error().message());
  }
  auto keys = parsed->find("keys");
  if (!parsed->is_object() || keys == parsed->end() || !keys->is_array()) {
    return error_response(400, "bad_request", "request body must be {\"keys\": [\"<64 hex>\", ...]}");
  }
  if (keys->size() > m_config.max_query_keys) {
    return error_response(413, "too_many_keys",
                          "at most " + std::to_string(m_config.max_query_keys) + " keys per query, got " +
                              std::to_string(keys->size()));
  }
  std::vector<std::string> wanted;
  for (const auto& key : *keys) {
    if (!key.is_string() || !store::check_key(key.get<std::string>())) {
      return error_response(400, "invalid_key", "keys[" + std::to_string(wanted.size()) +
                                                    "] is not a cache key (64 lowercase hex characters)");
    }
    wanted.push_back(key.get<std::string>());
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
  return json({{"version", k_version_string},
               {"api", "v1"},
               {"storage", m_storage.public_description()},
               {"entries", optional_number(gauges.entries)},
               {"bytes", optional_number(gauges.bytes)},
               {"hits", m_metrics.hits()},
               {"misses", m_metrics.misses()},
               {"leases", lease_status()},
               {"uptime_seconds", uptime}});
}

ApiResponse Api::metrics() {
  double uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
  ApiResponse response;
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.body = m_metrics.render(m_storage.gauges(), {m_leases.counts(), m_events.waiting()}, uptime);
  return response;
}

ApiResponse Api::healthz() { return json_response(200, {{"status", "ok"}}); }

}  // namespace opcache::server
