#include "opcache/result.hpp"

namespace opcache {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::usage: return "usage";
    case ErrorCode::corrupt: return "corrupt";
    case ErrorCode::remote: return "remote";
    case ErrorCode::io: return "io";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::build_failed: return "build_failed";
    case ErrorCode::internal: return "internal";
    case ErrorCode::untrusted: return "untrusted";
  }
  return "unknown";
}

}  // namespace opcache
