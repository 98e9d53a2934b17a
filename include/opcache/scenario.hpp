// opcache — the scenario tag: which kind of run a kernel was compiled for.
// Kernels compiled for different scenarios never share a key.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

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

/// What a parser makes of a `toolchain` or `soc` given as "auto" or omitted.
enum class AutoFields {
  /// Detected from the environment the op compiler would see: the CANN
  /// install (toolchain, plus component versions, tuning banks and Python in
  /// `extra`) and `npu-smi info` (soc). See docs/formats.md, "Detected
  /// scenario fields (`auto`)". A failed detection is a `usage` error naming
  /// the field and what to set; nothing is guessed. An explicit toolchain is
  /// kept, and when the install names another version a note says so once
  /// per process on stderr ("opcache: note: toolchain=X is given explicitly…").
  detect,
  /// Left as the literal "auto" for a caller that gives it its own meaning
  /// (refcc substitutes its C compiler and machine). Nothing is detected.
  keep,
};

/// Parses the CLI form "device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1[,extra.KEY=VALUE]".
/// `device` (alias `device_mode`) may be omitted: then RANK_SIZE or
/// LOCAL_WORLD_SIZE greater than 1 in the environment means multi, else single.
/// `toolchain` and `soc` may be omitted or "auto": they are then detected
/// (AutoFields::detect; detections are remembered in `<cache root>/digests`
/// when the cache root from the environment is a directory of this user).
/// A missing, unknown or invalid field is a `usage` error that names the field
/// and the allowed values. Values cannot contain ','; use JSON for those.
Result<Scenario> parse_scenario_spec(std::string_view spec);

/// parse_scenario_spec() with the given meaning of "auto".
Result<Scenario> parse_scenario_spec(std::string_view spec, AutoFields auto_fields);

/// Parses the JSON form {"device_mode":…,"phase":…,"toolchain":…,"soc":…,"extra":{…}}
/// with the same rules (a missing device_mode is taken from the environment;
/// a missing or "auto" toolchain or soc is detected).
/// `origin` names the source in error messages (a file name, "--scenario").
Result<Scenario> parse_scenario_json(std::string_view json_text, const std::string& origin = "scenario");

/// parse_scenario_json() with the given meaning of "auto".
Result<Scenario> parse_scenario_json(std::string_view json_text, const std::string& origin, AutoFields auto_fields);

/// Either form: text starting with '{' is JSON, anything else is the spec form.
Result<Scenario> parse_scenario(std::string_view text);

/// parse_scenario() with the given meaning of "auto".
Result<Scenario> parse_scenario(std::string_view text, AutoFields auto_fields);

/// One input of a resolved scenario, for `opcache scenario --explain`.
struct ScenarioInput {
  std::string name;    ///< the scenario field it decides: "toolchain", "soc", "extra.cann.opp", … or "driver"
  std::string source;  ///< where it was read: "--scenario", a file, an environment variable, a command
  std::string value;   ///< the value, or the digest, as it enters the scenario
  bool keyed = true;   ///< false for information that deliberately does not enter the key (the driver version)
};

/// A scenario and the inputs it was resolved from.
struct ExplainedScenario {
  Scenario scenario;
  /// Every field of `scenario` (with, not keyed, "installed_toolchain" when an
  /// explicit toolchain differs from the install's), then the not-keyed driver version.
  std::vector<ScenarioInput> inputs;
};

/// parse_scenario() with AutoFields::detect that also reports every input:
/// each field given, each detected value with the file, variable or command
/// it came from, and the driver version (keyed = false; "not installed" when
/// absent). `origin` names a JSON source in messages. Same errors as
/// parse_scenario(). Thread-safe as long as nobody calls setenv meanwhile.
Result<ExplainedScenario> explain_scenario(std::string_view text, const std::string& origin = "scenario");

/// The canonical JSON (RFC 8785) of the scenario: the exact bytes that are hashed.
std::string scenario_canonical_json(const Scenario& scenario);

/// A short human form, "multi/train/8.0.RC2/Ascend910B1[+extra]".
std::string scenario_summary(const Scenario& scenario);

/// A listing filter matching the entries of `scenario` (device mode, phase,
/// toolchain, soc; `extra` is not a listing field), any op type.
ListFilter scenario_filter(const Scenario& scenario);

}  // namespace opcache
