// The server's router (server/api.cpp match_route, split_target, route_target).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "server/api.hpp"

using namespace opcache::server;

namespace {

const std::string k_route_key(64, 'a');

}  // namespace

TEST_CASE("server::match_route maps every route and method to a handler, scope and body kind") {
  struct Case {
    const char* method;
    std::string path;
    RouteId id;
    Scope scope;
    BodyKind body;
  };
  const Case cases[] = {
      {"GET", "/v1/entries/" + k_route_key, RouteId::entry_read, Scope::read, BodyKind::none},
      {"HEAD", "/v1/entries/" + k_route_key, RouteId::entry_read, Scope::read, BodyKind::none},
      {"PUT", "/v1/entries/" + k_route_key, RouteId::entry_put, Scope::write, BodyKind::upload},
      {"DELETE", "/v1/entries/" + k_route_key, RouteId::entry_delete, Scope::admin, BodyKind::none},
      {"POST", "/v1/entries/query", RouteId::query, Scope::read, BodyKind::small},
      {"POST", "/v1/leases/" + k_route_key, RouteId::lease_acquire, Scope::write, BodyKind::small},
      {"PUT", "/v1/leases/" + k_route_key + "/0123abcd", RouteId::lease_renew, Scope::write, BodyKind::none},
      {"DELETE", "/v1/leases/" + k_route_key + "/0123abcd", RouteId::lease_release, Scope::write, BodyKind::none},
      {"GET", "/v1/entries", RouteId::list, Scope::read, BodyKind::none},
      {"HEAD", "/v1/entries", RouteId::list, Scope::read, BodyKind::none},
      {"GET", "/v1/status", RouteId::status, Scope::read, BodyKind::none},
      {"GET", "/metrics", RouteId::metrics, Scope::read, BodyKind::none},
      {"GET", "/healthz", RouteId::healthz, Scope::none, BodyKind::none},
      {"HEAD", "/healthz", RouteId::healthz, Scope::none, BodyKind::none},
      {"GET", "/v1/stats/summary", RouteId::stats_summary, Scope::read, BodyKind::none},
      {"GET", "/v1/stats/timeseries", RouteId::stats_timeseries, Scope::read, BodyKind::none},
      {"GET", "/v1/stats/misses", RouteId::stats_misses, Scope::read, BodyKind::none},
      {"HEAD", "/v1/stats/misses", RouteId::stats_misses, Scope::read, BodyKind::none},
      {"GET", "/v1/stats/tokens", RouteId::stats_tokens, Scope::admin, BodyKind::none},
      {"GET", "/ui", RouteId::ui_root, Scope::none, BodyKind::none},
      {"GET", "/ui/", RouteId::ui, Scope::none, BodyKind::none},
      {"GET", "/ui/app.js", RouteId::ui, Scope::none, BodyKind::none},
      {"HEAD", "/ui/style.css", RouteId::ui, Scope::none, BodyKind::none},
  };
  for (const auto& c : cases) {
    CAPTURE(c.method);
    CAPTURE(c.path);
    const Route route = match_route(c.method, c.path);
    CHECK(route.error_status == 0);
    CHECK(route.id == c.id);
    CHECK(route.scope == c.scope);
    CHECK(route.body == c.body);
  }
  CHECK(match_route("GET", "/v1/entries/" + k_route_key).key == k_route_key);
  CHECK(match_route("GET", "/v1/stats/timeseries").id == RouteId::stats_timeseries);
  CHECK(match_route("GET", "/ui").resource.empty());
  CHECK(match_route("GET", "/ui/").resource == "index.html");
  CHECK(match_route("GET", "/ui/app.js").resource == "app.js");
}

TEST_CASE("server::match_route answers 405 with Allow for a wrong method") {
  struct Case {
    const char* method;
    std::string path;
    const char* allow;
  };
  const Case cases[] = {
      {"POST", "/v1/entries/" + k_route_key, "GET, HEAD, PUT, DELETE"},
      {"GET", "/v1/entries/query", "POST"},
      {"PUT", "/v1/entries", "GET, HEAD"},
      {"DELETE", "/v1/status", "GET, HEAD"},
      {"POST", "/metrics", "GET, HEAD"},
      {"PUT", "/healthz", "GET, HEAD"},
      {"POST", "/v1/stats/summary", "GET, HEAD"},
      {"DELETE", "/ui/", "GET, HEAD"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.method);
    CAPTURE(c.path);
    const Route route = match_route(c.method, c.path);
    CHECK(route.error_status == 405);
    CHECK(route.error_code == "method_not_allowed");
    CHECK(route.allow == c.allow);
    CHECK(route.scope == Scope::none);
  }
}

TEST_CASE("server::match_route answers 404 for unknown paths") {
  for (const char* path : {"/", "/v2/entries", "/v1", "/v1/entriesx", "/healthz/x", "/v1/stats/", "/v1/stats/keys",
                           "/v1/stats/summary/x", "/uix"}) {
    CAPTURE(path);
    const Route route = match_route("GET", path);
    CHECK(route.error_status == 404);
    CHECK(route.error_code == "not_found");
    CHECK(route.id == RouteId::unknown);
  }
}

TEST_CASE("server::match_route rejects keys that are not 64 lowercase hex digits as invalid_key") {
  for (const std::string& key : {std::string(63, 'a'), std::string(65, 'a'), std::string(64, 'A'),
                                 std::string(63, 'a') + "g", std::string(), k_route_key + "/x"}) {
    CAPTURE(key);
    const Route route = match_route("GET", "/v1/entries/" + key);
    CHECK(route.error_status == 400);
    CHECK(route.error_code == "invalid_key");
    CHECK_FALSE(route.error_message.empty());
  }
}

TEST_CASE("server::split_target decodes the query with '+' as a space and keeps the last repeated name") {
  auto target = split_target("/v1/entries?scenario=phase%3Dtrain&op_type=Mat+Mul&limit=5&limit=7&flag");
  REQUIRE(target);
  CHECK(target->path == "/v1/entries");
  CHECK(target->parameters.at("scenario") == "phase=train");
  CHECK(target->parameters.at("op_type") == "Mat Mul");
  CHECK(target->parameters.at("limit") == "7");
  CHECK(target->parameters.at("flag").empty());
  CHECK(target->parameters.size() == 4);
}

TEST_CASE("server::split_target keeps '+' in a path literal (RFC 3986)") {
  auto target = split_target("/v1/entries/a+b%2Bc");
  REQUIRE(target);
  CHECK(target->path == "/v1/entries/a+b+c");
  CHECK(target->parameters.empty());
}

TEST_CASE("server::route_target answers 400 bad_request for a malformed percent escape") {
  for (const char* target : {"/v1/entries/%zz", "/v1/entries?limit=%4", "/v1/entries?%g1=2"}) {
    CAPTURE(target);
    const RoutedTarget routed = route_target("GET", target);
    CHECK(routed.route.error_status == 400);
    CHECK(routed.route.error_code == "bad_request");
    CHECK(routed.route.error_message.find("hexadecimal") != std::string::npos);
  }
  const RoutedTarget good = route_target("GET", "/v1/entries?limit=3");
  CHECK(good.route.error_status == 0);
  CHECK(good.route.id == RouteId::list);
  CHECK(good.parameters.at("limit") == "3");
}

TEST_CASE("server::route_target does not turn '+' in an entry key path into a space") {
  // A '+' in a key is invalid; it must be reported as itself, not as a space.
  const std::string key = std::string(63, 'a') + "+";
  const RoutedTarget routed = route_target("GET", "/v1/entries/" + key);
  CHECK(routed.path == "/v1/entries/" + key);
  CHECK(routed.route.key == key);
  CHECK(routed.route.error_code == "invalid_key");
}

TEST_CASE("server::route_target routes a bundle's GET and HEAD as the route table does") {
  // route_target takes GET/HEAD /v1/entries/<key> without walking the table;
  // its answer must be the table's, field by field, and near misses must
  // still get the table's answers (400 invalid_key, 405, the query kept).
  const std::string hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  const std::vector<std::string> targets = {
      "/v1/entries/" + hex, "/v1/entries/" + k_route_key, "/v1/entries/" + std::string(64, '0'),
      "/v1/entries/" + std::string(64, 'A'), "/v1/entries/" + hex.substr(1), "/v1/entries/" + hex + "0",
      "/v1/entries/" + hex + "/signatures", "/v1/entries/%61" + std::string(63, 'a'), "/v1/entries/" + hex + "?x=1"};
  for (const char* method : {"GET", "HEAD", "PUT", "POST", "DELETE"}) {
    for (const std::string& target : targets) {
      CAPTURE(method);
      CAPTURE(target);
      const RoutedTarget routed = route_target(method, target);
      auto split = split_target(target);
      REQUIRE(split);
      const Route expected = match_route(method, split->path);
      CHECK(routed.path == split->path);
      CHECK(routed.parameters == split->parameters);
      CHECK(routed.route.id == expected.id);
      CHECK(routed.route.key == expected.key);
      CHECK(routed.route.resource == expected.resource);
      CHECK(routed.route.lease_id == expected.lease_id);
      CHECK(routed.route.scope == expected.scope);
      CHECK(routed.route.body == expected.body);
      CHECK(routed.route.error_status == expected.error_status);
      CHECK(routed.route.error_code == expected.error_code);
      CHECK(routed.route.error_message == expected.error_message);
      CHECK(routed.route.allow == expected.allow);
    }
  }
  const RoutedTarget hit = route_target("GET", "/v1/entries/" + hex);
  CHECK(hit.route.id == RouteId::entry_read);
  CHECK(hit.route.key == hex);
  CHECK(hit.route.error_status == 0);
}

TEST_CASE("server::error_response quotes a decoded path that is not UTF-8 without throwing") {
  // GET /%ff: the 404 message quotes the decoded path, byte 0xFF (found by fuzz_server_request).
  const auto routed = route_target("GET", "/%ff");
  REQUIRE(routed.route.error_status == 404);
  ApiResponse response;
  REQUIRE_NOTHROW(response = error_response(routed.route.error_status, routed.route.error_code,
                                            routed.route.error_message));
  CHECK(response.status == 404);
  CHECK(response.body.find("\"error\":\"not_found\"") != std::string::npos);
  CHECK(response.body.find("/\xEF\xBF\xBD") != std::string::npos);  // U+FFFD replaces the byte
}

TEST_CASE("server::match_route takes the lease id from /v1/leases/{key}/{id} and refuses a malformed one") {
  auto route = match_route("PUT", "/v1/leases/" + k_route_key + "/00ff");
  CHECK(route.error_status == 0);
  CHECK(route.key == k_route_key);
  CHECK(route.lease_id == "00ff");
  for (const std::string& id : std::vector<std::string>{"", "ABCD", "00ff/x", std::string(65, 'a')}) {
    auto bad = match_route("DELETE", "/v1/leases/" + k_route_key + "/" + id);
    CHECK_MESSAGE(bad.error_status == 400, id);
    CHECK(bad.error_code == "invalid_lease");
  }
  CHECK(match_route("GET", "/v1/leases/" + k_route_key).error_status == 405);
  CHECK(match_route("GET", "/v1/leases/" + k_route_key).allow == "POST");
  CHECK(match_route("POST", "/v1/leases/" + k_route_key + "/00ff").allow == "PUT, DELETE");
  CHECK(match_route("POST", "/v1/leases/nothex").error_code == "invalid_key");
}
