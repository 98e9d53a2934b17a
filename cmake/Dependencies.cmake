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
# The soname of the shared library behind imported target `target`
# ("libcurl.so.4" for libcurl.so.4.8.0), or `fallback`, into `out`.
function(opcache_soname_of target fallback out)
  get_target_property(location ${target} LOCATION)
  file(REAL_PATH "${location}" real)
  get_filename_component(name "${real}" NAME)
  if(name MATCHES "^(lib[^.]+\\.so\\.[0-9]+)")
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  else()
    set(${out} "${fallback}" PARENT_SCOPE)
  endif()
endfunction()
opcache_soname_of(CURL::libcurl "libcurl.so.4" OPCACHE_LIBCURL_SONAME)
message(STATUS "opcache: libcurl is loaded on demand as ${OPCACHE_LIBCURL_SONAME}")
opcache_require(SQLite3 "SQLite 3" libsqlite3-dev)
# SQLite is loaded on first use too (store/sqlite_library.cpp): its soname.
opcache_soname_of(SQLite::SQLite3 "libsqlite3.so.0" OPCACHE_LIBSQLITE_SONAME)
message(STATUS "opcache: SQLite is loaded on demand as ${OPCACHE_LIBSQLITE_SONAME}")
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
