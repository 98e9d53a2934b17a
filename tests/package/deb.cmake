# The Debian package (scripts/package.sh, cmake/Packaging.cmake), made from
# this build directory as it is (package.sh --build-dir: nothing is built;
# the CLI, opcache-serve and both libraries must be, as after a full build):
#   package.deb.build    the fixture: the .deb into <build>/package-deb-test/
#   package.deb          its fields, control files, contents and modes; the
#                        extracted tree's opcache, C/CMake/pkg-config consumers
#                        and Python binding; the unit through systemd-analyze
#                        (tests/package/test_deb.sh)
#   package.deb_install  dpkg -i, the service run as its unit says, reload,
#                        reinstall, remove and purge, inside a private mount
#                        namespace over overlays: this machine is not changed
#                        (tests/package/test_deb_install.sh)
if(NOT OPCACHE_DEB_ARCHITECTURE)
  message(WARNING "dpkg not found: the Debian package tests (package.deb*) are not registered")
  return()
endif()

set(OPCACHE_DEB_TEST_DIR ${PROJECT_BINARY_DIR}/package-deb-test)
set(OPCACHE_DEB_TEST_FILE ${OPCACHE_DEB_TEST_DIR}/opcache_${PROJECT_VERSION}_${OPCACHE_DEB_ARCHITECTURE}.deb)

add_test(NAME package.deb.build
  COMMAND ${PROJECT_SOURCE_DIR}/scripts/package.sh --build-dir ${PROJECT_BINARY_DIR} --output ${OPCACHE_DEB_TEST_DIR})
set_tests_properties(package.deb.build PROPERTIES FIXTURES_SETUP opcache_deb TIMEOUT 600 LABELS package)

add_test(NAME package.deb
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_deb.sh ${OPCACHE_DEB_TEST_FILE} ${PROJECT_VERSION} ${PROJECT_SOURCE_DIR})
set_tests_properties(package.deb PROPERTIES FIXTURES_REQUIRED opcache_deb TIMEOUT 600 LABELS package
  SKIP_REGULAR_EXPRESSION "test_deb: SKIPPED:")

add_test(NAME package.deb_install
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_deb_install.sh ${OPCACHE_DEB_TEST_FILE} ${PROJECT_VERSION})
set_tests_properties(package.deb_install PROPERTIES FIXTURES_REQUIRED opcache_deb TIMEOUT 300 LABELS package
  SKIP_REGULAR_EXPRESSION "test_deb_install: SKIPPED:")
