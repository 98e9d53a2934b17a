// The single doctest test binary; test cases live in files that mirror the
// source tree (tests/store/, tests/api/, tests/cli/, ...).
//
// CTest runs each case as `opcache_tests --test-case=<name>`. A run whose
// filter selects no test case fails here: doctest itself would report
// success, so a case CTest cannot name exactly (a ';' in its name splits it
// in CMake's list handling) would pass without running.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "opcache_test_paths.hpp"

namespace {

int g_selected_test_cases = -1;

// Records how many test cases the filters selected.
struct SelectionListener : doctest::IReporter {
  explicit SelectionListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    g_selected_test_cases = static_cast<int>(stats.numTestCasesPassingFilters);
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("selection", 1, SelectionListener);

}  // namespace

int main(int argc, char** argv) {
  // The tracer of the test binary (and of the CLI it runs) preloads this
  // build's library into traced programs, unless the environment says otherwise.
  ::setenv("OPCACHE_TRACE_PRELOAD", OPCACHE_BINARY_DIR "/libopcache-trace-preload.so", 0);
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) {
    return result;  // --help, --list-test-cases, …
  }
  if (g_selected_test_cases == 0) {
    std::fprintf(stderr, "opcache_tests: no test case matches the filters (a ';' in a TEST_CASE name?)\n");
    return 1;
  }
  return result;
}
