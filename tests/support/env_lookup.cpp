#include "tests/support/env_lookup.hpp"

#include <optional>
#include <utility>

namespace opcache::test {

base::EnvLookup env_of(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char* name) -> std::optional<std::string> {
    auto it = values.find(name);
    return it == values.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

}  // namespace opcache::test
