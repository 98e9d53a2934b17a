// The build-lease side of HTTP API v1 (docs/protocol.md "Build leases"):
// POST /v1/leases/{key}, PUT and DELETE /v1/leases/{key}/{id}, and the
// "leases" object of /v1/status. The leases themselves are server/lease_table.
#include <cctype>

#include "base/json_parse.hpp"
#include "base/try.hpp"
#include "server/api.hpp"
#include "server/lease_table.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

constexpr std::size_t k_max_holder_bytes = 200;

double seconds_between(LeaseTable::Clock::time_point from, LeaseTable::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// What a POST /v1/leases/{key} body asks for (lease-request.schema.json).
struct LeaseAsk {
  std::string holder;   ///< the body's, else the token's name
  std::string request;  ///< the retry-safe request id, or ""
};

bool is_request_id(const std::string& id) {
  if (id.size() < 16 || id.size() > 64) {
    return false;
  }
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

// The holder and request id of a POST body ({"holder": "...", "request":
// "..."}; the body and each field may be absent); the holder defaults to
// `token_name`.
Result<LeaseAsk> lease_ask_of(const std::string& body, const std::string& token_name) {
  LeaseAsk ask{token_name, {}};
  if (body.empty()) {
    return ask;
  }
  OPCACHE_TRY_ASSIGN(auto parsed, base::parse_json(body, "request body"));
  const std::string shape =
      "request body must be empty or {\"holder\": \"<name, at most 200 bytes of UTF-8>\", \"request\": "
      "\"<16 to 64 characters of 0-9, a-z, A-Z, _ and ->\"}, each field optional";
  if (!parsed.is_object()) {
    return Error::usage(shape);
  }
  if (auto holder = parsed.find("holder"); holder != parsed.end()) {
    if (!holder->is_string() || holder->get<std::string>().empty() ||
        holder->get<std::string>().size() > k_max_holder_bytes) {
      return Error::usage(shape);
    }
    ask.holder = holder->get<std::string>();
  }
  if (auto request = parsed.find("request"); request != parsed.end()) {
    if (!request->is_string() || !is_request_id(request->get<std::string>())) {
      return Error::usage(shape);
    }
    ask.request = request->get<std::string>();
  }
  return ask;
}

json lease_body(const std::string& key, const Lease& lease, int ttl_s) {
  return {{"key", key}, {"lease", lease.id}, {"holder", lease.holder}, {"ttl_seconds", ttl_s}};
}

ApiResponse lease_not_found(const std::string& key, const std::string& id) {
  return error_response(404, "lease_not_found",
                        "lease " + id + " on " + key +
                            " is not held: it expired, was released, or its entry was uploaded");
}

}  // namespace

ApiResponse Api::acquire_lease(const std::string& key, const std::string& body, const std::string& token_name) {
  auto ask = lease_ask_of(body, token_name);
  if (!ask) {
    return error_response(400, "bad_request", ask.error().message());
  }
  auto answer = m_leases->acquire(key, ask->holder, ask->request, std::chrono::seconds(m_config.lease_ttl_s));
  if (!answer) {
    return storage_failure(answer.error());
  }
  if (!answer->granted) {
    const auto now = LeaseTable::Clock::now();
    return json_response(409, {{"error", "lease_held"},
                               {"message", answer->lease.holder + " is building " + key},
                               {"key", key},
                               {"holder", answer->lease.holder},
                               {"held_seconds", seconds_between(answer->lease.granted, now)},
                               {"expires_in_seconds", seconds_between(now, answer->lease.expires)}});
  }
  // Asked after a miss, so the entry is rarely there; but an upload may have
  // landed since: then nobody needs to build it.
  auto present = m_storage.present({key});
  if (present && !present->empty() && present->front()) {
    (void)m_leases->withdraw(key, answer->lease.id);  // a lease left in a bucket just expires
    return json_response(200, {{"key", key}, {"present", true}});
  }
  return json_response(201, lease_body(key, answer->lease, m_config.lease_ttl_s));
}

ApiResponse Api::renew_lease(const std::string& key, const std::string& id) {
  auto renewed = m_leases->renew(key, id, std::chrono::seconds(m_config.lease_ttl_s));
  if (!renewed) {
    return storage_failure(renewed.error());
  }
  if (!*renewed) {
    return lease_not_found(key, id);
  }
  return json_response(200, lease_body(key, **renewed, m_config.lease_ttl_s));
}

ApiResponse Api::release_lease(const std::string& key, const std::string& id) {
  auto released = m_leases->release(key, id);
  if (!released) {
    return storage_failure(released.error());
  }
  if (!*released) {
    return lease_not_found(key, id);
  }
  m_events.notify(key);  // the waiters may ask for the lease now
  return json_response(200, {{"key", key}, {"lease", id}, {"released", true}});
}

nlohmann::json Api::lease_status() {
  const auto counts = m_leases->counts();
  return {{"kind", m_leases->kind()},       {"active", counts.active},     {"granted", counts.granted},   {"refused", counts.refused},
          {"expired", counts.expired},   {"released", counts.released}, {"waiting", m_events.waiting()},
          {"ttl_seconds", m_config.lease_ttl_s}};
}

}  // namespace opcache::server
