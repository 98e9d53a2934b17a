#include "tests/support/bundle_inputs.hpp"

#include <doctest/doctest.h>

#include <optional>

#include "store/scenario.hpp"

namespace opcache::test {

nlohmann::json scenario_json(const std::string& spec) {
  auto no_env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
  auto scenario = store::parse_scenario_spec(spec, no_env);
  REQUIRE_MESSAGE(scenario.ok(), (scenario.ok() ? "" : scenario.error().message()));
  return store::scenario_to_json(*scenario);
}

store::BundleInput input_for(const KernelTriple& kernel, const std::string& scenario_spec, std::int64_t build_ms) {
  store::BundleInput input;
  input.descriptor = nlohmann::json::parse(kernel.descriptor_json);
  input.scenario = scenario_json(scenario_spec);
  for (const auto& file : kernel.files()) {
    input.members.push_back(store::MemberSource{file.filename().string(), file, ""});
  }
  input.build_ms = build_ms;
  return input;
}

}  // namespace opcache::test
