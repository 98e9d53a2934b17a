// A function of a shared object opened with dlopen, looked up by name: what
// the libraries loaded on first use (remote/curl_library, store/sqlite_library)
// resolve each of their functions with.
#pragma once

#include <dlfcn.h>

#include <string>

namespace opcache::base {

/// Looks `name` up in `library` (a dlopen handle) and stores it in `out`;
/// false, with `missing` set to `name` unless it already names an earlier
/// absent function, when the library does not define it.
template <class Function>
bool resolve_function(void* library, const char* name, Function& out, std::string& missing) {
  out = reinterpret_cast<Function>(dlsym(library, name));
  if (out == nullptr && missing.empty()) {
    missing = name;
  }
  return out != nullptr;
}

/// Whether the shared object `soname` is mapped into this process, whoever
/// loaded it; maps nothing itself.
inline bool is_mapped(const char* soname) noexcept { return dlopen(soname, RTLD_NOLOAD | RTLD_LAZY) != nullptr; }

}  // namespace opcache::base
