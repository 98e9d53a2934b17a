// refcc — the scenario refcc compiles for: by default
// "phase=infer,toolchain=refcc-<version>.cg<codegen>+<cc --version>,soc=generic-<machine>",
// so a new refcc, a changed code generator or a compiler upgrade changes every key.
#pragma once

#include <string>

#include "opcache/result.hpp"
#include "opcache/scenario.hpp"
#include "refcc/compile.hpp"

namespace opcache::refcc {

/// "refcc-0.1.0.cg1+cc (Debian 12.2.0-14) 12.2.0" (at most 256 bytes).
std::string toolchain_string(const Compiler& compiler);

/// "generic-<uname machine>", e.g. "generic-x86_64".
std::string default_soc();

/// The scenario: from `spec` (the --scenario text, spec or JSON form) or the
/// file `spec_file`, else the default above. A toolchain or soc given as
/// "auto", or omitted, is replaced by refcc's own (toolchain_string(),
/// default_soc()); no CANN detection happens (opcache::AutoFields::keep). The device mode, when not given,
/// comes from RANK_SIZE / LOCAL_WORLD_SIZE like everywhere in opcache.
Result<Scenario> resolve_scenario(const std::string& spec, const std::string& spec_file, const Compiler& compiler);

}  // namespace opcache::refcc
