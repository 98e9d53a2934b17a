# The code a cache hit runs, laid out together in `opcache`.
#
# A warm `opcache exec` hit is a whole process, and each page of code it
# touches for the first time is a page fault (about 8 µs each here, with the
# kernel mapping 64 KiB around the page). Linked in the usual order, the ~860
# functions a hit runs lie in ~45 different 64 KiB windows of the 6 MiB of
# .text; placed side by side they take ~560 KiB. With every function in its
# own section (-ffunction-sections) and gold's --section-ordering-file naming
# the hit's functions (cmake/hit-path.order, written by
# scripts/hit-path-order.sh), a hit took 140 page faults instead of 176 and
# 3.5 % less wall time (farm-bench -n 100, paired). OpenSSL's and zstd's
# archives are not built with function sections: their code keeps its place.
#
# OPCACHE_ORDER_HIT_PATH=OFF links in the default order with the default
# linker. Sanitizer and fuzzing builds, whose speed is not the point, and a
# machine without ld.gold (GNU binutils) do too. The CTest test
# architecture.hit_path_order (scripts/check_hit_path_order.py) checks the
# layout of the program this option links.
#
# Defines opcache_order_hit_path(<object-targets>… PROGRAM <target>).

option(OPCACHE_ORDER_HIT_PATH "Place the functions of a cache hit together in the opcache program (gold)" ON)

set(OPCACHE_HIT_PATH_ORDER ${PROJECT_SOURCE_DIR}/cmake/hit-path.order)
if(OPCACHE_ORDER_HIT_PATH AND (OPCACHE_SANITIZE OR OPCACHE_FUZZ))
  set(OPCACHE_ORDER_HIT_PATH OFF)
endif()
if(OPCACHE_ORDER_HIT_PATH)
  find_program(OPCACHE_LD_GOLD NAMES ld.gold)
  if(NOT OPCACHE_LD_GOLD OR NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(STATUS "opcache: ld.gold not found (GNU binutils): the hit path keeps the default layout")
    set(OPCACHE_ORDER_HIT_PATH OFF)
  endif()
endif()

# gold's ordering file names input sections: a function f compiled with
# -ffunction-sections is in .text.f, or .text.startup.f when it runs before
# main (static initialisers, main itself).
function(_opcache_write_section_order output)
  file(STRINGS ${OPCACHE_HIT_PATH_ORDER} names REGEX "^[^#]")
  set(sections "")
  foreach(name IN LISTS names)
    string(APPEND sections ".text.${name}\n.text.startup.${name}\n")
  endforeach()
  file(WRITE ${output}.new "${sections}")
  configure_file(${output}.new ${output} COPYONLY)  # rewritten only when it changes: no needless relink
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${OPCACHE_HIT_PATH_ORDER})
endfunction()

function(opcache_order_hit_path)
  cmake_parse_arguments(ARG "" "PROGRAM" "" ${ARGN})
  if(NOT OPCACHE_ORDER_HIT_PATH)
    return()
  endif()
  foreach(target IN LISTS ARG_UNPARSED_ARGUMENTS ITEMS ${ARG_PROGRAM})
    target_compile_options(${target} PRIVATE -ffunction-sections)
  endforeach()
  set(sections ${PROJECT_BINARY_DIR}/hit-path.sections)
  _opcache_write_section_order(${sections})
  target_link_options(${ARG_PROGRAM} PRIVATE -fuse-ld=gold "LINKER:--section-ordering-file,${sections}")
  set_property(TARGET ${ARG_PROGRAM} APPEND PROPERTY LINK_DEPENDS ${sections})
endfunction()
