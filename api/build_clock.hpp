// How long a build took, as BuildResult::build_ms reports it (the library's
// get_or_build and Store::exec alike).
#pragma once

#include <chrono>
#include <cstdint>

namespace opcache::api {

/// Whole milliseconds of the steady clock since `since`.
inline std::int64_t milliseconds_since(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace opcache::api
