// The process environment behind an injectable lookup, so tests and callers
// can supply their own variables without setenv.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace opcache::base {

/// Looks up an environment variable: its value, or std::nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

/// The process environment (getenv). Safe to call from any thread as long as
/// nobody calls setenv meanwhile.
EnvLookup process_environment();

}  // namespace opcache::base
