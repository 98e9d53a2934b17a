#!/usr/bin/env bash
# Installs the Debian 12 packages opcache needs to build (and with --test,
# --bench or --fuzz, to test, benchmark or fuzz it).
# Idempotent: does nothing (not even `apt-get update`) when all are present.
# Run as root, or as a user with sudo.
#
# The dashboard's browser test (tests/ui/dashboard.mjs, run by the CTest test
# "e2e::dashboard …") drives Debian's chromium through the npm package
# playwright-core, pinned in tests/ui/package-lock.json: with --test, when
# tests/ui/node_modules/playwright-core is missing, this script runs
# `npm ci --prefix tests/ui --no-audit --no-fund` (the npm registry only; no
# browser is downloaded: playwright-core ships none). Idempotent as well:
# nothing is fetched when it is present. Without node/npm it says so and goes
# on; the test then reports itself skipped.
#
#   scripts/install-deps.sh          what the build and the demo need (scripts/demo.sh, build.sh)
#   scripts/install-deps.sh --test   also what the test suite needs (scripts/test.sh)
#   scripts/install-deps.sh --bench  also what bench/run needs (wrk, nginx, gnuplot; ccache is a baseline too)
#                                    and valgrind (scripts/hit-path-order.sh)
#   scripts/install-deps.sh --fuzz   also what scripts/fuzz.sh needs (clang 14 and its libFuzzer runtime)
# The demo's list is short on purpose: a first result within minutes on a
# fresh machine (README.md, "Set up"); the browser, clang and the package
# tools come with the tests.
set -euo pipefail

packages=(
  # toolchain (ccache: rebuilds, and CI's clean clone, reuse what was compiled before)
  # (ninja: compiles the files of several targets at once; scripts/lib/configure_args.sh)
  cmake ninja-build g++ gcc make pkg-config ccache
  # libraries the code links
  libcurl4-openssl-dev libssl-dev libzstd-dev libsqlite3-dev
  nlohmann-json3-dev libcli11-dev libinih-dev libboost-dev
  # the demo's driver (scripts/refcc_demo.py)
  python3
)
test_packages=(
  # tests
  doctest-dev libvalijson-dev openssl zstd sqlite3 procps curl git
  # the locking rules' check (scripts/check_thread_safety.py: clang++-14 -Wthread-safety)
  clang-14
  # the dashboard's browser test (tests/ui/): headless Chromium
  chromium
  # the package tests (tests/package/): the wheel built offline (python3-build,
  # setuptools, venv), the .deb (dpkg-dev and file: dpkg-shlibdeps for CPack) and its
  # systemd unit checked with systemd-analyze (systemd)
  python3-build python3-setuptools python3-wheel python3-venv python3-pip dpkg-dev file systemd
  # the replica deployment's manifest read by tests/packaging/test_replica_packaging.py
  python3-yaml
  # the kill and durability tests (tests/e2e/test_kill.cpp, tests/remote/test_remote_hit_sync.cpp)
  # hold or count system calls with strace
  strace
  # exec's tracer seen from a statically linked program (tests/trace/, tests/e2e/test_exec_observed.cpp)
  busybox-static
)
with_tests=false
case "${1:-}" in
  "") ;;
  --test) with_tests=true ;;
  --bench) with_tests=true
    # baselines bench/run measures against in the same run, and gnuplot for its charts
    # (valgrind: scripts/hit-path-order.sh lists the functions a hit runs)
    packages+=(wrk nginx-light gnuplot-nox valgrind) ;;
  --fuzz) with_tests=true
    packages+=(libclang-rt-14-dev) ;;  # and clang-14, among the test packages
  *) echo "usage: install-deps.sh [--test|--bench|--fuzz]" >&2
     exit 2 ;;
esac
if [ $# -gt 1 ]; then
  echo "usage: install-deps.sh [--test|--bench|--fuzz]" >&2
  exit 2
fi
if $with_tests; then
  packages+=("${test_packages[@]}")
fi

repo=$(cd "$(dirname "$0")/.." && pwd)

# tests/ui's npm packages (playwright-core), exactly as locked.
install_ui_test_packages() {
  if ! $with_tests || [ -d "$repo/tests/ui/node_modules/playwright-core" ]; then
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: npm not found: tests/ui/node_modules is not installed (the dashboard test will be skipped)" >&2
    return 0
  fi
  echo "install-deps: npm ci --prefix tests/ui"
  npm ci --prefix "$repo/tests/ui" --no-audit --no-fund
}

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  install_ui_test_packages
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "install-deps: missing packages (${missing[*]}) and not root; run as root or install sudo" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_ui_test_packages
