// An answered request as the usage statistics see it (server/usage_stats),
// built the one way the tests of the statistics need it.
#pragma once

#include <string_view>

#include "server/usage_stats.hpp"

namespace opcache::test {

/// An answered request of `route`, before the fields a caller adds (facts,
/// bytes, frames).
inline server::UsageEvent usage_event(server::RouteId route, std::string_view method, int status,
                                      std::string_view key, std::string_view token, std::string_view client) {
  server::UsageEvent event;
  event.route = route;
  event.method = method;
  event.status = status;
  event.key = key;
  event.token_name = token;
  event.client = client;
  return event;
}

}  // namespace opcache::test
