#!/usr/bin/env bash
# Builds the Debian package opcache_<version>_<arch>.deb with CPack
# (cmake/Packaging.cmake; contents in docs/operations.md, "Debian package")
# and prints its path.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<EOF
usage: scripts/package.sh [--build-dir DIR] [--output DIR]

Builds opcache_<version>_<arch>.deb and prints its path on the last line.

  (default)        installs the dependencies (scripts/install-deps.sh), configures
                   a Release build in build-package/ (no tests, no benchmarks, install
                   prefix /usr), builds the CLI and the libraries, and packages them.
  --build-dir DIR  packages an existing, configured and built build directory as it
                   is (e.g. build/): builds nothing, and fails if the CLI or the
                   libraries are missing there.
  --output DIR     where the .deb goes (default: the build directory).
  -h, --help       this help.

Needs dpkg-dev (dpkg-shlibdeps) and file. The package's Depends are computed by
dpkg-shlibdeps plus libcurl (loaded with dlopen), python3, adduser and procps;
Built-Using names the static archives inside /usr/bin/opcache.
EOF
}

build_dir=""
output_dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir)
      [[ $# -ge 2 ]] || { echo "package.sh: --build-dir needs a directory" >&2; exit 2; }
      build_dir=$2
      shift 2
      ;;
    --output)
      [[ $# -ge 2 ]] || { echo "package.sh: --output needs a directory" >&2; exit 2; }
      output_dir=$2
      shift 2
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "package.sh: unknown argument '$1' (see --help)" >&2
      exit 2
      ;;
  esac
done

# Configures and builds build-package/: what the package holds, nothing else.
build_for_package() {
  local dir=$1
  "$repo/scripts/install-deps.sh"
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then
    # As scripts/build.sh: paths relative to the checkout, for ccache hits across clones.
    export CCACHE_BASEDIR="$repo" CCACHE_NOHASHDIR=true
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  # Prefix /usr: GNUInstallDirs then puts the libraries in lib/<multiarch>.
  cmake -S "$repo" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DOPCACHE_BUILD_TESTS=OFF -DOPCACHE_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
  cmake --build "$dir" -j"${OPCACHE_JOBS:-2}" --target opcache_cli opcache_serve opcache_shared opcache_static
}

if [[ -z "$build_dir" ]]; then
  build_dir="$repo/build-package"
  build_for_package "$build_dir"
elif [[ ! -f "$build_dir/CPackConfig.cmake" ]]; then
  echo "package.sh: $build_dir/CPackConfig.cmake not found: not a configured opcache build directory" >&2
  exit 2
fi
build_dir=$(cd "$build_dir" && pwd)
output_dir=${output_dir:-$build_dir}
mkdir -p "$output_dir"
output_dir=$(cd "$output_dir" && pwd)

for tool in dpkg-shlibdeps file; do
  command -v "$tool" >/dev/null 2>&1 ||
    { echo "package.sh: $tool not found (Debian packages dpkg-dev and file)" >&2; exit 1; }
done

# CPack puts its staging tree and the package under -B; it builds nothing
# (cmake/Packaging.cmake sets CMAKE_SKIP_INSTALL_ALL_DEPENDENCY).
log="$output_dir/cpack.log"
if ! (cd "$build_dir" && cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$output_dir") >"$log" 2>&1; then
  cat "$log" >&2
  echo "package.sh: cpack failed (log: $log)" >&2
  exit 1
fi
deb=$(sed -n 's/^CPack: - package: \(.*\.deb\) generated\.$/\1/p' "$log" | tail -n 1)
if [[ -z "$deb" || ! -f "$deb" ]]; then
  cat "$log" >&2
  echo "package.sh: cpack did not report a .deb (log: $log)" >&2
  exit 1
fi
rm -rf "$output_dir/_CPack_Packages"
echo "$deb"
