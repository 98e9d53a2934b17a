#include "store/scenario.hpp"

#include <cstdio>
#include <cstdlib>
#include <set>

#include "base/canonical_json.hpp"
#include "base/json_parse.hpp"
#include "base/mutex.hpp"
#include "base/try.hpp"
#include "base/utf8.hpp"
#include "base/value_parse.hpp"

namespace opcache {

namespace {

using json = nlohmann::json;
using base::EnvLookup;

constexpr const char* k_allowed_fields = "device, phase, toolchain, soc, extra.KEY";

// The fields of a scenario before validation, whichever form they came from.
struct RawScenario {
  std::optional<std::string> device;
  std::optional<std::string> phase;
  std::optional<std::string> toolchain;
  std::optional<std::string> soc;
  std::map<std::string, std::string> extra;
};

bool is_extra_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

Status check_text_value(const std::string& origin, const std::string& field, const std::string& value) {
  if (value.size() > 256) {
    return Error::usage(origin + ": " + field + " is longer than 256 bytes");
  }
  if (!base::is_valid_utf8(value)) {
    return Error::usage(origin + ": " + field + " is not valid UTF-8");
  }
  for (char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Error::usage(origin + ": " + field + " contains a control character");
    }
  }
  return {};
}

Status check_extra_key(const std::string& origin, const std::string& key) {
  if (key.empty() || key.size() > 64) {
    return Error::usage(origin + ": extra key \"" + key + "\" must be 1 to 64 characters");
  }
  for (char c : key) {
    if (!is_extra_key_char(c)) {
      return Error::usage(origin + ": extra key \"" + key + "\" may only use letters, digits, '_', '-' and '.'");
    }
  }
  return {};
}

Result<std::string> required_text(const std::optional<std::string>& value, const std::string& origin,
                                  const std::string& field, const char* example) {
  if (!value) {
    return Error::usage(origin + ": missing scenario field \"" + field + "\" (e.g. " + field + "=" + example +
                        "); required fields: phase, toolchain, soc");
  }
  if (value->empty()) {
    return Error::usage(origin + ": scenario field \"" + field + "\" must not be empty (e.g. " + field + "=" +
                        example + ")");
  }
  OPCACHE_TRY(check_text_value(origin, field, *value));
  return *value;
}

// "auto", or omitted where omitted means auto.
bool wants_detection(const std::optional<std::string>& value, store::AutoResolution::Mode mode) {
  if (mode == store::AutoResolution::Mode::exact) {
    return false;
  }
  return !value || *value == "auto";
}

// The messages said already by note_once_on_stderr.
class SaidNotes {
 public:
  // Whether `message` is said for the first time (and remembers it).
  bool first_time(const std::string& message) {
    base::MutexLock lock(m_mutex);
    return m_said.insert(message).second;
  }

 private:
  base::Mutex m_mutex;
  std::set<std::string> m_said GUARDED_BY(m_mutex);
};

// An explicit toolchain under detection: the key keeps it, and a note (and,
// for --explain, a not-keyed input) says when the install names another.
void note_explicit_toolchain(const std::string& toolchain, const store::DetectContext& context,
                             const store::AutoResolution& resolution, std::vector<ScenarioInput>* inputs) {
  auto installed = store::check_explicit_toolchain(context, toolchain);
  if (!installed) {
    return;
  }
  if (resolution.note) {
    resolution.note(store::explicit_toolchain_note(toolchain, *installed));
  }
  if (inputs != nullptr) {
    inputs->push_back(std::move(*installed));
  }
}

// Fills the toolchain and soc given as auto, and the detected extras, from
// the environment, and checks an explicit toolchain against the install.
// Both fields are tried so that one message names all that is missing.
Status detect_fields(RawScenario& raw, const std::string& origin, const store::AutoResolution& resolution,
                     std::vector<ScenarioInput>* inputs) {
  const bool toolchain = wants_detection(raw.toolchain, resolution.mode);
  const bool soc = wants_detection(raw.soc, resolution.mode);
  if (resolution.mode == store::AutoResolution::Mode::exact) {
    return {};
  }
  if (resolution.mode == store::AutoResolution::Mode::keep) {
    if (toolchain) raw.toolchain = "auto";
    if (soc) raw.soc = "auto";
    return {};
  }
  const store::DetectContext context = resolution.context ? resolution.context() : store::default_detect_context();
  std::vector<std::string> failures;
  if (soc) {
    auto detected = store::detect_soc(context, inputs);
    if (detected) {
      raw.soc = *detected;
    } else {
      failures.push_back(detected.error().message());
    }
  } else if (inputs != nullptr) {
    inputs->push_back({"soc", origin, *raw.soc, true});
  }
  if (toolchain) {
    if (raw.soc) {
      auto detected = store::detect_toolchain(context, *raw.soc, raw.extra, inputs);
      if (detected) {
        raw.toolchain = detected->toolchain;
        raw.extra.insert(detected->extra.begin(), detected->extra.end());
      } else {
        failures.push_back(detected.error().message());
      }
    } else if (auto install = store::find_cann_install(context.env, context.default_cann_root); !install) {
      failures.push_back(install.error().message());  // the banks need the chip; the install can still be missing
    }
  } else {
    if (inputs != nullptr) {
      inputs->push_back({"toolchain", origin, *raw.toolchain, true});
    }
    note_explicit_toolchain(*raw.toolchain, context, resolution, inputs);
  }
  if (!failures.empty()) {
    std::string message = origin + ": ";
    for (std::size_t i = 0; i < failures.size(); ++i) {
      message += (i == 0 ? "" : "; and ") + failures[i];
    }
    return Error::usage(message);
  }
  return {};
}

Result<Scenario> build_scenario(RawScenario raw, const std::string& origin, const EnvLookup& env,
                                const store::AutoResolution& resolution) {
  Scenario scenario;
  std::vector<ScenarioInput>* inputs = resolution.inputs;
  if (!raw.device) {
    OPCACHE_TRY_ASSIGN(scenario.device_mode, store::device_mode_from_environment(env));
    if (inputs != nullptr) {
      inputs->push_back({"device_mode", "$RANK_SIZE / $LOCAL_WORLD_SIZE (single when unset or 1)",
                         to_string(scenario.device_mode), true});
    }
  } else if (*raw.device == "single") {
    scenario.device_mode = DeviceMode::single;
  } else if (*raw.device == "multi") {
    scenario.device_mode = DeviceMode::multi;
  } else {
    return Error::usage(origin + ": device must be \"single\" or \"multi\", not \"" + *raw.device + "\"");
  }
  if (raw.device && inputs != nullptr) {
    inputs->push_back({"device_mode", origin, *raw.device, true});
  }
  if (!raw.phase) {
    return Error::usage(origin + ": missing scenario field \"phase\" (allowed: train, infer)");
  }
  if (*raw.phase == "train") {
    scenario.phase = Phase::train;
  } else if (*raw.phase == "infer") {
    scenario.phase = Phase::infer;
  } else {
    return Error::usage(origin + ": phase must be \"train\" or \"infer\", not \"" + *raw.phase + "\"");
  }
  if (inputs != nullptr) {
    inputs->push_back({"phase", origin, *raw.phase, true});
  }
  const auto given_extra = raw.extra;
  for (const auto& [key, value] : given_extra) {
    OPCACHE_TRY(check_extra_key(origin, key));
  }
  OPCACHE_TRY(detect_fields(raw, origin, resolution, inputs));
  if (inputs != nullptr) {
    // A detected entry that an explicit extra replaced is not an input (the explicit one is added below).
    std::erase_if(*inputs, [&](const ScenarioInput& input) {
      return input.name.starts_with("extra.") && given_extra.count(input.name.substr(6)) != 0;
    });
  }
  OPCACHE_TRY_ASSIGN(scenario.toolchain, required_text(raw.toolchain, origin, "toolchain", "8.0.RC2"));
  OPCACHE_TRY_ASSIGN(scenario.soc, required_text(raw.soc, origin, "soc", "Ascend910B1"));
  for (const auto& [key, value] : raw.extra) {
    OPCACHE_TRY(check_extra_key(origin, key));
    OPCACHE_TRY(check_text_value(origin, "extra." + key, value));
  }
  scenario.extra = std::move(raw.extra);
  if (inputs != nullptr) {
    for (const auto& [key, value] : given_extra) {
      inputs->push_back({"extra." + key, origin, value, true});
    }
  }
  return scenario;
}

Status assign_once(std::optional<std::string>& slot, const std::string& field, std::string value,
                   const std::string& origin) {
  if (slot) {
    return Error::usage(origin + ": scenario field \"" + field + "\" is given twice");
  }
  slot = std::move(value);
  return {};
}

}  // namespace

const char* to_string(DeviceMode mode) noexcept { return mode == DeviceMode::multi ? "multi" : "single"; }
const char* to_string(Phase phase) noexcept { return phase == Phase::train ? "train" : "infer"; }

ListFilter scenario_filter(const Scenario& scenario) {
  ListFilter filter;
  filter.device_mode = to_string(scenario.device_mode);
  filter.phase = to_string(scenario.phase);
  filter.toolchain = scenario.toolchain;
  filter.soc = scenario.soc;
  return filter;
}

namespace store {

Result<DeviceMode> device_mode_from_environment(const EnvLookup& env) {
  for (const char* name : {"RANK_SIZE", "LOCAL_WORLD_SIZE"}) {
    auto value = env(name);
    if (!value || value->empty()) {
      continue;
    }
    auto count = base::parse_integer(*value, 1);
    if (!count) {
      return Error::usage(std::string("environment variable ") + name + "=\"" + *value +
                          "\" is not a positive integer (it decides device=single|multi when --scenario has no "
                          "device; set device= explicitly or fix the variable)");
    }
    if (*count > 1) {
      return DeviceMode::multi;
    }
  }
  return DeviceMode::single;
}

json scenario_to_json(const Scenario& scenario) {
  json value = {{"device_mode", to_string(scenario.device_mode)},
                {"phase", to_string(scenario.phase)},
                {"toolchain", scenario.toolchain},
                {"soc", scenario.soc}};
  if (!scenario.extra.empty()) {
    value["extra"] = scenario.extra;
  }
  return value;
}

Result<Scenario> scenario_from_json(const json& value, const std::string& origin, const EnvLookup& env) {
  return scenario_from_json(value, origin, env, AutoResolution{});
}

Result<Scenario> scenario_from_json(const json& value, const std::string& origin, const EnvLookup& env,
                                    const AutoResolution& resolution) {
  if (!value.is_object()) {
    return Error::usage(origin + ": a scenario must be a JSON object");
  }
  RawScenario raw;
  for (const auto& [name, field] : value.items()) {
    if (name == "extra") {
      if (!field.is_object()) {
        return Error::usage(origin + ": scenario field \"extra\" must be an object of strings");
      }
      for (const auto& [key, extra_value] : field.items()) {
        if (!extra_value.is_string()) {
          return Error::usage(origin + ": scenario field \"extra." + key + "\" must be a string");
        }
        raw.extra[key] = extra_value.get<std::string>();
      }
      continue;
    }
    std::optional<std::string>* slot = name == "device_mode" ? &raw.device
                                       : name == "phase"      ? &raw.phase
                                       : name == "toolchain"  ? &raw.toolchain
                                       : name == "soc"        ? &raw.soc
                                                              : nullptr;
    if (slot == nullptr) {
      return Error::usage(origin + ": unknown scenario field \"" + name +
                          "\" (allowed: device_mode, phase, toolchain, soc, extra)");
    }
    if (!field.is_string()) {
      return Error::usage(origin + ": scenario field \"" + name + "\" must be a string");
    }
    *slot = field.get<std::string>();
  }
  return build_scenario(std::move(raw), origin, env, resolution);
}

Result<Scenario> parse_scenario_spec(std::string_view spec, const EnvLookup& env) {
  return parse_scenario_spec(spec, env, AutoResolution{});
}

void note_once_on_stderr(const std::string& message) {
  static SaidNotes said;
  if (said.first_time(message)) {
    std::fprintf(stderr, "opcache: %s\n", message.c_str());
  }
}

AutoResolution auto_resolution(AutoFields auto_fields, std::vector<ScenarioInput>* inputs) {
  AutoResolution resolution;
  resolution.inputs = inputs;
  switch (auto_fields) {
    case AutoFields::detect:
      resolution.mode = AutoResolution::Mode::detect;
      resolution.context = default_detect_context;
      resolution.note = note_once_on_stderr;
      break;
    case AutoFields::keep:
      resolution.mode = AutoResolution::Mode::keep;
      break;
  }
  return resolution;
}

Result<Scenario> parse_scenario_spec(std::string_view spec, const EnvLookup& env, const AutoResolution& resolution) {
  const std::string origin = "--scenario";
  RawScenario raw;
  std::size_t start = 0;
  while (start <= spec.size()) {
    std::size_t end = spec.find(',', start);
    std::string_view item = spec.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    start = end == std::string_view::npos ? spec.size() + 1 : end + 1;
    if (item.empty()) {
      if (spec.empty()) {
        break;
      }
      return Error::usage(origin + ": empty item in \"" + std::string(spec) + "\" (write FIELD=VALUE,FIELD=VALUE)");
    }
    std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) {
      return Error::usage(origin + ": \"" + std::string(item) + "\" is not FIELD=VALUE (fields: " +
                          k_allowed_fields + ")");
    }
    std::string field(item.substr(0, equals));
    std::string value(item.substr(equals + 1));
    if (field == "device" || field == "device_mode") {
      OPCACHE_TRY(assign_once(raw.device, "device", std::move(value), origin));
    } else if (field == "phase") {
      OPCACHE_TRY(assign_once(raw.phase, field, std::move(value), origin));
    } else if (field == "toolchain") {
      OPCACHE_TRY(assign_once(raw.toolchain, field, std::move(value), origin));
    } else if (field == "soc") {
      OPCACHE_TRY(assign_once(raw.soc, field, std::move(value), origin));
    } else if (field.rfind("extra.", 0) == 0) {
      std::string key = field.substr(6);
      if (raw.extra.count(key) != 0) {
        return Error::usage(origin + ": scenario field \"" + field + "\" is given twice");
      }
      raw.extra[key] = std::move(value);
    } else {
      return Error::usage(origin + ": unknown scenario field \"" + field + "\" (allowed: " + k_allowed_fields + ")");
    }
  }
  return build_scenario(std::move(raw), origin, env, resolution);
}

}  // namespace store

Result<Scenario> parse_scenario_spec(std::string_view spec) { return parse_scenario_spec(spec, AutoFields::detect); }

Result<Scenario> parse_scenario_spec(std::string_view spec, AutoFields auto_fields) {
  return store::parse_scenario_spec(spec, base::process_environment(), store::auto_resolution(auto_fields));
}

Result<Scenario> parse_scenario_json(std::string_view json_text, const std::string& origin) {
  return parse_scenario_json(json_text, origin, AutoFields::detect);
}

Result<Scenario> parse_scenario_json(std::string_view json_text, const std::string& origin, AutoFields auto_fields) {
  OPCACHE_TRY_ASSIGN(json value, base::parse_json(json_text, origin));
  return store::scenario_from_json(value, origin, base::process_environment(), store::auto_resolution(auto_fields));
}

namespace {

bool is_json_form(std::string_view text) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '{';
}

}  // namespace

Result<Scenario> parse_scenario(std::string_view text) { return parse_scenario(text, AutoFields::detect); }

Result<Scenario> parse_scenario(std::string_view text, AutoFields auto_fields) {
  if (is_json_form(text)) {
    return parse_scenario_json(text, "scenario", auto_fields);
  }
  return parse_scenario_spec(text, auto_fields);
}

Result<ExplainedScenario> explain_scenario(std::string_view text, const std::string& origin) {
  ExplainedScenario explained;
  auto resolution = store::auto_resolution(AutoFields::detect, &explained.inputs);
  const auto env = base::process_environment();
  if (is_json_form(text)) {
    OPCACHE_TRY_ASSIGN(json value, base::parse_json(text, origin));
    OPCACHE_TRY_ASSIGN(explained.scenario, store::scenario_from_json(value, origin, env, resolution));
  } else {
    OPCACHE_TRY_ASSIGN(explained.scenario, store::parse_scenario_spec(text, env, resolution));
  }
  explained.inputs.push_back(store::driver_input(store::default_detect_context()));
  return explained;
}

std::string scenario_canonical_json(const Scenario& scenario) {
  // Validated scenarios are valid UTF-8 strings only, so canonicalization cannot fail.
  return base::canonical_json(store::scenario_to_json(scenario)).value();
}

std::string scenario_summary(const Scenario& scenario) {
  std::string summary = std::string(to_string(scenario.device_mode)) + "/" + to_string(scenario.phase) + "/" +
                        scenario.toolchain + "/" + scenario.soc;
  for (const auto& [key, value] : scenario.extra) {
    summary += "+" + key + "=" + value;
  }
  return summary;
}

}  // namespace opcache
