// Unguessable tokens from OpenSSL's CSPRNG: lease ids, the request ids that
// make a retried lease request idempotent.
#pragma once

#include <cstddef>
#include <string>

namespace opcache::base {

/// `bytes` random bytes from OpenSSL's generator as 2×`bytes` lowercase hex
/// digits. Aborts the process when the generator fails (no safe token can
/// be made, and every caller needs one). Thread-safe.
std::string random_hex(std::size_t bytes);

}  // namespace opcache::base
