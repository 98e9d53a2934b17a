# Finds every dependency, failing with the Debian package to install.
# scripts/install-deps.sh installs all of them.

# opcache_require(NAME "what it is" debian-package [find_package arguments…])
# runs find_package(NAME … QUIET) and stops with a message naming the Debian
# package when NAME_FOUND is false. A macro, so the imported targets and
# variables land in the caller's scope.
macro(opcache_require name what package)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR
      "opcache: ${what} not found. Install the Debian package '${package}' "
      "(or run scripts/install-deps.sh, which installs every dependency).")
  endif()
endmacro()

opcache_require(PkgConfig "pkg-config" pkg-config)
opcache_require(OpenSSL "OpenSSL 3 (headers and libcrypto/libssl)" libssl-dev 3)
opcache_require(CURL "libcurl" libcurl4-openssl-dev)
# opcache loads libcurl when a remote is first used (remote/curl_library.cpp),
# not at start-up: it compiles against the headers and dlopen()s the soname
# of the library found here ("libcurl.so.4" for libcurl.so.4.8.0).
get_target_property(OPCACHE_CURL_INCLUDE_DIRS CURL::libcurl INTERFACE_INCLUDE_DIRECTORIES)
get_target_property(_opcache_curl_location CURL::libcurl LOCATION)
file(REAL_PATH "${_opcache_curl_location}" _opcache_curl_real)
get_filename_component(_opcache_curl_name "${_opcache_curl_real}" NAME)
if(_opcache_curl_name MATCHES "^(lib[^.]+\\.so\\.[0-9]+)")
  set(OPCACHE_LIBCURL_SONAME "${CMAKE_MATCH_1}")
else()
  set(OPCACHE_LIBCURL_SONAME "libcurl.so.4")
endif()
message(STATUS "opcache: libcurl is loaded on demand as ${OPCACHE_LIBCURL_SONAME}")
opcache_require(SQLite3 "SQLite 3" libsqlite3-dev)
opcache_require(zstd "zstd" libzstd-dev CONFIG)
opcache_require(nlohmann_json "nlohmann_json" nlohmann-json3-dev 3.10 CONFIG)
opcache_require(CLI11 "CLI11" libcli11-dev CONFIG)
opcache_require(Boost "Boost (Asio and Beast, for opcache serve)" libboost-dev 1.74)
find_package(Threads REQUIRED)

pkg_check_modules(INIH QUIET IMPORTED_TARGET inih)
if(NOT INIH_FOUND)
  message(FATAL_ERROR "opcache: inih not found. Install the Debian package 'libinih-dev' "
    "(or run scripts/install-deps.sh, which installs every dependency).")
endif()

if(OPCACHE_BUILD_TESTS)
  opcache_require(doctest "doctest" doctest-dev CONFIG)
  opcache_require(valijson "valijson (JSON Schema validation in tests)" libvalijson-dev CONFIG)
endif()
