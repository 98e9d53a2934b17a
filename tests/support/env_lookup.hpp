// Environments for code that reads variables through base::EnvLookup, so a
// test decides exactly what the code under test sees.
#pragma once

#include <map>
#include <string>

#include "base/environment.hpp"

namespace opcache::test {

/// An environment holding exactly `values`: the lookup returns the value of a
/// name in `values`, and nullopt for every other name (the process's own
/// environment is never consulted). The lookup owns its copy of `values`.
base::EnvLookup env_of(std::map<std::string, std::string> values);

}  // namespace opcache::test
