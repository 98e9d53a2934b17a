// The client side of a team server's statistics (docs/protocol.md
// "Statistics"): the JSON documents behind the dashboard, read for
// `opcache stats --remote`. Implemented by the http(s) remote
// (RemoteStore::statistics()); s3:// and file:// have no server to ask.
#pragma once

#include <string>

#include "opcache/result.hpp"

namespace opcache::remote {

/// The oldest opcache server that has /v1/stats, for messages.
inline constexpr const char* k_first_stats_revision = "HTTP API v1 revision 4";

/// Read-only statistics of one server. Thread-safe. Each call returns the
/// response body as the server sent it, once checked to be a JSON object.
/// Errors: `remote` when the server has no /v1/stats (404: an opcache serve
/// older than k_first_stats_revision; the message says so), for 401/403
/// (naming the token settings), other statuses and malformed bodies;
/// `remote` or `timeout` for transport failures.
class ServerStatistics {
 public:
  virtual ~ServerStatistics() = default;

  /// GET /v1/stats/summary?window=WINDOW ("hour", "day" or "30d").
  virtual Result<std::string> stats_summary(const std::string& window) = 0;
  /// GET /v1/stats/misses?limit=LIMIT: the most requested missing keys, grouped.
  virtual Result<std::string> stats_misses(int limit) = 0;
};

}  // namespace opcache::remote
