#!/usr/bin/env bash
# Builds the opcache Python wheel from a CMake build directory, offline.
#
# Usage: scripts/build-wheel.sh BUILD_DIR OUT_DIR
#
# BUILD_DIR must hold the built library (target opcache_shared:
# libopcache.so.0 -> libopcache.so.0.<minor>.<patch>) and its CMakeCache.txt.
# The script stages python/ (pyproject.toml, setup.py, README.md, opcache/)
# into a temporary directory, copies in the library's real file under its
# SONAME (opcache/_native/libopcache.so.0), the tracer's preload library
# beside it where the build has one (libopcache-trace-preload.so, x86_64),
# and the CMake project version
# (VERSION, read by setup.py), and runs Debian's
# `/usr/bin/python3 -m build --wheel --no-isolation` there (setuptools and
# wheel from python3-build's dependencies; nothing is downloaded). Nothing is
# written into the source tree. The wheel (opcache-<version>-py3-none-
# <platform>.whl) lands in OUT_DIR, which is created if needed; the last line
# of the output is its path. OPCACHE_PYTHON overrides the interpreter.
#
# Exits 2 on bad arguments or a build directory without the library, 1 when
# the build fails.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR OUT_DIR" >&2
  exit 2
fi
if [[ ! -d "$1" ]]; then
  echo "$0: build directory $1 does not exist" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${OPCACHE_PYTHON:-/usr/bin/python3}
soname=libopcache.so.0

library="$build_dir/$soname"
if [[ ! -e "$library" ]]; then
  echo "$0: $library not found; build the opcache_shared target first" \
    "(cmake --build $build_dir --target opcache_shared)" >&2
  exit 2
fi
# The version of the build whose library is packaged, as CMake configured it
# from project(opcache VERSION ...) in CMakeLists.txt.
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
if [[ -z "$version" ]]; then
  echo "$0: no CMAKE_PROJECT_VERSION in $build_dir/CMakeCache.txt; is $build_dir a configured opcache build directory?" >&2
  exit 2
fi
if ! "$python" -c 'import build, setuptools, wheel' 2>/dev/null; then
  echo "$0: $python lacks the modules build, setuptools or wheel; install python3-build" \
    "(scripts/install-deps.sh)" >&2
  exit 2
fi

mkdir -p "$2"
out_dir=$(cd "$2" && pwd)
stage=$(mktemp -d "${TMPDIR:-/tmp}/opcache-wheel-XXXXXX")
trap 'rm -rf "$stage"' EXIT

# Sources only: no __pycache__, no _native/ left by hand in the source tree.
cp "$repo/python/pyproject.toml" "$repo/python/setup.py" "$repo/python/README.md" "$stage/"
mkdir -p "$stage/opcache/_native"
cp "$repo/python/opcache/"*.py "$repo/python/opcache/py.typed" "$stage/opcache/"
cp -L "$library" "$stage/opcache/_native/$soname"
# The tracer's preload library (x86_64 builds), found beside libopcache.so.0.
preload="$build_dir/libopcache-trace-preload.so"
if [[ -e "$preload" ]]; then
  cp -L "$preload" "$stage/opcache/_native/"
fi
echo "$version" >"$stage/VERSION"

echo "== build-wheel: opcache $version with $(readlink -f "$library")"
(cd "$stage" && PYTHONDONTWRITEBYTECODE=1 "$python" -m build --wheel --no-isolation --outdir "$stage/dist" .) || {
  echo "$0: $python -m build failed (output above)" >&2
  exit 1
}
wheels=("$stage"/dist/*.whl)
if [[ ${#wheels[@]} -ne 1 || ! -f "${wheels[0]}" ]]; then
  echo "$0: expected one wheel in $stage/dist, found: ${wheels[*]}" >&2
  exit 1
fi
wheel="$out_dir/$(basename "${wheels[0]}")"
mv -f "${wheels[0]}" "$wheel"
echo "$wheel"
