#!/usr/bin/env bash
# The test command of README.md and CI: installs dependencies, builds, and
# runs the whole test suite with CTest. Extra arguments go to ctest
# (e.g. `scripts/test.sh -R cli` to run only the CLI tests).
#
# With --sanitize LIST it builds a sanitizer build into its own directory
# instead and runs the tests under it (see usage below).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

# The tests --sanitize thread runs (CTest regex): those that use threads or
# concurrent processes.
TSAN_TESTS='^(server::|remote::|e2e::|refcc|store::LocalStore|store::Index|C API|support::)'
# ...except those that hold the first unlink(2) of the process with strace's
# fault injection: under TSan that is the runtime's own unlink of
# /tmp/tsan.rodata.<pid> at start-up, not the store's, so they cannot work.
TSAN_EXCLUDED='^e2e::kill SIGKILL of (rm|clear) '

# The folders of tests/ that --focused compiles: the suites that exercise
# concurrency, parsers of outside bytes and the server (every fuzz target's
# replay runs too). Left out: tests/cli, tests/layouts and tests/schemas.
FOCUSED_FOLDERS='base;store;remote;server;api;e2e;refcc'

# Tests that run no instrumented code (Python checks of the sources: the
# layer rules, the thread-safety analysis): the normal run has them; under
# a sanitizer they would only take time (the analysis about 145 s).
NOT_SANITIZED='^architecture\.'

usage() {
  cat <<EOF
usage: scripts/test.sh [--sanitize address,undefined | --sanitize thread [--focused]] [CTEST ARGS...]

Without --sanitize: installs dependencies, builds everything into build/
(scripts/build.sh) and runs the whole test suite with CTest.

--sanitize address,undefined
    Builds into build-asan/ with -fsanitize=address,undefined
    -fno-omit-frame-pointer -fno-sanitize-recover=undefined (no benchmarks,
    CLI linked against shared objects) and runs the WHOLE suite under
    AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer. The
    tests that start python3 (python.binding) or build a consumer program
    (install.c_abi_and_cmake_package) run it with LD_PRELOAD of the ASan
    runtime and without leak checking (cmake/Sanitizers.cmake says why).
--sanitize thread
    Builds into build-tsan/ with -fsanitize=thread and runs the tests that
    exercise threads or concurrent processes under ThreadSanitizer (the
    server, every remote kind and the remote set, single flight,
    get_or_build/exec, refcc's parallel builds, the store under concurrent
    processes, the C API's per-thread state), selected by the CTest regex
      $TSAN_TESTS
    but not
      $TSAN_EXCLUDED
    (they delay the process's first unlink with strace; under TSan that is
    the runtime's own /tmp/tsan.rodata.<pid>, not the store's).

--focused (with --sanitize)
    Compiles and runs only the suites of tests/{${FOCUSED_FOLDERS//;/,}}:
    concurrency, parsers of outside bytes and the server (plus every fuzz
    target's replay, the install and Python tests); CI's sanitizer pass
    (.ci/run). The rest (tests/cli, tests/layouts, tests/schemas) runs in the
    normal pass only.

The architecture.* tests (checks of the sources, no instrumented code) run
in the normal mode only.

Every build has warnings in product code as errors (-Werror, CMake option
OPCACHE_WERROR, on by default; OPCACHE_WERROR=0 in the environment turns it
off, e.g. for a newer compiler's new warning). Sanitizer builds have line
tables only (-g1): what a report's stack needs, and a third less compile time
than full debug information.

The locking rules' check (architecture.thread_safety: clang++-14, which
install-deps.sh --test installs) fails when clang++-14 is missing. On a
machine without clang, OPCACHE_ALLOW_MISSING_CLANG=1 reports it as skipped
instead (an explicit opt-out; .ci/run unsets it).

Extra arguments go to ctest in every mode, after the mode's own (a -R given
here replaces the thread mode's regex): e.g.
  scripts/test.sh -R 'store::'                      a subset, normal build
  scripts/test.sh --sanitize address,undefined -R cli
  scripts/test.sh --sanitize thread -E 'server::TLS'

Sanitizer reports of every process (the test binary and every opcache, refcc
or python3 it starts) are written to <build dir>/sanitizer-logs/, not to the
tests' stderr, so that a report in a child that a test expects to fail is not
lost: after CTest the script prints every report and exits 1 if there is any,
even when every test passed (a log holding only LeakSanitizer's "Unable to
get registers from thread N." is printed but not counted: the tool could not
stop a thread that was exiting). The script sets halt_on_error=1,
print_stacktrace=1 and log_path (and for ASan detect_leaks=1,
detect_stack_use_after_return=1, check_initialization_order=1,
strict_string_checks=1); ASAN_OPTIONS, UBSAN_OPTIONS, TSAN_OPTIONS and
LSAN_OPTIONS from the environment are appended (later options win).
Leaks in third-party code that cannot be fixed here are suppressed by name in
scripts/sanitizers/lsan.supp; TSan suppressions in scripts/sanitizers/tsan.supp.
OPCACHE_JOBS sets build and test parallelism (default 2); ccache is used when
installed.
EOF
}

sanitize=""
focused=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --sanitize) [[ $# -ge 2 ]] || { echo "test.sh: --sanitize needs a list (address,undefined or thread)" >&2; exit 2; }
                sanitize=$2; shift 2 ;;
    --sanitize=*) sanitize=${1#--sanitize=}; shift ;;
    --focused) focused=$FOCUSED_FOLDERS; shift ;;
    *) break ;;
  esac
done
if [[ -n "$focused" && -z "$sanitize" ]]; then
  echo "test.sh: --focused goes with --sanitize (the normal run is always the whole suite)" >&2
  exit 2
fi

"$repo/scripts/install-deps.sh" --test
if [[ -z "$sanitize" ]]; then
  "$repo/scripts/build.sh"
  cd "$repo/build"
  exec ctest --output-on-failure -j"${OPCACHE_JOBS:-2}" "$@"
fi

case "$sanitize" in
  address,undefined|undefined,address) build_dir=$repo/build-asan; tests=(-E "$NOT_SANITIZED") ;;
  address) build_dir=$repo/build-asan-only; tests=(-E "$NOT_SANITIZED") ;;
  undefined) build_dir=$repo/build-ubsan; tests=(-E "$NOT_SANITIZED") ;;
  thread) build_dir=$repo/build-tsan; tests=(-R "$TSAN_TESTS" -E "$TSAN_EXCLUDED") ;;
  *) echo "test.sh: --sanitize $sanitize: expected address,undefined or thread (see --help)" >&2; exit 2 ;;
esac

# shellcheck source=scripts/lib/configure_args.sh
source "$repo/scripts/lib/configure_args.sh"
configure_args "$build_dir" "$repo"
cmake -S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE="${OPCACHE_BUILD_TYPE:-RelWithDebInfo}" \
  -DOPCACHE_SANITIZE="$sanitize" -DOPCACHE_BUILD_BENCH=OFF \
  -DOPCACHE_WERROR="$([[ "${OPCACHE_WERROR:-1}" == 0 ]] && echo OFF || echo ON)" \
  -DOPCACHE_TEST_FOLDERS="$focused" "${configure_args[@]}" >/dev/null
if [[ "$sanitize" == thread ]]; then
  targets=(--target opcache_tests)  # and, as its dependencies, the CLI and refcc
else
  targets=()                        # all: tests/install installs the libraries too
fi
cmake --build "$build_dir" -j"${OPCACHE_JOBS:-2}" "${targets[@]}"

logs=$build_dir/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
supp=$repo/scripts/sanitizers
common="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="$common:detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:log_path=$logs/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="$common:log_path=$logs/ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="$common:second_deadlock_stack=1:suppressions=$supp/tsan.supp:log_path=$logs/tsan${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

cd "$build_dir"
status=0
ctest --output-on-failure -j"${OPCACHE_JOBS:-2}" "${tests[@]}" "$@" || status=$?

shopt -s nullglob
# LeakSanitizer's "Unable to get registers from thread N." alone is not a
# finding: its stop-the-world could not read a thread that was exiting at that
# moment (a race in the tool, seen once in ~600 tests). Such a log is shown and
# set aside; any other line in a log is a report.
reports=()
for report in "$logs"/*; do
  if grep -qvE '^(==[0-9]+==Unable to get registers from thread [0-9]+\.)?$' "$report"; then
    reports+=("$report")
  else
    echo "test.sh: not a finding (LeakSanitizer could not stop an exiting thread): $report: $(cat "$report")"
  fi
done
if [[ ${#reports[@]} -gt 0 ]]; then
  for report in "${reports[@]}"; do
    echo "==== $report"
    cat "$report"
  done
  echo "test.sh: ${#reports[@]} sanitizer report(s) in $logs (above)" >&2
  exit 1
fi
echo "test.sh: no sanitizer reports ($sanitize)"
exit "$status"
