// The libcurl functions opcache uses, forwarded to libcurl loaded on demand
// (see curl_library.hpp). Each definition keeps libcurl's own declaration
// from <curl/curl.h> (the two variadic ones its symbol and calling
// convention: see below); the typecheck macros are off here so the names can
// be defined.
#define CURL_DISABLE_TYPECHECK 1
#include "remote/curl_library.hpp"

#include <curl/curl.h>
#include <dlfcn.h>

#include <cstdarg>
#include <mutex>
#include <string>
#include <type_traits>

#include "base/shared_object.hpp"

#ifndef OPCACHE_LIBCURL_SONAME
#define OPCACHE_LIBCURL_SONAME "libcurl.so.4"
#endif

#define OPCACHE_CURL_FORWARD __attribute__((visibility("hidden")))

namespace opcache::remote {
namespace {

// Every libcurl function opcache calls: X(member, name).
#define OPCACHE_CURL_FUNCTIONS(X)                                                                            \
  X(global_init, curl_global_init) X(easy_init, curl_easy_init) X(easy_cleanup, curl_easy_cleanup)          \
  X(easy_reset, curl_easy_reset) X(easy_perform, curl_easy_perform) X(easy_setopt, curl_easy_setopt)        \
  X(easy_getinfo, curl_easy_getinfo) X(easy_strerror, curl_easy_strerror) X(slist_append, curl_slist_append) \
  X(slist_free_all, curl_slist_free_all) X(url, curl_url) X(url_cleanup, curl_url_cleanup)                  \
  X(url_set, curl_url_set) X(url_get, curl_url_get) X(free, curl_free)

/// The resolved entry points; all null until load_curl() succeeds.
struct CurlFunctions {
#define OPCACHE_CURL_MEMBER(member, name) decltype(&::name) member = nullptr;
  OPCACHE_CURL_FUNCTIONS(OPCACHE_CURL_MEMBER)
#undef OPCACHE_CURL_MEMBER
};

CurlFunctions g_curl;

Status load_once() {
  void* library = dlopen(OPCACHE_LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    return Error::usage(std::string("remote caches need libcurl, which could not be loaded (") +
                        (reason ? reason : OPCACHE_LIBCURL_SONAME) +
                        "); install it (Debian: apt-get install libcurl4) or use the local cache only");
  }
  CurlFunctions functions;
  std::string missing;
  bool complete = true;
#define OPCACHE_CURL_RESOLVE(member, name) complete = base::resolve_function(library, #name, functions.member, missing) && complete;
  OPCACHE_CURL_FUNCTIONS(OPCACHE_CURL_RESOLVE)
#undef OPCACHE_CURL_RESOLVE
  if (!complete) {
    return Error::usage(std::string(OPCACHE_LIBCURL_SONAME) + " lacks " + missing +
                        " (libcurl 7.62 or newer is needed)");
  }
  g_curl = functions;
  return {};
}

/// load_curl() for the forwarding functions: true when the functions are
/// there. Decided once, so a forwarded call costs one check, not a Status copy.
bool loaded() noexcept {
  static const bool ok = static_cast<bool>(load_curl());
  return ok;
}

}  // namespace

Status load_curl() {
  static std::once_flag once;
  static Status outcome;
  std::call_once(once, [] { outcome = load_once(); });
  return outcome;
}

bool curl_is_loaded() noexcept { return base::is_mapped(OPCACHE_LIBCURL_SONAME); }

}  // namespace opcache::remote

using opcache::remote::g_curl;
using opcache::remote::loaded;

// libcurl's option and info arguments are one value whose type follows from
// the option's number range (<curl/curl.h>: CURLOPTTYPE_*, CURLINFO_*).
//
// The two variadic functions are defined under C++ names of their own, bound
// to libcurl's symbols by asm labels, with the option as the integer it is
// passed as: va_start after a parameter of an unscoped enum type (libcurl's
// CURLoption, CURLINFO) is undefined behaviour in C++, since an enum is not
// the type an argument without a parameter is promoted to (clang: -Wvarargs).
// The enums' underlying types are int-sized, so a caller that passes a
// CURLoption passes exactly that integer.
using CurlOptionValue = std::underlying_type_t<CURLoption>;
using CurlInfoValue = std::underlying_type_t<CURLINFO>;
static_assert(sizeof(CurlOptionValue) == sizeof(int) && sizeof(CurlInfoValue) == sizeof(int),
              "CURLoption and CURLINFO are passed as int-sized integers, which no promotion changes");

extern "C" {
OPCACHE_CURL_FORWARD CURLcode opcache_curl_easy_setopt(CURL* handle, CurlOptionValue option, ...)
    __asm__("curl_easy_setopt");
OPCACHE_CURL_FORWARD CURLcode opcache_curl_easy_getinfo(CURL* handle, CurlInfoValue info, ...)
    __asm__("curl_easy_getinfo");
}

extern "C" {

OPCACHE_CURL_FORWARD CURLcode curl_global_init(long flags) {
  return loaded() ? g_curl.global_init(flags) : CURLE_FAILED_INIT;
}

OPCACHE_CURL_FORWARD CURL* curl_easy_init() { return loaded() ? g_curl.easy_init() : nullptr; }

OPCACHE_CURL_FORWARD void curl_easy_cleanup(CURL* handle) {
  if (handle != nullptr && loaded()) g_curl.easy_cleanup(handle);
}

OPCACHE_CURL_FORWARD void curl_easy_reset(CURL* handle) {
  if (loaded()) g_curl.easy_reset(handle);
}

OPCACHE_CURL_FORWARD CURLcode curl_easy_perform(CURL* handle) {
  return loaded() ? g_curl.easy_perform(handle) : CURLE_FAILED_INIT;
}

OPCACHE_CURL_FORWARD CURLcode opcache_curl_easy_setopt(CURL* handle, CurlOptionValue value, ...) {
  if (!loaded()) return CURLE_FAILED_INIT;
  va_list arguments;
  va_start(arguments, value);
  const auto option = static_cast<CURLoption>(value);
  CURLcode code;
  if (value < CURLOPTTYPE_OBJECTPOINT) {
    code = g_curl.easy_setopt(handle, option, va_arg(arguments, long));
  } else if (value < CURLOPTTYPE_FUNCTIONPOINT) {
    code = g_curl.easy_setopt(handle, option, va_arg(arguments, void*));
  } else if (value < CURLOPTTYPE_OFF_T) {
    code = g_curl.easy_setopt(handle, option, va_arg(arguments, void (*)()));
  } else if (value < CURLOPTTYPE_BLOB) {
    code = g_curl.easy_setopt(handle, option, va_arg(arguments, curl_off_t));
  } else {
    code = g_curl.easy_setopt(handle, option, va_arg(arguments, void*));
  }
  va_end(arguments);
  return code;
}

OPCACHE_CURL_FORWARD CURLcode opcache_curl_easy_getinfo(CURL* handle, CurlInfoValue info, ...) {
  if (!loaded()) return CURLE_FAILED_INIT;
  va_list arguments;
  va_start(arguments, info);
  // Every CURLINFO_* argument is a pointer to where the value goes.
  CURLcode code = g_curl.easy_getinfo(handle, static_cast<CURLINFO>(info), va_arg(arguments, void*));
  va_end(arguments);
  return code;
}

OPCACHE_CURL_FORWARD const char* curl_easy_strerror(CURLcode code) {
  return loaded() ? g_curl.easy_strerror(code) : "libcurl is not loaded";
}

OPCACHE_CURL_FORWARD curl_slist* curl_slist_append(curl_slist* list, const char* line) {
  return loaded() ? g_curl.slist_append(list, line) : nullptr;
}

OPCACHE_CURL_FORWARD void curl_slist_free_all(curl_slist* list) {
  if (list != nullptr && loaded()) g_curl.slist_free_all(list);
}

OPCACHE_CURL_FORWARD CURLU* curl_url() { return loaded() ? g_curl.url() : nullptr; }

OPCACHE_CURL_FORWARD void curl_url_cleanup(CURLU* url) {
  if (url != nullptr && loaded()) g_curl.url_cleanup(url);
}

OPCACHE_CURL_FORWARD CURLUcode curl_url_set(CURLU* url, CURLUPart part, const char* content, unsigned int flags) {
  return loaded() ? g_curl.url_set(url, part, content, flags) : CURLUE_OUT_OF_MEMORY;
}

OPCACHE_CURL_FORWARD CURLUcode curl_url_get(CURLU* url, CURLUPart part, char** content, unsigned int flags) {
  return loaded() ? g_curl.url_get(url, part, content, flags) : CURLUE_OUT_OF_MEMORY;
}

OPCACHE_CURL_FORWARD void curl_free(void* pointer) {
  if (pointer != nullptr && loaded()) g_curl.free(pointer);
}

}  // extern "C"
