# How opcache's programs (opcache, opcache-serve) link their dependencies.
#
# A cache hit through `opcache exec` is a whole process; with OpenSSL, SQLite,
# zstd, inih and libstdc++ as shared objects the dynamic loader spends more
# time resolving their symbols (~7,600 symbol relocations) than the hit spends
# on its work. The programs therefore link Debian's static archives of them
# (packages libssl-dev, libzstd-dev, libinih-dev, and GCC's libstdc++.a), and
# loads libcurl only when a remote is used (remote/curl_library.cpp) and SQLite
# only when the index is (store/sqlite_library.cpp). The libraries
# (libopcache.so, libopcache.a) keep linking the shared objects: they are for
# other programs to link.
#
# Nor do the programs map libm: Debian's SQLite was what needed it (the SQL
# math functions), and loading libm costs a small process 11 % of its time.
# libstdc++'s floating-point to_chars, which canonical JSON uses, needs only
# fegetround and fesetround: they are taken from libm.a, and --as-needed
# drops the libm.so that g++ adds to every link.
#
# The programs are also linked as position-dependent executables (-no-pie): as a
# PIE, its 28,663 relative relocations (vtables and the static archives'
# method tables, 450 KiB of .data.rel.ro) were applied by the loader in every
# process, 123 of a hit's 318 page faults (`perf stat -e page-faults`, an
# `opcache exec` hit: 318 as a PIE, 195 without). Only the executable's own
# code and data then sit at a fixed address; the stack, the heap, the shared
# libraries and every mapping stay randomised. OPCACHE_PIE=ON links a PIE
# (for builds whose policy requires one, at that cost per hit).
#
# Defines the INTERFACE target opcache_program_dependencies.

option(OPCACHE_STATIC_PROGRAM_DEPENDENCIES
  "Link the opcache programs against static archives of OpenSSL, zstd, inih and libstdc++ (faster start-up)" ON)

option(OPCACHE_PIE "Link the opcache programs as position-independent executables (slower start-up)" OFF)

add_library(opcache_program_dependencies INTERFACE)
if(NOT OPCACHE_PIE)
  target_link_options(opcache_program_dependencies INTERFACE -no-pie)
endif()
if(OPCACHE_STATIC_PROGRAM_DEPENDENCIES)
  set(_opcache_archives)
  # Order matters for static archives: a library before the ones it needs.
  foreach(_pair "ssl;libssl-dev" "crypto;libssl-dev" "zstd;libzstd-dev" "inih;libinih-dev" "m;libc6-dev")
    list(GET _pair 0 _name)
    list(GET _pair 1 _package)
    find_library(OPCACHE_ARCHIVE_${_name} NAMES lib${_name}.a)
    if(NOT OPCACHE_ARCHIVE_${_name})
      message(FATAL_ERROR "opcache: lib${_name}.a not found. Install the Debian package '${_package}' "
        "(scripts/install-deps.sh does), or configure with -DOPCACHE_STATIC_PROGRAM_DEPENDENCIES=OFF.")
    endif()
    list(APPEND _opcache_archives ${OPCACHE_ARCHIVE_${_name}})
  endforeach()
  target_link_libraries(opcache_program_dependencies INTERFACE ${_opcache_archives} ${CMAKE_DL_LIBS} Threads::Threads)
  target_link_options(opcache_program_dependencies INTERFACE -static-libstdc++ -static-libgcc
    "LINKER:--undefined=fegetround,--undefined=fesetround" "LINKER:--as-needed")
else()
  target_link_libraries(opcache_program_dependencies INTERFACE
    OpenSSL::SSL OpenSSL::Crypto zstd::libzstd_shared SQLite::SQLite3 PkgConfig::INIH Threads::Threads ${CMAKE_DL_LIBS})
endif()
