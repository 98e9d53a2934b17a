#!/usr/bin/env bash
# Uses an installed opcache the way a user would: (a) a C program through
# pkg-config and <opcache/opcache.h>, (b) a CMake project through
# find_package(opcache) and the C++ API; and checks the installed files.
#
# Usage: test_install.sh BUILD_DIR TESTS_INSTALL_DIR
#          installs BUILD_DIR into a fresh prefix (cmake --install), then checks it;
#        test_install.sh --prefix PREFIX TESTS_INSTALL_DIR
#          checks an existing installation, e.g. the usr/ of an extracted .deb
#          (tests/package/test_deb.sh).
# Exits non-zero if any step fails; says which one.
set -euo pipefail

usage() {
  echo "usage: $0 BUILD_DIR TESTS_INSTALL_DIR" >&2
  echo "       $0 --prefix PREFIX TESTS_INSTALL_DIR" >&2
  exit 2
}
build_dir=""
given_prefix=""
if [[ $# -eq 3 && "$1" == --prefix ]]; then
  given_prefix=$(cd "$2" && pwd)
  shift 2
elif [[ $# -eq 2 ]]; then
  build_dir=$(cd "$1" && pwd)
  shift
else
  usage
fi

# A sanitizer build (cmake/Sanitizers.cmake) runs this test with the ASan
# runtime in LD_PRELOAD, for the consumers: they are not instrumented but load
# the instrumented libopcache.so. The tools (cmake, make, cc, ldd) run without
# it: GNU make itself trips ASan's string checks.
consumer_preload=${LD_PRELOAD:-}
unset LD_PRELOAD
source_dir=$(cd "$1" && pwd)

# shellcheck source=tests/package/scratch_dir.sh
source "$(dirname "$0")/../package/scratch_dir.sh"
scratch_dir test_install


if [[ -n "$given_prefix" ]]; then
  prefix=$given_prefix
  step "checking the installation in $prefix"
else
  prefix="$tmp/prefix"
  step "cmake --install $build_dir --prefix $prefix"
  cmake --install "$build_dir" --prefix "$prefix" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log" >&2
    echo "test_install: FAILED: cmake --install" >&2
    exit 1
  }
fi

# The library directory the install used (lib, lib64, lib/<multiarch>).
pc_file=$(find "$prefix" -path '*/pkgconfig/opcache.pc' -print -quit)
if [[ -z "$pc_file" ]]; then
  echo "test_install: FAILED: no pkgconfig/opcache.pc under $prefix; installed files:" >&2
  (cd "$prefix" && find . -type f | sort) >&2
  exit 1
fi
libdir=$(dirname "$(dirname "$pc_file")")
echo "test_install: libdir is ${libdir#"$prefix"/}"
for file in include/opcache/opcache.h include/opcache/opcache.hpp include/opcache/version.hpp; do
  [[ -f "$prefix/$file" ]] || failed "$file is not installed"
done
[[ -e "$libdir/libopcache.so" ]] || failed "libopcache.so is not installed in $libdir"
[[ -f "$libdir/libopcache.a" ]] || failed "libopcache.a is not installed in $libdir"
[[ -f "$libdir/cmake/opcache/opcacheConfig.cmake" ]] || failed "opcacheConfig.cmake is not installed in $libdir/cmake/opcache"
[[ -x "$prefix/bin/opcache" ]] || failed "bin/opcache is not installed"
[[ -x "$prefix/bin/opcache-serve" ]] || failed "bin/opcache-serve (the team server, which opcache serve runs) is not installed"

# --- (a) C consumer through pkg-config ------------------------------------
step "pkg-config --cflags --libs opcache (PKG_CONFIG_PATH=$libdir/pkgconfig)"
pc_flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs opcache)
echo "test_install: pkg-config says: $pc_flags"
# The flags must point into the prefix the package was installed to; flags
# for another prefix would build against some other (or no) opcache. Paths
# are compared after normalisation, so ${pcfiledir}/../.. forms are fine.
# $1: the flag (-I or -L), $2: the directory it must name.
pc_names_dir() {
  local word want
  want=$(realpath -m "$2")
  for word in $pc_flags; do
    if [[ "$word" == "$1"* && $(realpath -m "${word#"$1"}") == "$want" ]]; then
      return 0
    fi
  done
  return 1
}
if ! pc_names_dir -I "$prefix/include" || ! pc_names_dir -L "$libdir"; then
  failed "opcache.pc does not describe the prefix it was installed to (expected -I$prefix/include and -L$libdir); \
its prefix line is: $(grep '^prefix=' "$pc_file")"
  # Still check the C ABI, with the prefix derived from the .pc file's location.
  pc_flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --define-prefix --cflags --libs opcache)
  echo "test_install: continuing with pkg-config --define-prefix: $pc_flags"
fi

step "cc -std=c11 c_consumer/main.c"
# shellcheck disable=SC2086  # pkg-config output is a list of words
if cc -std=c11 -Wall -Wextra -Wpedantic -Werror -o "$tmp/c_consumer" "$source_dir/c_consumer/main.c" $pc_flags; then
  step "run c_consumer"
  if LD_PRELOAD="$consumer_preload" LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$tmp/c_consumer" "$tmp/c_work" \
      >"$tmp/c_consumer.out" 2>&1; then
    cat "$tmp/c_consumer.out"
    grep -qx 'c_consumer: ok' "$tmp/c_consumer.out" || failed "c_consumer exited 0 without printing 'c_consumer: ok'"
  else
    cat "$tmp/c_consumer.out" >&2
    failed "c_consumer exited non-zero"
  fi
  # The binary must have used the installed library, not one from elsewhere.
  # ldd's output is captured first: with pipefail, `ldd | grep -q` fails
  # whenever grep exits at its match before ldd has finished writing (SIGPIPE).
  linked=$(LD_LIBRARY_PATH="$libdir" ldd "$tmp/c_consumer" || true)
  if ! grep -qF "$libdir/libopcache.so" <<<"$linked"; then
    failed "c_consumer is not linked against $libdir/libopcache.so"
  fi
else
  failed "compiling c_consumer/main.c"
fi

# --- (b) CMake consumer through find_package --------------------------------
step "configure cmake_consumer with -DCMAKE_PREFIX_PATH=$prefix"
if cmake -S "$source_dir/cmake_consumer" -B "$tmp/cmake_consumer_build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake_consumer_configure.log" 2>&1; then
  grep 'opcache .* from' "$tmp/cmake_consumer_configure.log" || true
  step "build cmake_consumer"
  if cmake --build "$tmp/cmake_consumer_build" >"$tmp/cmake_consumer_build.log" 2>&1; then
    step "run cmake_consumer"
    if LD_PRELOAD="$consumer_preload" LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$tmp/cmake_consumer_build/cmake_consumer" "$tmp/cmake_work" >"$tmp/cmake_consumer.out" 2>&1; then
      cat "$tmp/cmake_consumer.out"
      grep -qx 'cmake_consumer: ok' "$tmp/cmake_consumer.out" ||
        failed "cmake_consumer exited 0 without printing 'cmake_consumer: ok'"
    else
      cat "$tmp/cmake_consumer.out" >&2
      failed "cmake_consumer exited non-zero"
    fi
  else
    cat "$tmp/cmake_consumer_build.log" >&2
    failed "building cmake_consumer"
  fi
else
  cat "$tmp/cmake_consumer_configure.log" >&2
  failed "configuring cmake_consumer (find_package(opcache))"
fi

if [[ $failures -ne 0 ]]; then
  echo "test_install: $failures step(s) failed" >&2
  exit 1
fi
echo "test_install: ok"
