// The one line a miss prints when `opcache explain` has something to say.
#pragma once

#include <string>

#include "cli/context.hpp"
#include "opcache/opcache.hpp"

namespace opcache::cli {

/// After a miss of `key`: when `store` holds other entries of `op_type`,
/// notes once on stderr that `opcache explain` with the same `arguments`
/// ("--desc and --scenario") lists how they differ. Costs one indexed query (at most two rows); says nothing when
/// there are none or the query fails.
void note_near_entries(const Context& context, Store& store, const std::string& op_type, const std::string& key,
                       const std::string& arguments);

}  // namespace opcache::cli
