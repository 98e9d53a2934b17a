#!/usr/bin/env bash
# Installs dependencies (scripts/install-deps.sh) and builds into build/:
# everything (library, CLI build/opcache, the server build/opcache-serve, refcc,
# tests, benchmarks), or only
# the CMake targets given as arguments (scripts/demo.sh runs
# `build.sh --product-only opcache_cli opcache_shared refcc`: what the demo
# runs, without configuring the test suite).
#   scripts/build.sh [--product-only] [TARGET...]
# Warnings in product code are errors (-Werror); OPCACHE_WERROR=0 turns that off.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# --product-only (scripts/demo.sh): the test suite and the benchmarks are not
# configured, so their packages (doctest, valijson…) need not be installed.
suite=ON
if [[ "${1:-}" == --product-only ]]; then
  suite=OFF
  shift
fi
"$repo/scripts/install-deps.sh"
# shellcheck source=scripts/lib/configure_args.sh
source "$repo/scripts/lib/configure_args.sh"
configure_args "$repo/build" "$repo"
# Warnings in product code are errors (CMakeLists.txt, OPCACHE_WERROR, on by
# default); OPCACHE_WERROR=0 in the environment turns that off (README.md).
cmake -S "$repo" -B "$repo/build" -DCMAKE_BUILD_TYPE="${OPCACHE_BUILD_TYPE:-Release}" \
  -DOPCACHE_WERROR="$([[ "${OPCACHE_WERROR:-1}" == 0 ]] && echo OFF || echo ON)" \
  -DOPCACHE_BUILD_TESTS=$suite -DOPCACHE_BUILD_BENCH=$suite "${configure_args[@]}" >/dev/null
targets=()
for target in "$@"; do targets+=(--target "$target"); done
cmake --build "$repo/build" -j"${OPCACHE_JOBS:-2}" "${targets[@]}"
