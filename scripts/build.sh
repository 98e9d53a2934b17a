#!/usr/bin/env bash
# Installs dependencies (scripts/install-deps.sh) and builds everything into
# build/ (library, CLI build/opcache, tests, benchmarks).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/scripts/install-deps.sh"
cmake -S "$repo" -B "$repo/build" -DCMAKE_BUILD_TYPE="${OPCACHE_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
cmake --build "$repo/build" -j"${OPCACHE_JOBS:-2}"
