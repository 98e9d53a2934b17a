// libcurl, loaded when the first remote is used rather than when the process
// starts. libcurl and the libraries it needs (TLS, Kerberos, LDAP, SSH, IDN,
// …: 27 shared objects on Debian 12) cost more to map and relocate than a
// local cache hit costs in total, and a local hit never needs them.
//
// opcache is therefore not linked against libcurl. curl_library.cpp defines
// the libcurl functions opcache calls (with hidden visibility, so nothing is
// exported from libopcache.so); each forwards to the real function, resolved
// from `libcurl.so.N` (the soname found at build time) on first use. Code in
// remote/ calls libcurl as usual; `load_curl()` is where a missing libcurl
// becomes a clear error.
#pragma once

#include "opcache/result.hpp"

namespace opcache::remote {

/// Loads libcurl and resolves every function opcache uses, once per process
/// (thread-safe; later calls return the first outcome). A `usage` error names
/// the library and the loader's message when it is missing or lacks a
/// function. Until it succeeds, the forwarding functions fail like libcurl
/// does on allocation failure (nullptr, CURLE_FAILED_INIT).
Status load_curl();

/// True when libcurl is mapped into this process (by load_curl() or by
/// anything else). For tests and diagnostics.
bool curl_is_loaded() noexcept;

}  // namespace opcache::remote
