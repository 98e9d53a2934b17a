# Packaging: what the Debian package adds to `cmake --install` (the Python
# binding, the systemd unit for `opcache serve`, its default configuration and
# tokens file, the docs) and the CPack settings scripts/package.sh uses.
#
# Two kinds of install rules:
# * the docs and the copyright file (share/doc/opcache), installed by every
#   `cmake --install` like the rules in CMakeLists.txt;
# * component `debian`, EXCLUDE_FROM_ALL: files whose place is Debian's
#   (/etc/opcache, /lib/systemd/system, lib/python3/dist-packages). Only
#   CPack installs them (CPACK_COMPONENTS_ALL below), so `cmake --install
#   build --prefix P` never writes to /etc.
#
# The .deb: scripts/package.sh, or `cpack --config BUILD/CPackConfig.cmake`
# after building opcache_cli, opcache_serve, opcache_shared and opcache_static. Tested by
# tests/package/deb.cmake.

set(OPCACHE_PACKAGING_DIR ${PROJECT_SOURCE_DIR}/packaging)

# ---------------------------------------------------------------------------
# Docs: README.md and docs/ keep their relative layout, so README's links work.
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs FILES_MATCHING PATTERN "*.md" PATTERN "*.svg")

# ---------------------------------------------------------------------------
# Static archives inside the CLI (cmake/ProgramDependencies.cmake), by Debian
# source package: OPCACHE_DEB_BUILT_USING ("openssl (= 3.0.19-1~deb12u2)", …)
# and OPCACHE_DEB_STATIC_NAMES ("openssl 3.0.19 (libssl.a, libcrypto.a)", …).
# Empty when the CLI links them dynamically or dpkg does not know the files.

# The Debian package owning FILE (symlinks resolved) into OUT; "" if none.
function(opcache_deb_package_of file out)
  file(REAL_PATH "${file}" real)
  execute_process(COMMAND ${OPCACHE_DPKG_QUERY} --search "${real}" OUTPUT_VARIABLE owner
                  RESULT_VARIABLE result ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  # "libssl-dev:amd64: /usr/lib/x86_64-linux-gnu/libssl.a"
  if(result EQUAL 0 AND owner MATCHES "^([^:,]+)(:[a-z0-9]+)?: ")
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# The source package of the Debian package owning FILE into OUT_NAME,
# OUT_VERSION (Debian version) and OUT_UPSTREAM (upstream version); the name
# is "" (with a warning) when dpkg does not know the file.
function(opcache_deb_source_of file out_name out_version out_upstream)
  set(${out_name} "" PARENT_SCOPE)
  opcache_deb_package_of("${file}" package)
  if(NOT package)
    message(WARNING "opcache: no Debian package owns ${file}: it is left out of Built-Using")
    return()
  endif()
  execute_process(COMMAND ${OPCACHE_DPKG_QUERY} --show
                  "--showformat=\${source:Package}|\${source:Version}|\${source:Upstream-Version}" ${package}
                  OUTPUT_VARIABLE fields RESULT_VARIABLE result ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT result EQUAL 0 OR NOT fields MATCHES "^([^|]+)\\|([^|]+)\\|(.*)$")
    message(WARNING "opcache: dpkg-query knows no source package of ${package}: ${file} is left out of Built-Using")
    return()
  endif()
  set(${out_name} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(${out_version} "${CMAKE_MATCH_2}" PARENT_SCOPE)
  set(${out_upstream} "${CMAKE_MATCH_3}" PARENT_SCOPE)
endfunction()

find_program(OPCACHE_DPKG_QUERY dpkg-query)
set(OPCACHE_DEB_BUILT_USING)
set(OPCACHE_DEB_STATIC_NAMES)
if(OPCACHE_DPKG_QUERY AND OPCACHE_STATIC_PROGRAM_DEPENDENCIES)
  set(_opcache_static_files)
  foreach(_name ssl crypto zstd inih m)  # m: fegetround and fesetround (cmake/ProgramDependencies.cmake)
    list(APPEND _opcache_static_files ${OPCACHE_ARCHIVE_${_name}})
  endforeach()
  # -static-libstdc++ -static-libgcc: GCC's own archives.
  foreach(_archive libstdc++.a libgcc.a libgcc_eh.a)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${_archive} OUTPUT_VARIABLE _path
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    list(APPEND _opcache_static_files ${_path})
  endforeach()
  set(_opcache_sources)
  foreach(_file ${_opcache_static_files})
    opcache_deb_source_of("${_file}" _source _version _upstream)
    if(_source)
      if(NOT _source IN_LIST _opcache_sources)
        list(APPEND _opcache_sources ${_source})
        list(APPEND OPCACHE_DEB_BUILT_USING "${_source} (= ${_version})")
        set(_opcache_upstream_${_source} ${_upstream})
        set(_opcache_archives_${_source})
      endif()
      get_filename_component(_archive "${_file}" NAME)
      list(APPEND _opcache_archives_${_source} ${_archive})
    endif()
  endforeach()
  foreach(_source ${_opcache_sources})
    list(JOIN _opcache_archives_${_source} ", " _archives)
    list(APPEND OPCACHE_DEB_STATIC_NAMES "${_source} ${_opcache_upstream_${_source}} (${_archives})")
  endforeach()
endif()
list(JOIN OPCACHE_DEB_BUILT_USING ", " OPCACHE_DEB_BUILT_USING_TEXT)

# ---------------------------------------------------------------------------
# Docs (continued): the copyright file names the static copies above.
if(OPCACHE_DEB_STATIC_NAMES)
  list(JOIN OPCACHE_DEB_STATIC_NAMES "\n  " _opcache_static_lines)
  set(OPCACHE_COPYRIGHT_STATIC "/usr/bin/opcache and /usr/bin/opcache-serve contain static copies of libraries from these Debian
 source packages (upstream versions; exact versions in Built-Using):
  ${_opcache_static_lines}
 Their licences apply to those parts:")
else()
  set(OPCACHE_COPYRIGHT_STATIC "This build of /usr/bin/opcache and /usr/bin/opcache-serve links the libraries below dynamically;
 their licences apply to them:")
endif()
configure_file(${OPCACHE_PACKAGING_DIR}/copyright.in ${PROJECT_BINARY_DIR}/packaging/copyright @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/packaging/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Replicas over one bucket (docs/operations.md "Replicas"): examples to copy,
# never read in place.
install(DIRECTORY ${OPCACHE_PACKAGING_DIR}/replicas ${OPCACHE_PACKAGING_DIR}/kubernetes
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# ---------------------------------------------------------------------------
# Component `debian`: Debian's places, for the package only (see the top).
install(FILES ${OPCACHE_PACKAGING_DIR}/opcache-serve.service DESTINATION /lib/systemd/system
  COMPONENT debian EXCLUDE_FROM_ALL)
install(FILES ${OPCACHE_PACKAGING_DIR}/serve.ini DESTINATION /etc/opcache COMPONENT debian EXCLUDE_FROM_ALL)
# Hashes of bearer tokens: not for every user (postinst makes it root:opcache).
install(FILES ${OPCACHE_PACKAGING_DIR}/tokens DESTINATION /etc/opcache
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ COMPONENT debian EXCLUDE_FROM_ALL)
# The Python binding for Debian's python3; it finds libopcache.so.0 by soname.
install(DIRECTORY python/opcache/ DESTINATION lib/python3/dist-packages/opcache COMPONENT debian EXCLUDE_FROM_ALL
  FILES_MATCHING PATTERN "*.py" PATTERN "py.typed"
  PATTERN "__pycache__" EXCLUDE PATTERN "tests" EXCLUDE PATTERN "_native" EXCLUDE)

# `cmake --install --strip` and CPack (CPACK_STRIP_FILES) strip the program
# and the shared library; CMake leaves static archives alone. Their debug
# information is most of a RelWithDebInfo libopcache.a; its symbols stay
# (dh_strip does the same for Debian's static libraries).
install(CODE "
  if(CMAKE_INSTALL_DO_STRIP)
    set(_archive \"${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:opcache_static>\")
    if(NOT IS_ABSOLUTE \"\${_archive}\")
      set(_archive \"\${CMAKE_INSTALL_PREFIX}/\${_archive}\")
    endif()
    message(STATUS \"Stripping debug information: \$ENV{DESTDIR}\${_archive}\")
    execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug --enable-deterministic-archives
                            \"\$ENV{DESTDIR}\${_archive}\" RESULT_VARIABLE _result)
    if(NOT _result EQUAL 0)
      message(FATAL_ERROR \"strip --strip-debug \$ENV{DESTDIR}\${_archive} failed\")
    endif()
  endif()")

# ---------------------------------------------------------------------------
# CPack: one .deb, opcache_<version>_<arch>.deb.
if(NOT OPCACHE_DPKG_QUERY)
  message(STATUS "opcache: dpkg-query not found: the Debian package (scripts/package.sh) cannot be made here")
  return()
endif()

# libcurl and SQLite are loaded with dlopen (remote/curl_library.cpp,
# store/sqlite_library.cpp), so dpkg-shlibdeps cannot see them: the package and
# version floor of each come from the shlibs file of the package owning the
# library cmake/Dependencies.cmake found (for Debian 12: "libcurl4 (>= 7.88.1)"
# and "libsqlite3-0 (>= 3.40.1)"), else `fallback`, into `out`.
function(opcache_deb_dlopen_depends target soname fallback out)
  get_target_property(location ${target} LOCATION)
  opcache_deb_package_of("${location}" package)
  set(depends "")
  if(package)
    execute_process(COMMAND ${OPCACHE_DPKG_QUERY} --control-path ${package} shlibs
                    OUTPUT_VARIABLE shlibs_file RESULT_VARIABLE result ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(result EQUAL 0 AND EXISTS "${shlibs_file}")
      file(STRINGS "${shlibs_file}" shlibs_lines)
      # The soname libcurl.so.4 is "libcurl 4 <dependency>" there.
      string(REGEX REPLACE "^(.+)\\.so\\.([0-9]+)$" "\\1 \\2 " shlibs_key "${soname}")
      foreach(line ${shlibs_lines})
        string(FIND "${line}" "${shlibs_key}" at)
        if(at EQUAL 0)
          string(LENGTH "${shlibs_key}" length)
          string(SUBSTRING "${line}" ${length} -1 depends)
          break()
        endif()
      endforeach()
    endif()
  endif()
  if(NOT depends)
    set(depends "${fallback}")
    message(STATUS "opcache: no dpkg shlibs entry for ${soname}; the package depends on ${depends}")
  endif()
  set(${out} "${depends}" PARENT_SCOPE)
endfunction()
# The code needs libcurl 7.85 (CURLOPT_PROTOCOLS_STR) and SQLite 3.37 (sqlite3_changes64 is 3.37).
opcache_deb_dlopen_depends(CURL::libcurl "${OPCACHE_LIBCURL_SONAME}" "libcurl4 (>= 7.85)" OPCACHE_DEB_CURL_DEPENDS)
opcache_deb_dlopen_depends(SQLite::SQLite3 "${OPCACHE_LIBSQLITE_SONAME}" "libsqlite3-0 (>= 3.37)"
                           OPCACHE_DEB_SQLITE_DEPENDS)

execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE OPCACHE_DEB_ARCHITECTURE
                OUTPUT_STRIP_TRAILING_WHITESPACE)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME opcache)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "opcache maintainers <maintainers@users.noreply.a-seed-84b9c3c5.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# The default files and the component `debian`, in one package.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL Unspecified debian)
# cpack packages what is built; it must not build `all` (the tests and the
# benchmarks) first. Only `make install` is affected besides: `cmake
# --install`, which README uses, never builds.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

set(CPACK_DEBIAN_PACKAGE_NAME opcache)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${OPCACHE_DEB_ARCHITECTURE})
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# dpkg-shlibdeps: libc6 for the program; libssl3, libzstd1, libinih1,
# libstdc++6 and libgcc-s1 for libopcache.so. By hand: libcurl and SQLite
# (dlopen), python3 (the binding), adduser (postinst) and procps (/bin/kill,
# the unit's ExecReload).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${OPCACHE_DEB_CURL_DEPENDS}, ${OPCACHE_DEB_SQLITE_DEPENDS}, python3, adduser, procps")
# What building against libopcache needs (opcache.pc's Requires.private, opcacheConfig.cmake's find_dependency).
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libssl-dev, libsqlite3-dev, libzstd-dev, libinih-dev, pkg-config")
# A shlibs file for libopcache.so.0 and the ldconfig trigger.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${OPCACHE_PACKAGING_DIR}/conffiles ${OPCACHE_PACKAGING_DIR}/postinst ${OPCACHE_PACKAGING_DIR}/prerm
  ${OPCACHE_PACKAGING_DIR}/postrm ${OPCACHE_PACKAGING_DIR}/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# Lines of at most 79 characters, as Debian's policy asks; a blank line
# becomes " ." (CPack formats the field).
if(OPCACHE_DEB_STATIC_NAMES)
  # Lines indented by one more space are shown as they are.
  list(JOIN OPCACHE_DEB_STATIC_NAMES "\n " _opcache_static_lines)
  set(_opcache_static_paragraph "The opcache program is linked statically, for a fast start-up, with
these libraries (Debian source package, upstream version, archives; the
exact versions are in Built-Using):
 ${_opcache_static_lines}")
else()
  set(_opcache_static_paragraph "The opcache program links its libraries dynamically.")
endif()
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "opcache stores each compiled operator kernel once, keyed by the SHA-256
of its canonical op descriptor and a scenario tag, verifies every byte on
the way out, and shares kernels through a team server or S3.

This package holds the opcache command; the team cache server (opcache
serve) with the systemd unit opcache-serve.service, its settings in
/etc/opcache/serve.ini and its tokens in /etc/opcache/tokens; libopcache
(shared and static), its headers, CMake package and pkg-config file; and
the Python binding.

${_opcache_static_paragraph}

libopcache.so links the shared libraries. libcurl is loaded at run time,
only when a remote cache is used.")

# CPack's DEB generator has no Built-Using field and compresses with gzip:
# packaging/finish_deb.cmake adds the field and compresses the data with xz
# (dpkg-deb's default), once: CPack's own archive is left uncompressed.
set(CPACK_DEBIAN_COMPRESSION_TYPE none)
set(CPACK_DEBIAN_PACKAGE_BUILT_USING "${OPCACHE_DEB_BUILT_USING_TEXT}")
set(CPACK_POST_BUILD_SCRIPTS ${OPCACHE_PACKAGING_DIR}/finish_deb.cmake)

include(CPack)
