# The Python wheel (scripts/build-wheel.sh): built from this build's
# libopcache.so.0 (target opcache_shared), its files, tag and version checked,
# installed with `pip install --no-index` into a fresh venv of Debian's
# python3 and used from outside the tree (tests/package/test_wheel.sh).
if(EXISTS /usr/bin/python3)
  add_test(NAME package.wheel
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_wheel.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE_DIR:opcache_shared>)
  set_tests_properties(package.wheel PROPERTIES TIMEOUT 300 LABELS package)
else()
  message(WARNING "python3 not found at /usr/bin/python3: the wheel test package.wheel is not registered")
endif()
