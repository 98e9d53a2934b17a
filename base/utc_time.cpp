#include "base/utc_time.hpp"

#include <ctime>

namespace opcache::base {

std::string utc_text(std::int64_t unix_ms, const char* format) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm parts{};
  ::gmtime_r(&seconds, &parts);
  char text[64];
  const std::size_t length = std::strftime(text, sizeof text, format, &parts);
  return std::string(text, length);
}

}  // namespace opcache::base
