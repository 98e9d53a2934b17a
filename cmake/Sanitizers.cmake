# Sanitizer builds (scripts/test.sh --sanitize address,undefined | thread).
#
# OPCACHE_SANITIZE is the list given to -fsanitize= ("address,undefined",
# "thread", ...); empty (the default) builds without sanitizers. Every target
# of the project is instrumented (library, CLI, refcc, tests), and undefined
# behaviour aborts instead of printing and going on. Sanitized code is built
# with -O1 (placed after the build type's -O2, so it wins), as the sanitizers'
# documentation recommends: under ASan, -O2 made server/http_session.cpp alone
# take over 11 CPU-minutes and 6.7 GB; at -O1 the whole ASan build of the
# suite took about 40 minutes on this 2-core machine. Debug information is
# line tables only (-g1, after the build type's -g): what a report's stack
# needs; full -g made an ASan + UBSan compile a third slower (server/api.cpp:
# 29.9 CPU-s with -g, 19.3 with -g1). A sanitizer build links
# the CLI against shared objects (OPCACHE_STATIC_PROGRAM_DEPENDENCIES OFF):
# the sanitizer runtimes intercept malloc and friends, which a statically
# linked libstdc++ would bypass.
#
# Include before cmake/ProgramDependencies.cmake. Defines the function
# opcache_sanitizer_preload_tests(TEST...) for tests/CMakeLists.txt.

set(OPCACHE_SANITIZE "" CACHE STRING
  "Build with these sanitizers (-fsanitize=LIST, e.g. address,undefined or thread); empty: none")

if(OPCACHE_SANITIZE)
  if(OPCACHE_SANITIZE MATCHES "thread" AND OPCACHE_SANITIZE MATCHES "address")
    message(FATAL_ERROR "opcache: OPCACHE_SANITIZE=${OPCACHE_SANITIZE}: thread and address cannot be combined")
  endif()
  message(STATUS "opcache: sanitizers ${OPCACHE_SANITIZE}")
  add_compile_options(-fsanitize=${OPCACHE_SANITIZE} -fno-omit-frame-pointer -O1 -g1)
  if(OPCACHE_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
  add_link_options(-fsanitize=${OPCACHE_SANITIZE})
  set(OPCACHE_STATIC_PROGRAM_DEPENDENCIES OFF CACHE BOOL
    "Link the opcache CLI against static archives (OFF: sanitizer build)" FORCE)
endif()

# A program that is not instrumented itself (python3, a consumer compiled by
# tests/install) but loads the instrumented libopcache.so needs the ASan
# runtime loaded first: the given tests run with LD_PRELOAD of it, and of
# libstdc++ right after it (python3 does not link libstdc++, so the ASan
# runtime would find no __cxa_throw to forward to and abort at the library's
# first C++ exception: "CHECK failed ... real___cxa_throw"). Leak
# checking is off in them, as it would report the interpreter's and the
# compiler's own allocations; the library's code is leak-checked by the
# doctest suite, which runs the same code paths in-process.
function(opcache_sanitizer_preload_tests)
  if(NOT OPCACHE_SANITIZE MATCHES "address")
    return()
  endif()
  set(_preload)
  foreach(_library libasan.so libstdc++.so)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${_library}
      OUTPUT_VARIABLE _path OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT IS_ABSOLUTE "${_path}" OR NOT EXISTS "${_path}")
      message(FATAL_ERROR "opcache: ${CMAKE_CXX_COMPILER} does not know where ${_library} is (said '${_path}')")
    endif()
    string(APPEND _preload "${_preload_separator}${_path}")
    set(_preload_separator ":")
  endforeach()
  set_property(TEST ${ARGN} APPEND PROPERTY ENVIRONMENT_MODIFICATION
    "LD_PRELOAD=set:${_preload}" "ASAN_OPTIONS=string_append::detect_leaks=0")
endfunction()
