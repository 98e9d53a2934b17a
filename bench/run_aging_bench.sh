#!/usr/bin/env bash
# Runs the aging benchmark with the defaults of the requirement: hits and puts
# on stores of 1,000 real kernels with aging enabled against disabled, and gc
# on a store of 100,000 entries. Builds nothing: build bench_aging first
# (OPCACHE_BUILD_BENCH=ON, target bench_aging). Writes the JSON summary to
# <build>/bench/aging.json and shares the kernel corpus in <build>/bench/corpus
# with bench_store (generated on first use, reused later).
#
#   bench/run_aging_bench.sh                   # the full benchmark
#   bench/run_aging_bench.sh --gc-entries 20000 --hits 1000
#                                              # extra arguments go to bench_aging
#                                              # (later flags win over the defaults)
#
# OPCACHE_BUILD_DIR selects another build directory (default: <repo>/build).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${OPCACHE_BUILD_DIR:-$repo/build}
binary=$build/bench/bench_aging

if [[ ! -x $binary ]]; then
  echo "run_aging_bench: $binary not found; build it first:" >&2
  echo "  cmake -S $repo -B $build -DCMAKE_BUILD_TYPE=Release -DOPCACHE_BUILD_BENCH=ON" >&2
  echo "  cmake --build $build -j2 --target bench_aging" >&2
  exit 2
fi

mkdir -p "$build/bench"
exec "$binary" \
  --corpus "$build/bench/corpus" \
  --json "$build/bench/aging.json" \
  "$@"
