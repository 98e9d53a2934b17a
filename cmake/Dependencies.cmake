# Finds every dependency, failing with the Debian package to install.
# scripts/install-deps.sh installs all of them.

function(opcache_missing what package)
  message(FATAL_ERROR
    "opcache: ${what} not found. Install the Debian package '${package}' "
    "(or run scripts/install-deps.sh, which installs every dependency).")
endfunction()

find_package(PkgConfig QUIET)
if(NOT PkgConfig_FOUND)
  opcache_missing("pkg-config" "pkg-config")
endif()

find_package(OpenSSL 3 QUIET)
if(NOT OpenSSL_FOUND)
  opcache_missing("OpenSSL 3 (headers and libcrypto/libssl)" "libssl-dev")
endif()

find_package(CURL QUIET)
if(NOT CURL_FOUND)
  opcache_missing("libcurl" "libcurl4-openssl-dev")
endif()

find_package(SQLite3 QUIET)
if(NOT SQLite3_FOUND)
  opcache_missing("SQLite 3" "libsqlite3-dev")
endif()

find_package(zstd QUIET CONFIG)
if(NOT zstd_FOUND)
  opcache_missing("zstd" "libzstd-dev")
endif()

find_package(nlohmann_json 3.10 QUIET CONFIG)
if(NOT nlohmann_json_FOUND)
  opcache_missing("nlohmann_json" "nlohmann-json3-dev")
endif()

find_package(CLI11 QUIET CONFIG)
if(NOT CLI11_FOUND)
  opcache_missing("CLI11" "libcli11-dev")
endif()

pkg_check_modules(INIH QUIET IMPORTED_TARGET inih)
if(NOT INIH_FOUND)
  opcache_missing("inih" "libinih-dev")
endif()

find_package(Boost 1.74 QUIET)
if(NOT Boost_FOUND)
  opcache_missing("Boost (Asio and Beast, for opcache serve)" "libboost-dev")
endif()

find_package(Threads REQUIRED)

if(OPCACHE_BUILD_TESTS)
  find_package(doctest QUIET CONFIG)
  if(NOT doctest_FOUND)
    opcache_missing("doctest" "doctest-dev")
  endif()
  find_package(valijson QUIET CONFIG)
  if(NOT valijson_FOUND)
    opcache_missing("valijson (JSON Schema validation in tests)" "libvalijson-dev")
  endif()
endif()
