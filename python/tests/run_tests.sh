#!/bin/sh
# Runs the Python binding's unittest suite with the system Python.
# Usage: python/tests/run_tests.sh <build dir>
# The build dir must hold libopcache.so (target opcache_shared) and the
# opcache CLI (target opcache_cli). Exits non-zero when a test fails.
set -eu

if [ $# -ne 1 ]; then
  echo "usage: $0 <build dir>" >&2
  exit 2
fi
if [ ! -d "$1" ]; then
  echo "$0: build directory $1 does not exist" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
tests_dir=$(cd "$(dirname "$0")" && pwd)
python=${OPCACHE_PYTHON:-/usr/bin/python3}

if [ ! -e "$build_dir/libopcache.so" ]; then
  echo "$0: $build_dir/libopcache.so not found; build the opcache_shared target first" >&2
  exit 2
fi
if [ ! -x "$build_dir/opcache" ]; then
  echo "$0: $build_dir/opcache not found; build the opcache_cli target first" >&2
  exit 2
fi

OPCACHE_LIBRARY="$build_dir/libopcache.so"
OPCACHE_CLI="$build_dir/opcache"
export OPCACHE_LIBRARY OPCACHE_CLI
# Keep bytecode out of the source tree.
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE

exec "$python" -m unittest discover -s "$tests_dir" -t "$tests_dir" -v
