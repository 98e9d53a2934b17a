// For the dashboard's "what to pre-build next": per missed group (an op type
// in a scenario), the scenario nearest to it in which the team does have
// kernels of that op type ("38 misses asked toolchain 8.0.RC3; the team has
// these kernels for 8.0.RC2"), so that an upgrade shows as one line.
#pragma once

#include <nlohmann/json.hpp>

#include "server/storage.hpp"

namespace opcache::server {

/// Adds "nearest" to each group of `misses` (the body of GET
/// /v1/stats/misses) whose op type and scenario are known: {"scenario",
/// "differences": [{"path","stored","wanted"}], "entries"} for the stored
/// scenario with the fewest differing fields (then the most entries), or
/// null when the storage holds no entry of the op type. Reads at most 1,000
/// listed entries per group from `storage` (the listing carries scenarios:
/// no bundle is opened); a storage error leaves the group without "nearest".
void add_nearest_variants(nlohmann::json& misses, Storage& storage);

}  // namespace opcache::server
