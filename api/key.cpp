#include "opcache/key.hpp"

#include <utility>

#include "base/json_parse.hpp"
#include "base/try.hpp"
#include "store/descriptor.hpp"
#include "store/key.hpp"
#include "store/scenario.hpp"
#include "store/volatile_fields.hpp"

namespace opcache {

Result<std::string> derive_key(std::string_view descriptor_json, const Scenario& scenario,
                               const std::optional<std::string>& volatile_fields) {
  OPCACHE_TRY_ASSIGN(auto filter, store::VolatileFieldFilter::from_setting(volatile_fields));
  OPCACHE_TRY_ASSIGN(auto raw, base::parse_json(descriptor_json, "descriptor"));
  OPCACHE_TRY_ASSIGN(auto descriptor, store::normalize_descriptor(std::move(raw), filter, "descriptor"));
  return store::derive_key(descriptor.normalized, store::scenario_to_json(scenario));
}

}  // namespace opcache
