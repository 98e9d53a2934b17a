#!/usr/bin/env bash
# The test command of README.md and CI: installs dependencies, builds, and
# runs the whole test suite with CTest. Extra arguments go to ctest
# (e.g. `scripts/test.sh -R cli` to run only the CLI tests).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/scripts/build.sh"
cd "$repo/build"
ctest --output-on-failure -j"${OPCACHE_JOBS:-2}" "$@"
