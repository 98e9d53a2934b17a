// Internal scenario helpers working on nlohmann::json.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/environment.hpp"
#include "opcache/scenario.hpp"
#include "store/scenario_detect.hpp"

namespace opcache::store {

using base::EnvLookup;

/// The device mode implied by RANK_SIZE / LOCAL_WORLD_SIZE (> 1 means multi).
/// A variable that is set but not a positive integer is a `usage` error.
Result<DeviceMode> device_mode_from_environment(const EnvLookup& env);

/// The hashed JSON object of a scenario.
nlohmann::json scenario_to_json(const Scenario& scenario);

/// How a parser treats a `toolchain` or `soc` given as "auto" or omitted.
struct AutoResolution {
  enum class Mode {
    exact,   ///< as written: "auto" is a literal value, an omitted field a `usage` error (stored scenarios)
    keep,    ///< an omitted field becomes "auto"; nothing is detected (opcache::AutoFields::keep)
    detect,  ///< both are detected (opcache::AutoFields::detect, store/scenario_detect)
  };
  Mode mode = Mode::exact;
  /// For Mode::detect: makes the detection context; called at most once (an
  /// explicit toolchain is checked against the install, which costs reading
  /// at most two version files).
  std::function<DetectContext()> context;
  /// When not null, receives every input of the scenario (explain_scenario):
  /// device, phase, toolchain (and, not keyed, the installed toolchain when
  /// an explicit one differs), soc, each extra, then the driver (not keyed).
  std::vector<ScenarioInput>* inputs = nullptr;
  /// For Mode::detect: receives each note, a line for the user that is not
  /// an error (an explicit toolchain that differs from the install's;
  /// store/scenario_detect explicit_toolchain_note()). Empty: notes are dropped.
  std::function<void(const std::string& message)> note;
};

/// A note sink that prints "opcache: <message>" on stderr the first time
/// this process gives that message, and drops it after. Thread-safe.
void note_once_on_stderr(const std::string& message);

/// Validates and converts a JSON object exactly as written (Mode::exact: a
/// stored manifest's scenario); see parse_scenario_json().
Result<Scenario> scenario_from_json(const nlohmann::json& value, const std::string& origin, const EnvLookup& env);

/// scenario_from_json() with `auto` resolved as `resolution` says.
Result<Scenario> scenario_from_json(const nlohmann::json& value, const std::string& origin, const EnvLookup& env,
                                    const AutoResolution& resolution);

/// Spec-form parser with an injectable environment, fields exactly as written (Mode::exact).
Result<Scenario> parse_scenario_spec(std::string_view spec, const EnvLookup& env);

/// parse_scenario_spec() with `auto` resolved as `resolution` says.
Result<Scenario> parse_scenario_spec(std::string_view spec, const EnvLookup& env, const AutoResolution& resolution);

/// An AutoResolution for the public opcache::AutoFields (detect: with
/// default_detect_context(), notes to note_once_on_stderr()).
AutoResolution auto_resolution(AutoFields auto_fields, std::vector<ScenarioInput>* inputs = nullptr);

}  // namespace opcache::store
