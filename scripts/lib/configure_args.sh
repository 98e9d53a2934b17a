# shellcheck shell=bash
# Sourced by scripts/build.sh and scripts/test.sh: the CMake arguments every
# build directory of theirs is configured with.
#
# configure_args BUILD_DIR REPO: sets the array `configure_args` to
#  - ccache as the compiler launcher, when installed, with paths relative to
#    the checkout (CCACHE_BASEDIR, exported), so that another clone of the
#    same sources (CI's clean clone) reuses what this machine compiled before;
#  - Ninja as the generator for a new build directory, when installed: it
#    compiles the files of several targets at once (make waits for a target's
#    dependencies before compiling its files), which keeps both cores busy.
#    A directory configured before keeps its generator (CMake refuses to
#    change it).
configure_args() {
  local build_dir=$1 repo=$2
  configure_args=()
  if command -v ccache >/dev/null 2>&1; then
    export CCACHE_BASEDIR="$repo" CCACHE_NOHASHDIR=true
    configure_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  if [[ ! -f "$build_dir/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
    configure_args+=(-G Ninja)
  fi
}
