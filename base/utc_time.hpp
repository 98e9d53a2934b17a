// A moment as UTC text, in whatever strftime format the reader expects:
// RFC 3339 in manifests, "2026-11-24 07:00 UTC" in statistics, torchair's
// YYYYMMDDhhmmss directory stamps.
#pragma once

#include <cstdint>
#include <string>

namespace opcache::base {

/// `unix_ms` (milliseconds since the epoch, truncated to whole seconds) in
/// UTC, formatted by std::strftime with `format`; the text must fit in 63
/// characters (an empty string otherwise).
std::string utc_text(std::int64_t unix_ms, const char* format);

}  // namespace opcache::base
