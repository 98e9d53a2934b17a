# CPack post-build script (CPACK_POST_BUILD_SCRIPTS, cmake/Packaging.cmake):
# finishes each .deb of CPACK_PACKAGE_FILES. CPack's DEB generator has no
# Built-Using field: this adds CPACK_DEBIAN_PACKAGE_BUILT_USING (the static
# archives inside /usr/bin/opcache) to the control file, then rebuilds the
# package with dpkg-deb, compressing the data with xz (CPack leaves it
# uncompressed, so it is compressed once). Files, modes, owners (root) and
# maintainer scripts stay as CPack made them. Fails the packaging on error.

foreach(deb IN LISTS CPACK_PACKAGE_FILES)
  if(NOT deb MATCHES "\\.deb$")
    continue()
  endif()
  set(tree "${deb}.tree")
  file(REMOVE_RECURSE "${tree}")
  execute_process(COMMAND dpkg-deb --raw-extract "${deb}" "${tree}" RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "finish_deb: dpkg-deb --raw-extract ${deb} failed")
  endif()
  if(CPACK_DEBIAN_PACKAGE_BUILT_USING)
    # Appended (without the blank line CPack ends the file with): the
    # fields' order does not matter, Description's continuation lines stay.
    file(READ "${tree}/DEBIAN/control" control)
    string(STRIP "${control}" control)
    file(WRITE "${tree}/DEBIAN/control" "${control}\nBuilt-Using: ${CPACK_DEBIAN_PACKAGE_BUILT_USING}\n")
  endif()
  execute_process(COMMAND dpkg-deb --root-owner-group -Zxz --build "${tree}" "${deb}" RESULT_VARIABLE result
                  OUTPUT_QUIET)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "finish_deb: dpkg-deb --build ${deb} failed")
  endif()
  file(REMOVE_RECURSE "${tree}")
  message(STATUS "finish_deb: ${deb}: Built-Using: ${CPACK_DEBIAN_PACKAGE_BUILT_USING}")
endforeach()
