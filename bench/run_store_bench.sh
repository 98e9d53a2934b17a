#!/usr/bin/env bash
# Builds bench_store (if needed) and runs the store benchmark with the
# defaults of the issue: 1,000 real kernels, 5,000 hits, 100,000 index rows.
# Writes the JSON summary to <build>/bench/store.json and keeps the generated
# kernel corpus in <build>/bench/corpus, where later runs reuse it.
#
#   bench/run_store_bench.sh                 # the full benchmark
#   bench/run_store_bench.sh --kernels 200   # extra arguments go to bench_store
#                                            # (later flags win over the defaults)
#
# OPCACHE_BUILD_DIR selects another build directory (default: <repo>/build).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${OPCACHE_BUILD_DIR:-$repo/build}

cmake -S "$repo" -B "$build" >/dev/null
cmake --build "$build" -j2 --target bench_store

mkdir -p "$build/bench"
exec "$build/bench/bench_store" \
  --corpus "$build/bench/corpus" \
  --json "$build/bench/store.json" \
  "$@"
