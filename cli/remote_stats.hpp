// `opcache stats --remote URL`: a team server's statistics (what its
// dashboard at /ui/ shows) in the terminal, in the style of `opcache stats`.
#pragma once

#include <string>
#include <vector>

#include "cli/context.hpp"

namespace opcache::cli {

/// The windows of /v1/stats/summary.
inline const std::vector<std::string> k_stats_windows = {"hour", "day", "30d"};

/// Prints the summary of `window` of the first remote given with --remote
/// (an http(s) opcache server), its top op types and the top five groups of
/// "what to pre-build next" (GET /v1/stats/summary and /v1/stats/misses);
/// with --json, {"summary": …, "misses": …} as the server sent them.
/// Returns the exit code: 2 for a URL that is no server, 4 when the server
/// cannot be reached, refuses the token or has no /v1/stats.
int run_remote_stats(const Context& context, const std::string& window);

}  // namespace opcache::cli
