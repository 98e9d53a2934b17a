// The single doctest test binary; test cases live in files that mirror the
// source tree (tests/store/, tests/api/, tests/cli/, ...).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
