# libFuzzer builds of the parsers (tests/fuzz/, scripts/fuzz.sh). OFF by
# default; scripts/fuzz.sh configures its own build directory (build-fuzz)
# with clang and -DOPCACHE_FUZZ=ON. Then everything is compiled with
# -fsanitize=fuzzer-no-link,address,undefined (undefined behaviour aborts, so
# the fuzzer sees it) and tests/fuzz/CMakeLists.txt adds the fuzz_<target>
# programs, linked with -fsanitize=fuzzer. Include before any target.
option(OPCACHE_FUZZ "Build the libFuzzer targets of tests/fuzz (needs clang; use scripts/fuzz.sh)" OFF)
if(OPCACHE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "OPCACHE_FUZZ needs clang: configure with -DCMAKE_CXX_COMPILER=clang++-14 "
      "-DCMAKE_C_COMPILER=clang-14 (scripts/fuzz.sh does)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
