// Internal scenario helpers working on nlohmann::json.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/environment.hpp"
#include "opcache/scenario.hpp"

namespace opcache::store {

using base::EnvLookup;

/// The device mode implied by RANK_SIZE / LOCAL_WORLD_SIZE (> 1 means multi).
/// A variable that is set but not a positive integer is a `usage` error.
Result<DeviceMode> device_mode_from_environment(const EnvLookup& env);

/// The hashed JSON object of a scenario.
nlohmann::json scenario_to_json(const Scenario& scenario);

/// Validates and converts a JSON object; see parse_scenario_json().
Result<Scenario> scenario_from_json(const nlohmann::json& value, const std::string& origin, const EnvLookup& env);

/// Spec-form parser with an injectable environment.
Result<Scenario> parse_scenario_spec(std::string_view spec, const EnvLookup& env);

}  // namespace opcache::store
