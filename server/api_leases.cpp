// The build-lease side of HTTP API v1 (docs/protocol.md "Build leases"):
// POST /v1/leases/{key}, PUT and DELETE /v1/leases/{key}/{id}, and the
// "leases" object of /v1/status. The leases themselves are server/lease_table.
#include "base/json_parse.hpp"
#include "server/api.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

constexpr std::size_t k_max_holder_bytes = 200;

double seconds_between(LeaseTable::Clock::time_point from, LeaseTable::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// The holder named by a POST body ({"holder": "..."}; the body may be empty),
// else `fallback`.
Result<std::string> holder_of(const std::string& body, const std::string& fallback) {
  if (body.empty()) {
    return fallback;
  }
  auto parsed = base::parse_json(body, "request body");
  if (!parsed) {
    return parsed.error();
  }
  const std::string shape = "request body must be empty or {\"holder\": \"<name, at most 200 bytes of UTF-8>\"}";
  if (!parsed->is_object()) {
    return Error::usage(shape);
  }
  auto holder = parsed->find("holder");
  if (holder == parsed->end()) {
    return fallback;
  }
  if (!holder->is_string() || holder->get<std::string>().empty() ||
      holder->get<std::string>().size() > k_max_holder_bytes) {
    return Error::usage(shape);
  }
  return holder->get<std::string>();
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
  auto holder = holder_of(body, token_name);
  if (!holder) {
    return error_response(400, "bad_request", holder.error().message());
  }
  const auto answer = m_leases.acquire(key, *holder, std::chrono::seconds(m_config.lease_ttl_s));
  if (!answer.granted) {
    const auto now = LeaseTable::Clock::now();
    return json_response(409, {{"error", "lease_held"},
                               {"message", answer.lease.holder + " is building " + key},
                               {"key", key},
                               {"holder", answer.lease.holder},
                               {"held_seconds", seconds_between(answer.lease.granted, now)},
                               {"expires_in_seconds", seconds_between(now, answer.lease.expires)}});
  }
  // Asked after a miss, so the entry is rarely there; but an upload may have
  // landed since: then nobody needs to build it.
  auto present = m_storage.present({key});
  if (present && !present->empty() && present->front()) {
    m_leases.withdraw(key, answer.lease.id);
    return json_response(200, {{"key", key}, {"present", true}});
  }
  return json_response(201, lease_body(key, answer.lease, m_config.lease_ttl_s));
}

ApiResponse Api::renew_lease(const std::string& key, const std::string& id) {
  auto renewed = m_leases.renew(key, id, std::chrono::seconds(m_config.lease_ttl_s));
  if (!renewed) {
    return lease_not_found(key, id);
  }
  return json_response(200, lease_body(key, *renewed, m_config.lease_ttl_s));
}

ApiResponse Api::release_lease(const std::string& key, const std::string& id) {
  if (!m_leases.release(key, id)) {
    return lease_not_found(key, id);
  }
  m_events.notify(key);  // the waiters may ask for the lease now
  return json_response(200, {{"key", key}, {"lease", id}, {"released", true}});
}

nlohmann::json Api::lease_status() {
  const auto counts = m_leases.counts();
  return {{"active", counts.active},     {"granted", counts.granted},   {"refused", counts.refused},
          {"expired", counts.expired},   {"released", counts.released}, {"waiting", m_events.waiting()},
          {"ttl_seconds", m_config.lease_ttl_s}};
}

}  // namespace opcache::server
