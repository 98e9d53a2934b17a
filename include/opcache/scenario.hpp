// opcache — the scenario tag: which kind of run a kernel was compiled for.
// Kernels compiled for different scenarios never share a key.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "opcache/result.hpp"
#include "opcache/types.hpp"

namespace opcache {

/// Single-device or multi-device (distributed) run.
enum class DeviceMode { single, multi };

/// Training or inference.
enum class Phase { train, infer };

/// The scenario a kernel was compiled for. Hashed as the JSON object
/// {"device_mode","phase","toolchain","soc"[,"extra"]} (see docs/formats.md).
struct Scenario {
  DeviceMode device_mode = DeviceMode::single;
  Phase phase = Phase::infer;
  std::string toolchain;                     ///< compiler / CANN version, required, non-empty
  std::string soc;                           ///< chip, e.g. "Ascend910B1", required, non-empty
  std::map<std::string, std::string> extra;  ///< optional free-form pairs, e.g. python version

  bool operator==(const Scenario& other) const = default;
};

const char* to_string(DeviceMode mode) noexcept;
const char* to_string(Phase phase) noexcept;

/// Parses the CLI form "device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1[,extra.KEY=VALUE]".
/// `device` (alias `device_mode`) may be omitted: then RANK_SIZE or
/// LOCAL_WORLD_SIZE greater than 1 in the environment means multi, else single.
/// A missing, unknown or invalid field is a `usage` error that names the field
/// and the allowed values. Values cannot contain ','; use JSON for those.
Result<Scenario> parse_scenario_spec(std::string_view spec);

/// Parses the JSON form {"device_mode":…,"phase":…,"toolchain":…,"soc":…,"extra":{…}}
/// with the same rules (a missing device_mode is taken from the environment).
/// `origin` names the source in error messages (a file name, "--scenario").
Result<Scenario> parse_scenario_json(std::string_view json_text, const std::string& origin = "scenario");

/// Either form: text starting with '{' is JSON, anything else is the spec form.
Result<Scenario> parse_scenario(std::string_view text);

/// The canonical JSON (RFC 8785) of the scenario: the exact bytes that are hashed.
std::string scenario_canonical_json(const Scenario& scenario);

/// A short human form, "multi/train/8.0.RC2/Ascend910B1[+extra]".
std::string scenario_summary(const Scenario& scenario);

/// A listing filter matching the entries of `scenario` (device mode, phase,
/// toolchain, soc; `extra` is not a listing field), any op type.
ListFilter scenario_filter(const Scenario& scenario);

}  // namespace opcache
