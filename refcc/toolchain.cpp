#include "refcc/toolchain.hpp"

#include <sys/utsname.h>

#include "opcache/version.hpp"
#include "refcc/codegen.hpp"
#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

std::string toolchain_string(const Compiler& compiler) {
  std::string identity = compiler.identity;
  for (char& c : identity) {
    // Keeps the string usable in the spec form (",", "=") and free of control characters.
    if (c == ',' || c == '=' || static_cast<unsigned char>(c) < 0x20) {
      c = ' ';
    }
  }
  std::string text =
      std::string("refcc-") + k_version_string + ".cg" + std::to_string(k_codegen_version) + "+" + identity;
  return text.substr(0, 256);
}

std::string default_soc() {
  utsname name{};
  if (::uname(&name) != 0) {
    return "generic";
  }
  return std::string("generic-") + name.machine;
}

Result<Scenario> resolve_scenario(const std::string& spec, const std::string& spec_file, const Compiler& compiler) {
  Scenario scenario;
  if (!spec.empty() && !spec_file.empty()) {
    return Error::usage("give --scenario or --scenario-file, not both");
  }
  // refcc's "auto" is its own C compiler and machine, not a CANN install:
  // AutoFields::keep leaves "auto" (and an omitted toolchain or soc, which
  // means auto) for the substitution below, and detects nothing.
  if (!spec.empty()) {
    OPCACHE_TRY_ASSIGN(scenario, parse_scenario(spec, AutoFields::keep));
  } else if (!spec_file.empty()) {
    OPCACHE_TRY_ASSIGN(auto text, base::read_file(spec_file));
    OPCACHE_TRY_ASSIGN(scenario, parse_scenario_json(text, spec_file, AutoFields::keep));
  } else {
    // No device given: the spec form takes it from RANK_SIZE / LOCAL_WORLD_SIZE.
    OPCACHE_TRY_ASSIGN(scenario, parse_scenario_spec("phase=infer,toolchain=auto,soc=auto", AutoFields::keep));
  }
  if (scenario.toolchain == "auto") {
    scenario.toolchain = toolchain_string(compiler);
  }
  if (scenario.soc == "auto") {
    scenario.soc = default_soc();
  }
  return scenario;
}

}  // namespace opcache::refcc
