#!/usr/bin/env bash
# The Debian package (scripts/package.sh, cmake/Packaging.cmake), checked
# without installing it on this machine:
#  * dpkg-deb fields: Package, Version, Architecture; Depends names the
#    package of every library the program and libopcache.so need (NEEDED, and
#    libcurl and SQLite, which are loaded with dlopen) plus python3, adduser and procps;
#    Built-Using names the static archives' source packages;
#  * control files: conffiles, executable maintainer scripts that `sh -n`
#    (and shellcheck, when installed) accept, the ldconfig trigger, shlibs;
#  * contents (`dpkg-deb -c`, printed) and modes, stripped binaries;
#  * extracted with `dpkg-deb -x`: `opcache version`; the C (pkg-config)
#    and CMake consumers built and run against it (tests/install/test_install.sh
#    --prefix); the Python binding imported from it;
#  * the systemd unit: `systemd-analyze verify` and `systemd-analyze security
#    --offline` (exposure at most 2.0) with the extracted tree as root (PID 1
#    need not be systemd).
# Installing it is tests/package/test_deb_install.sh.
#
# Usage: test_deb.sh DEB VERSION SOURCE_DIR
# Exits non-zero if any check fails, naming each. Without systemd-analyze,
# prints "test_deb: SKIPPED: …" after the other checks passed (CTest reports
# the test as skipped).
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 DEB VERSION SOURCE_DIR" >&2
  exit 2
fi
deb=$(realpath "$1")
version=$2
source_dir=$(cd "$3" && pwd)

# shellcheck source=tests/package/scratch_dir.sh
source "$(dirname "$0")/scratch_dir.sh"
scratch_dir test_deb

# $1: a comma-separated Debian relationship field; $2: a package name.
# True if the field names the package (any version constraint).
field_names() {
  local item
  while read -r item; do
    [[ "${item%% *}" == "$2" ]] && return 0
  done < <(tr ',' '\n' <<<"$1" | sed 's/^ *//')
  return 1
}

[[ -f "$deb" ]] || { echo "test_deb: FAILED: $deb does not exist (package.deb.build makes it)" >&2; exit 1; }

# --- fields -----------------------------------------------------------------
step "dpkg-deb --field $deb"
field() { dpkg-deb --field "$deb" "$1"; }
[[ "$(field Package)" == opcache ]] || failed "Package is '$(field Package)', not opcache"
[[ "$(field Version)" == "$version" ]] || failed "Version is '$(field Version)', not $version"
arch=$(dpkg --print-architecture)
[[ "$(field Architecture)" == "$arch" ]] || failed "Architecture is '$(field Architecture)', not $arch"
[[ "$(basename "$deb")" == "opcache_${version}_${arch}.deb" ]] || failed "file name $(basename "$deb") is not opcache_${version}_${arch}.deb"
depends=$(field Depends)
built_using=$(field Built-Using)
echo "test_deb: Depends: $depends"
echo "test_deb: Built-Using: $built_using"
for package in python3 adduser procps; do
  field_names "$depends" "$package" || failed "Depends does not name $package"
done

# --- contents ---------------------------------------------------------------
step "dpkg-deb --contents"
dpkg-deb --contents "$deb" >"$tmp/contents"
# "./usr/bin/opcache" etc., and "MODE OWNER PATH" for the checks of modes.
awk '{print $6}' "$tmp/contents" | sed 's|^\./|/|; /\/$/d' | sort >"$tmp/files"
echo "test_deb: the package's files:"
sed 's/^/  /' "$tmp/files"
libdir=$(sed -n 's|^\(.*\)/pkgconfig/opcache\.pc$|\1|p' "$tmp/files")
[[ -n "$libdir" ]] || failed "no pkgconfig/opcache.pc in the package"
for file in /usr/bin/opcache /usr/bin/opcache-serve "$libdir/libopcache.so" "$libdir/libopcache.so.0" "$libdir/libopcache.so.$version" \
  "$libdir/libopcache.a" "$libdir/opcache/libopcache-trace-preload.so" /usr/include/opcache/opcache.h /usr/include/opcache/opcache.hpp \
  /usr/include/opcache/version.hpp "$libdir/cmake/opcache/opcacheConfig.cmake" \
  "$libdir/cmake/opcache/opcacheConfigVersion.cmake" "$libdir/cmake/opcache/opcacheTargets.cmake" \
  /usr/lib/python3/dist-packages/opcache/__init__.py /usr/lib/python3/dist-packages/opcache/_lib.py \
  /lib/systemd/system/opcache-serve.service /etc/opcache/serve.ini /etc/opcache/tokens \
  /usr/share/doc/opcache/README.md /usr/share/doc/opcache/copyright /usr/share/doc/opcache/docs/operations.md; do
  grep -qxF "$file" "$tmp/files" || failed "$file is not in the package"
done
for python_file in "$source_dir"/python/opcache/*.py; do
  grep -qxF "/usr/lib/python3/dist-packages/opcache/$(basename "$python_file")" "$tmp/files" ||
    failed "python/opcache/$(basename "$python_file") is not in the package"
done
if grep -E '/(__pycache__|tests)/|\.pyc$' "$tmp/files"; then
  failed "the package holds Python byte code or tests (above)"
fi
# $1: path, $2: expected "MODE OWNER" as dpkg-deb -c shows them.
mode_is() {
  local got
  got=$(awk -v p=".$1" '$6 == p {print $1, $2}' "$tmp/contents")
  [[ "$got" == "$2" ]] || failed "$1 is '$got' in the package, not '$2'"
}
mode_is /etc/opcache/tokens "-rw-r----- root/root"
mode_is /etc/opcache/serve.ini "-rw-r--r-- root/root"
mode_is /usr/bin/opcache "-rwxr-xr-x root/root"
mode_is /usr/bin/opcache-serve "-rwxr-xr-x root/root"
mode_is /lib/systemd/system/opcache-serve.service "-rw-r--r-- root/root"

# --- control files ----------------------------------------------------------
step "dpkg-deb --control"
dpkg-deb --control "$deb" "$tmp/control"
if [[ "$(sort "$tmp/control/conffiles" 2>/dev/null)" != $'/etc/opcache/serve.ini\n/etc/opcache/tokens' ]]; then
  failed "conffiles is not exactly /etc/opcache/serve.ini and /etc/opcache/tokens: $(cat "$tmp/control/conffiles" 2>&1)"
fi
for script in postinst prerm postrm; do
  if [[ ! -x "$tmp/control/$script" ]]; then
    failed "maintainer script $script is missing or not executable"
    continue
  fi
  sh -n "$tmp/control/$script" || failed "sh -n $script"
  if command -v shellcheck >/dev/null 2>&1; then
    shellcheck --shell=sh "$tmp/control/$script" || failed "shellcheck $script"
  fi
done
grep -q 'adduser --system' "$tmp/control/postinst" 2>/dev/null || failed "postinst does not create a system user"
grep -qx 'activate-noawait ldconfig' "$tmp/control/triggers" 2>/dev/null ||
  failed "no 'activate-noawait ldconfig' trigger: the ldconfig cache would not know libopcache.so.0"
grep -q "^libopcache 0 opcache" "$tmp/control/shlibs" 2>/dev/null || failed "shlibs does not declare libopcache 0"

# --- extracted --------------------------------------------------------------
root="$tmp/root"
step "dpkg-deb --extract $deb $root"
dpkg-deb --extract "$deb" "$root"
usr_libdir="$root$libdir"

step "opcache version (extracted)"
if out=$("$root/usr/bin/opcache" version 2>&1); then
  echo "$out"
  [[ "$out" == "opcache $version "* ]] || failed "opcache version printed '$out', not 'opcache $version …'"
else
  failed "the extracted opcache version exited non-zero: $out"
fi
# serve.ini's keys, set or shown commented out, are keys of [serve] (the
# ones set are also read by package.deb_install's run of the service).
step "serve.ini's keys against opcache serve --help"
"$root/usr/bin/opcache" serve --help >"$tmp/serve-help"
while read -r key; do
  grep -qF "[serve] $key;" "$tmp/serve-help" || failed "serve.ini names '$key', which is no [serve] key of opcache serve"
done < <(sed -n 's/^#\{0,1\} *\([a-z_]*\) *= .*/\1/p' "$root/etc/opcache/serve.ini")
for binary in "$root/usr/bin/opcache" "$root/usr/bin/opcache-serve" "$usr_libdir/libopcache.so.$version"; do
  if file -L "$binary" | grep -q 'not stripped'; then
    failed "$(basename "$binary") is not stripped"
  fi
done
sections=$(objdump -h "$usr_libdir/libopcache.a")  # captured: `objdump | grep -q` under pipefail (SIGPIPE)
if grep -q '\.debug_info' <<<"$sections"; then
  failed "libopcache.a still has debug information"
fi

# Depends against what the binaries really need. The program's libraries
# linked statically must not be NEEDED (the description says they are inside).
step "Depends covers NEEDED and dlopen's libcurl and SQLite"
# $1: a soname; the package that holds it on this machine (ldconfig's
# cache). dpkg knows a file by the path its package ships, which with
# Debian 12's merged /usr may be /lib/… or /usr/lib/…, the link or its target.
package_of_soname() {
  local path found candidate
  path=$(/sbin/ldconfig -p | awk -v s="$1" '$1 == s && /x86-64/ {print $NF; exit}')
  [[ -n "$path" ]] || path=$(/sbin/ldconfig -p | awk -v s="$1" '$1 == s {print $NF; exit}')
  [[ -n "$path" ]] || return 1
  for found in "$path" "$(realpath "$path")"; do
    for candidate in "$found" "${found#/usr}" "/usr$found"; do
      if dpkg-query --search "$candidate" >"$tmp/owner" 2>/dev/null; then
        sed -n '1s/^\([^:,]*\).*/\1/p' "$tmp/owner"
        return 0
      fi
    done
  done
  return 1
}
needed=$( (readelf -d "$root/usr/bin/opcache"; readelf -d "$root/usr/bin/opcache-serve"
  readelf -d "$usr_libdir/libopcache.so.$version") |
  sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
# remote/curl_library.cpp passes the soname to dlopen(), in both binaries.
curl_soname=$(grep -aoE -m 1 'libcurl[-a-z]*\.so\.[0-9]+' "$usr_libdir/libopcache.so.$version" | head -n 1 || true)
[[ -n "$curl_soname" ]] || failed "no libcurl soname in libopcache.so (remote/curl_library.cpp loads it by name)"
grep -aqF "$curl_soname" "$root/usr/bin/opcache" || failed "no $curl_soname in /usr/bin/opcache"
# store/sqlite_library.cpp loads SQLite by name too, when the index is first used.
sqlite_soname=$(grep -aoE -m 1 'libsqlite3\.so\.[0-9]+' "$root/usr/bin/opcache" | head -n 1 || true)
[[ -n "$sqlite_soname" ]] || failed "no libsqlite3 soname in /usr/bin/opcache (store/sqlite_library.cpp loads it by name)"
for soname in $needed $curl_soname $sqlite_soname; do
  package=$(package_of_soname "$soname" || true)
  if [[ -z "$package" ]]; then
    failed "no package on this machine holds $soname"
  elif ! field_names "$depends" "$package"; then
    failed "$soname is needed (package $package) but Depends does not name $package"
  fi
done
for program in opcache opcache-serve; do
  for archive in libssl libcrypto libsqlite3 libzstd libinih libstdc++ libm; do
    if readelf -d "$root/usr/bin/$program" | grep -q "NEEDED.*\[$archive\.so"; then
      failed "/usr/bin/$program loads $archive dynamically, yet the package says it is linked statically"
    fi
  done
done
description=$(field Description)
for source in openssl libzstd libinih glibc; do
  field_names "$built_using" "$source" || failed "Built-Using does not name $source (linked statically into opcache)"
  grep -q "^ *$source [0-9]" <<<"$description" || failed "Description does not list $source"
done
field_names "$built_using" "$(dpkg-query --show --showformat='${source:Package}' "libstdc++-$(gcc -dumpversion | cut -d. -f1)-dev")" ||
  failed "Built-Using does not name GCC's source package (libstdc++ is linked statically)"

step "C and CMake consumers against the extracted package"
"$source_dir/tests/install/test_install.sh" --prefix "$root/usr" "$source_dir/tests/install" ||
  failed "tests/install/test_install.sh --prefix $root/usr (above)"

step "Python binding (extracted), OPCACHE_LIBRARY=$usr_libdir/libopcache.so.0"
if out=$(cd "$tmp" && env -u PYTHONHOME PYTHONPATH="$root/usr/lib/python3/dist-packages" \
    OPCACHE_LIBRARY="$usr_libdir/libopcache.so.0" python3 -s -c '
import opcache, sys
print(opcache.__file__, opcache.version())
sys.exit(0 if opcache.__file__.startswith(sys.argv[1]) else 3)' "$root/" 2>&1); then
  echo "$out"
  [[ "$out" == *" $version" ]] || failed "the binding's opcache.version() is not $version: $out"
else
  failed "importing the extracted Python binding: $out"
fi

# --- the systemd unit ------------------------------------------------------
unit="$root/lib/systemd/system/opcache-serve.service"
step "the unit's settings"
for line in User=opcache Group=opcache StateDirectory=opcache "ExecReload=/bin/kill -HUP \$MAINPID" \
  NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes PrivateDevices=yes \
  "ExecStart=/usr/bin/opcache --config /etc/opcache/serve.ini serve"; do
  grep -qxF "$line" "$unit" || failed "the unit has no line '$line'"
done
grep -q '^LimitNOFILE=[0-9]' "$unit" || failed "the unit sets no LimitNOFILE"
if grep -q '^DynamicUser=yes' "$unit"; then
  failed "the unit uses DynamicUser (the package creates the user opcache)"
fi

skipped=""
if command -v systemd-analyze >/dev/null 2>&1; then
  # A root holding the unit, the programs it runs (the extracted opcache;
  # /bin/kill of procps, a Depends) and this machine's units (the targets it
  # names), laid out as Debian 12 is (/bin and /lib link into /usr).
  vroot="$tmp/verify-root"
  mkdir -p "$vroot/usr/bin" "$vroot/usr/lib/systemd"
  ln -s usr/bin "$vroot/bin"
  ln -s usr/lib "$vroot/lib"
  cp -a "$(realpath /lib/systemd/system)" "$vroot/usr/lib/systemd/system"
  cp "$unit" "$vroot/usr/lib/systemd/system/"
  cp "$root/usr/bin/opcache" "$(realpath /bin/kill)" "$vroot/usr/bin/"
  step "systemd-analyze verify --root=$vroot opcache-serve.service"
  # Warnings (an unknown key, a bad value) are printed with exit status 0: any output fails.
  if ! out=$(systemd-analyze verify --root="$vroot" opcache-serve.service 2>&1) || [[ -n "$out" ]]; then
    failed "systemd-analyze verify: ${out:-exit status non-zero}"
  fi
  step "systemd-analyze security --offline=yes (exposure at most 2.0)"
  if ! systemd-analyze security --offline=yes --root="$vroot" --threshold=20 opcache-serve.service >"$tmp/security" 2>&1; then
    cat "$tmp/security" >&2
    failed "systemd-analyze security: the unit's exposure is above 2.0 (above)"
  fi
  grep 'Overall exposure' "$tmp/security" || true
else
  skipped="systemd-analyze not found (Debian package systemd): the unit was not verified"
fi

if [[ $failures -ne 0 ]]; then
  echo "test_deb: $failures check(s) failed" >&2
  exit 1
fi
if [[ -n "$skipped" ]]; then
  echo "test_deb: SKIPPED: $skipped"
  exit 0
fi
echo "test_deb: ok"
