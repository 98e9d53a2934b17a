// Fuzz target: JSON input, canonicalization and key derivation
// (base/json_parse, base/canonical_json, store/descriptor,
// store/volatile_fields, store/scenario, store/key, the public
// opcache::derive_key). The bytes are read as a JSON document; when it
// parses, it is canonicalized (and the canonical text must parse back to the
// same canonical text: JCS is a fixed point), normalized as a descriptor and
// keyed, read as a scenario, and its "descriptor"/"scenario" members keyed the
// way a manifest's are. The bytes are also read as a scenario spec.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "base/canonical_json.hpp"
#include "base/json_parse.hpp"
#include "opcache/key.hpp"
#include "opcache/scenario.hpp"
#include "store/descriptor.hpp"
#include "store/key.hpp"
#include "store/scenario.hpp"
#include "store/volatile_fields.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

using namespace opcache;
using nlohmann::json;

std::optional<std::string> no_environment(const char*) { return std::nullopt; }

const Scenario& sample_scenario() {
  static const Scenario scenario{DeviceMode::multi, Phase::train, "8.0.RC2", "Ascend910B1", {{"python", "3.11"}}};
  return scenario;
}

// JCS(parse(JCS(v))) == JCS(v): canonical text must read back unchanged.
void check_canonical_fixed_point(const json& value) {
  auto canonical = base::canonical_json(value);
  if (!canonical) {
    return;
  }
  auto reparsed = base::parse_json(*canonical, "canonical text");
  auto again = reparsed ? base::canonical_json(*reparsed) : Result<std::string>(reparsed.error());
  if (!again || *again != *canonical) {
    std::fprintf(stderr, "canonical JSON is not a fixed point: %s\n", canonical->c_str());
    std::abort();
  }
}

void key_as_descriptor(const json& value) {
  static const auto filter = store::VolatileFieldFilter::compile(store::VolatileFieldFilter::default_patterns());
  auto descriptor = store::normalize_descriptor(value, *filter, "descriptor");
  if (!descriptor) {
    return;
  }
  (void)store::derive_key(descriptor->normalized, store::scenario_to_json(sample_scenario()));
  (void)store::stored_descriptor(descriptor->normalized, "manifest");
}

void key_as_manifest_fields(const json& value) {
  if (!value.is_object() || !value.contains("descriptor") || !value.contains("scenario")) {
    return;
  }
  if (auto key = store::derive_key(value["descriptor"], value["scenario"])) {
    (void)store::check_key(*key);
  }
  (void)store::scenario_from_json(value["scenario"], "scenario", no_environment);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = fuzz::as_text(data, size);
  (void)store::parse_scenario_spec(text, no_environment);
  auto parsed = base::parse_json(text, "fuzz input");
  if (!parsed) {
    return 0;
  }
  check_canonical_fixed_point(*parsed);
  key_as_descriptor(*parsed);
  key_as_manifest_fields(*parsed);
  if (auto scenario = store::scenario_from_json(*parsed, "scenario", no_environment)) {
    (void)scenario_canonical_json(*scenario);
  }
  (void)derive_key(text, sample_scenario(), std::nullopt);
  (void)derive_key(text, sample_scenario(), std::string("+**.name,attrs.*.value"));
  return 0;
}
