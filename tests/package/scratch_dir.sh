# shellcheck shell=bash
# Sourced by the package and install test scripts (tests/package/test_*.sh,
# tests/install/test_install.sh): one scratch directory per run, and the
# two lines a step and a failure print.
#
# scratch_dir LABEL: creates ${TMPDIR:-/tmp}/opcache-LABEL-XXXXXX, puts its
# path in $tmp, and removes it when the script exits, unless
# OPCACHE_KEEP_TEST_DIRS is set (then prints "LABEL: keeping DIR").
# Replaces the script's EXIT trap, and sets failures=0.
#
# step TEXT: prints "== LABEL: TEXT". failed TEXT: prints "LABEL: FAILED: TEXT"
# on stderr and counts it in $failures (the script exits non-zero at its end
# when there is any).
scratch_dir() {
  scratch_label=$1
  failures=0
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/opcache-$scratch_label-XXXXXX")
  trap scratch_dir_cleanup EXIT
}

scratch_dir_cleanup() {
  if [[ -n "${OPCACHE_KEEP_TEST_DIRS:-}" ]]; then
    echo "$scratch_label: keeping $tmp"
  else
    rm -rf "$tmp"
  fi
}

step() { echo "== $scratch_label: $*"; }

failed() {
  echo "$scratch_label: FAILED: $*" >&2
  failures=$((failures + 1))
}
