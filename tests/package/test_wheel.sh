#!/usr/bin/env bash
# The Python wheel, used the way a user would: scripts/build-wheel.sh builds
# it from BUILD_DIR's libopcache.so.0; check_wheel.py checks its files, tag
# and version (the CMake project version of SOURCE_DIR/CMakeLists.txt); a
# fresh venv of Debian's /usr/bin/python3 installs it with
# `pip install --no-index`; wheel_smoke.py, run from outside the repository
# with a clean environment (no OPCACHE_LIBRARY), imports opcache, checks it
# loaded the library inside the installed package, and runs get_or_build
# twice (built, then hit, same bytes). The source tree must be left as it was.
#
# Usage: test_wheel.sh SOURCE_DIR BUILD_DIR
# Exits non-zero if any step fails; says which one.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR" >&2
  exit 2
fi
source_dir=$(cd "$1" && pwd)
build_dir=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3

# shellcheck source=tests/package/scratch_dir.sh
source "$here/scratch_dir.sh"
scratch_dir test_wheel

step() { echo "== test_wheel: $*"; }
fail() {
  echo "test_wheel: FAILED: $*" >&2
  exit 1
}
# $1: what failed, $2: its log, shown before failing.
fail_with_log() {
  cat "$2" >&2
  fail "$1 (log above)"
}

# python/ without bytecode caches (an import elsewhere may write those).
python_tree_listing() {
  (cd "$source_dir/python" && find . -name __pycache__ -prune -o -print | LC_ALL=C sort)
}
python_tree_listing >"$tmp/python-before.txt"

version=$(sed -n 's/^project(opcache VERSION \([0-9][0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
[[ -n "$version" ]] || fail "no project(opcache VERSION ...) in $source_dir/CMakeLists.txt"
platform=$("$python" -c 'import sysconfig; print(sysconfig.get_platform().replace("-", "_").replace(".", "_"))')

# $1: the expected exit status, $2: text its stderr must hold, the rest: the
# build-wheel.sh arguments.
expect_refusal() {
  local status=0 want=$1 text=$2
  shift 2
  "$source_dir/scripts/build-wheel.sh" "$@" >"$tmp/refusal.log" 2>&1 || status=$?
  [[ $status -eq $want ]] || fail_with_log "build-wheel.sh $* exited $status, expected $want" "$tmp/refusal.log"
  grep -qF "$text" "$tmp/refusal.log" || fail_with_log "build-wheel.sh $* does not say '$text'" "$tmp/refusal.log"
}
step "build-wheel.sh refuses a build directory without the library or the version"
mkdir -p "$tmp/no-library" "$tmp/no-version"
expect_refusal 2 "$tmp/no-library/libopcache.so.0 not found; build the opcache_shared target first" \
  "$tmp/no-library" "$tmp/refused"
ln -s "$build_dir/libopcache.so.0" "$tmp/no-version/libopcache.so.0"
expect_refusal 2 "no CMAKE_PROJECT_VERSION in $tmp/no-version/CMakeCache.txt" "$tmp/no-version" "$tmp/refused"
expect_refusal 2 "usage: " "$build_dir"
[[ ! -e "$tmp/refused" ]] || fail "a refused build-wheel.sh created its OUT_DIR"

step "scripts/build-wheel.sh $build_dir $tmp/dist"
"$source_dir/scripts/build-wheel.sh" "$build_dir" "$tmp/dist" >"$tmp/build-wheel.log" 2>&1 ||
  fail_with_log "scripts/build-wheel.sh" "$tmp/build-wheel.log"
wheel=$(tail -n 1 "$tmp/build-wheel.log")
[[ -f "$wheel" ]] || fail_with_log "build-wheel.sh's last line is not a wheel: $wheel" "$tmp/build-wheel.log"
echo "test_wheel: built $wheel"

step "the wheel's files, tag and version (opcache $version, platform $platform)"
"$python" "$here/check_wheel.py" "$wheel" "$source_dir" "$build_dir" "$version" "$platform" ||
  fail "the wheel's contents"

step "$python -m venv $tmp/venv"
"$python" -m venv "$tmp/venv" >"$tmp/venv.log" 2>&1 || fail_with_log "creating the venv (python3-venv)" "$tmp/venv.log"

# The venv's tools run with a clean environment: no OPCACHE_* (so no
# OPCACHE_LIBRARY), no PYTHONPATH or LD_LIBRARY_PATH, a private HOME and XDG
# directories, so nothing but the installed wheel can provide opcache.
mkdir -p "$tmp/home" "$tmp/run"
clean_env=(env -i PATH=/usr/bin:/bin HOME="$tmp/home" XDG_CACHE_HOME="$tmp/home/.cache"
  XDG_CONFIG_HOME="$tmp/home/.config" LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1)

step "pip install --no-index $(basename "$wheel")"
(cd "$tmp/run" && "${clean_env[@]}" "$tmp/venv/bin/python" -m pip install --no-index --no-cache-dir "$wheel") 2>&1 |
  tee "$tmp/pip.log" || fail "pip install --no-index $wheel"
(cd "$tmp/run" && "${clean_env[@]}" "$tmp/venv/bin/python" -m pip show --files opcache) 2>&1 |
  tee "$tmp/pip-show.log" || fail "pip show opcache"

step "wheel_smoke.py from $tmp/run, outside the repository"
cp "$here/wheel_smoke.py" "$tmp/run/"
(cd "$tmp/run" && "${clean_env[@]}" "$tmp/venv/bin/python" -I wheel_smoke.py "$tmp/run") ||
  fail "using the installed wheel (wheel_smoke.py)"

step "the source tree's python/ is unchanged"
python_tree_listing >"$tmp/python-after.txt"
diff "$tmp/python-before.txt" "$tmp/python-after.txt" ||
  fail "building the wheel changed $source_dir/python (diff above: < before, > after)"

echo "test_wheel: ok"
