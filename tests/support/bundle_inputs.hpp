// What the store-level tests hand to the bundle writer and LocalStore::put:
// scenarios in their JSON form and bundle inputs made of real kernels.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "store/bundle_writer.hpp"
#include "tests/support/kernels.hpp"

namespace opcache::test {

/// The JSON form (store::scenario_to_json) of the scenario `spec`, parsed
/// with an empty environment (no RANK_SIZE…), so the same on every machine.
/// REQUIREs that `spec` parses.
nlohmann::json scenario_json(const std::string& spec);

/// The input that stores `kernel`: its descriptor, scenario_json(scenario_spec),
/// its three files as members (named by file name, roles from the
/// extensions), `build_ms`, and no creation time (the writer's now).
store::BundleInput input_for(const KernelTriple& kernel, const std::string& scenario_spec = k_test_scenario,
                             std::int64_t build_ms = 0);

}  // namespace opcache::test
