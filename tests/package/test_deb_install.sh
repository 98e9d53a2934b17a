#!/usr/bin/env bash
# The Debian package installed, used and removed for real, without changing
# this machine: everything runs in private mount, network and PID namespaces
# (unshare) where /etc, /usr and /var (and /lib, /bin, /sbin when they are
# not links into /usr) are overlays whose writes go to a scratch directory.
# The namespaces end with the test, and every process in them.
#
#  1. dpkg -i: the maintainer scripts create the system user and group
#     opcache (home /var/lib/opcache), make /etc/opcache/tokens root:opcache
#     0640, enable the unit (deb-systemd-helper; systemd is not running, so
#     nothing is started) and the ldconfig trigger registers libopcache.so.0;
#     the Python binding imports with no OPCACHE_LIBRARY.
#  2. The service as its unit says: ExecStart= run as User=/Group= with the
#     default /etc/opcache/serve.ini; /healthz answers, /v1/status is 401;
#     a token added to /etc/opcache/tokens works after ExecReload= (SIGHUP).
#  3. dpkg -i again: the changed conffile (tokens) and its mode are kept.
#  4. SIGTERM: the server exits 0.
#  5. dpkg --remove: program gone, configuration and state kept, unit masked;
#     dpkg --purge: /etc/opcache and /var/lib/opcache gone, unit unmasked and
#     no longer enabled; the user opcache stays (postrm says why).
#
# Usage: test_deb_install.sh DEB VERSION
# Needs root, unshare, overlayfs, setpriv, curl and ip; without them prints
# "test_deb_install: SKIPPED: <reason>" (CTest reports the test as skipped).
set -euo pipefail

step() { echo "== test_deb_install: $*"; }
fail() {
  echo "test_deb_install: FAILED: $*" >&2
  exit 1
}
skip() {
  echo "test_deb_install: SKIPPED: $*"
  exit 0
}

# ---------------------------------------------------------------------------
# Inside the namespaces: $1 DEB, $2 VERSION, $3 the scratch directory.
inside() {
  local deb=$1 version=$2 tmp=$3

  # Overlays first; nothing is installed unless every one is in place and
  # takes the writes.
  local dir
  for dir in etc usr var lib bin sbin lib64; do
    if [[ -d "/$dir" && ! -L "/$dir" ]]; then
      mkdir -p "$tmp/overlay/$dir/upper" "$tmp/overlay/$dir/work"
      mount -t overlay overlay \
        -o "lowerdir=/$dir,upperdir=$tmp/overlay/$dir/upper,workdir=$tmp/overlay/$dir/work" "/$dir" ||
        skip "cannot mount an overlay on /$dir here"
      [[ "$(findmnt --noheadings --output FSTYPE --mountpoint "/$dir")" == overlay ]] ||
        fail "/$dir is not an overlay after mounting one"
    fi
  done
  touch /etc/.opcache-overlay-probe /var/.opcache-overlay-probe
  [[ -e "$tmp/overlay/etc/upper/.opcache-overlay-probe" && -e "$tmp/overlay/var/upper/.opcache-overlay-probe" ]] ||
    fail "writes to /etc and /var do not land in the overlays"

  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  export DEBIAN_FRONTEND=noninteractive TMPDIR="$tmp/tmp"
  mkdir -p "$TMPDIR"
  ip link set lo up

  local failures=0
  failed() {
    echo "test_deb_install: FAILED: $*" >&2
    failures=$((failures + 1))
  }

  # --- 1. install ------------------------------------------------------------
  step "dpkg -i $(basename "$deb")"
  dpkg -i "$deb" >"$tmp/dpkg-install.log" 2>&1 || { cat "$tmp/dpkg-install.log" >&2; fail "dpkg -i"; }
  cat "$tmp/dpkg-install.log"
  [[ "$(dpkg-query --show --showformat='${Status} ${Version}' opcache)" == "install ok installed $version" ]] ||
    fail "dpkg says: $(dpkg-query --show --showformat='${Status} ${Version}' opcache)"

  local passwd home shell uid
  passwd=$(getent passwd opcache) || fail "postinst created no user opcache"
  IFS=: read -r _ _ uid _ _ home shell <<<"$passwd"
  [[ "$home" == /var/lib/opcache ]] || failed "opcache's home is $home, not /var/lib/opcache"
  [[ "$shell" == /usr/sbin/nologin ]] || failed "opcache's shell is $shell, not /usr/sbin/nologin"
  ((uid < 1000)) || failed "opcache (uid $uid) is not a system user"
  getent group opcache >/dev/null || failed "postinst created no group opcache"
  [[ "$(id -gn opcache)" == opcache ]] || failed "opcache's primary group is $(id -gn opcache)"
  [[ "$(stat -c '%U:%G %a' /etc/opcache/tokens)" == "root:opcache 640" ]] ||
    failed "/etc/opcache/tokens is $(stat -c '%U:%G %a' /etc/opcache/tokens), not root:opcache 640"
  [[ "$(stat -c '%U' /var/lib/opcache)" == opcache ]] || failed "/var/lib/opcache is not owned by opcache"
  [[ "$(readlink /etc/systemd/system/multi-user.target.wants/opcache-serve.service)" == \
    /lib/systemd/system/opcache-serve.service ]] || failed "postinst did not enable opcache-serve.service"
  # Captured first: with pipefail, `ldconfig -p | grep -q` fails when grep
  # exits before ldconfig has written its (long) list (SIGPIPE).
  local cache
  cache=$(/sbin/ldconfig -p)
  grep -q 'libopcache\.so\.0 ' <<<"$cache" || failed "the ldconfig cache does not know libopcache.so.0"
  local out
  out=$(opcache version 2>&1) || failed "opcache version: $out"
  [[ "$out" == "opcache $version "* ]] || failed "opcache version printed '$out'"
  out=$(cd / && env -u OPCACHE_LIBRARY python3 -c 'import opcache; print(opcache.__file__, opcache.version())' 2>&1) ||
    failed "python3 -c 'import opcache' (installed): $out"
  [[ "$out" == "/usr/lib/python3/dist-packages/opcache/__init__.py $version" ]] ||
    failed "the installed binding says '$out'"

  # --- 2. the service ------------------------------------------------------
  local unit=/lib/systemd/system/opcache-serve.service
  local user group exec_start exec_reload listen
  user=$(sed -n 's/^User=//p' "$unit")
  group=$(sed -n 's/^Group=//p' "$unit")
  exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
  exec_reload=$(sed -n 's/^ExecReload=//p' "$unit")
  listen=$(sed -n 's/^listen *= *//p' /etc/opcache/serve.ini)
  [[ -n "$user" && -n "$exec_start" && -n "$exec_reload" && -n "$listen" ]] ||
    fail "the unit or serve.ini lacks User=, ExecStart=, ExecReload= or listen"
  local -a command
  read -ra command <<<"$exec_start"
  step "as $user:$group: $exec_start (listen $listen)"
  (umask 0027 && exec setpriv --reuid="$user" --regid="$group" --init-groups --no-new-privs \
    env -i HOME=/var/lib/opcache PATH=/usr/bin:/bin "${command[@]}") >"$tmp/serve.log" 2>&1 &
  local pid=$!
  local base="http://$listen" status="" i
  for ((i = 0; i < 100; i++)); do
    status=$(curl -s -o /dev/null -w '%{http_code}' "$base/healthz" || true)
    [[ "$status" == 200 ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; fail "the service exited at start-up"; }
    sleep 0.2
  done
  [[ "$status" == 200 ]] || { cat "$tmp/serve.log" >&2; fail "no 200 from $base/healthz within 20 s"; }
  [[ -d /var/lib/opcache/store && "$(stat -c '%U' /var/lib/opcache/store)" == opcache ]] ||
    failed "the default storage /var/lib/opcache/store was not created by the service's user"
  status=$(curl -s -o /dev/null -w '%{http_code}' "$base/v1/status")
  [[ "$status" == 401 ]] || failed "GET /v1/status without a token answered $status, not 401"

  step "a token added, then ExecReload=$exec_reload"
  echo "package-test-secret" | opcache serve --hash-token --token-name package-test --token-scopes read \
    >>/etc/opcache/tokens
  local reload=${exec_reload//\$MAINPID/$pid}
  read -ra command <<<"$reload"
  "${command[@]}"
  for ((i = 0; i < 50; i++)); do
    status=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer package-test-secret" "$base/v1/status")
    [[ "$status" == 200 ]] && break
    sleep 0.2
  done
  [[ "$status" == 200 ]] || { cat "$tmp/serve.log" >&2; failed "the new token got $status after the reload, not 200"; }

  # --- 3. reinstall --------------------------------------------------------
  step "dpkg -i again (a changed conffile is kept)"
  dpkg -i "$deb" >"$tmp/dpkg-reinstall.log" 2>&1 || { cat "$tmp/dpkg-reinstall.log" >&2; fail "dpkg -i (again)"; }
  grep -q ' package-test read$' /etc/opcache/tokens || failed "reinstalling lost the token added to /etc/opcache/tokens"
  [[ "$(stat -c '%U:%G %a' /etc/opcache/tokens)" == "root:opcache 640" ]] ||
    failed "after reinstalling, /etc/opcache/tokens is $(stat -c '%U:%G %a' /etc/opcache/tokens)"

  # --- 4. stop -------------------------------------------------------------
  step "SIGTERM"
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  [[ $rc -eq 0 ]] || { cat "$tmp/serve.log" >&2; failed "the service exited $rc after SIGTERM, not 0"; }

  # --- 5. remove, purge ----------------------------------------------------
  step "dpkg --remove opcache"
  dpkg --remove opcache >"$tmp/dpkg-remove.log" 2>&1 || { cat "$tmp/dpkg-remove.log" >&2; fail "dpkg --remove"; }
  [[ "$(dpkg-query --show --showformat='${Status}' opcache)" == "deinstall ok config-files" ]] ||
    failed "after --remove dpkg says $(dpkg-query --show --showformat='${Status}' opcache)"
  [[ ! -e /usr/bin/opcache ]] || failed "/usr/bin/opcache is still there after --remove"
  [[ -f /etc/opcache/serve.ini && -f /etc/opcache/tokens ]] || failed "--remove removed the configuration"
  [[ -d /var/lib/opcache/store ]] || failed "--remove removed the state"
  [[ "$(readlink /etc/systemd/system/opcache-serve.service)" == /dev/null ]] || failed "--remove did not mask the unit"
  cache=$(/sbin/ldconfig -p)
  if grep -q 'libopcache\.so\.0 ' <<<"$cache"; then failed "the ldconfig cache still lists libopcache.so.0"; fi
  if [[ -d /usr/lib/python3/dist-packages/opcache ]]; then
    failed "/usr/lib/python3/dist-packages/opcache is left after --remove: $(find /usr/lib/python3/dist-packages/opcache)"
  fi

  step "dpkg --purge opcache"
  dpkg --purge opcache >"$tmp/dpkg-purge.log" 2>&1 || { cat "$tmp/dpkg-purge.log" >&2; fail "dpkg --purge"; }
  [[ -z "$(dpkg-query --show --showformat='${Status}' opcache 2>/dev/null)" ]] || failed "dpkg still knows opcache after --purge"
  [[ ! -e /etc/opcache ]] || failed "/etc/opcache is left after --purge: $(find /etc/opcache)"
  [[ ! -e /var/lib/opcache ]] || failed "/var/lib/opcache is left after --purge"
  [[ ! -L /etc/systemd/system/opcache-serve.service ]] || failed "the unit is still masked after --purge"
  [[ ! -L /etc/systemd/system/multi-user.target.wants/opcache-serve.service ]] ||
    failed "the unit is still enabled after --purge"
  getent passwd opcache >/dev/null || failed "--purge removed the user opcache (postrm says it stays)"

  if [[ $failures -ne 0 ]]; then
    echo "test_deb_install: $failures check(s) failed" >&2
    exit 1
  fi
  echo "test_deb_install: ok"
}

if [[ "${1:-}" == --inside ]]; then
  shift
  inside "$@"
  exit 0
fi

# ---------------------------------------------------------------------------
if [[ $# -ne 2 ]]; then
  echo "usage: $0 DEB VERSION" >&2
  exit 2
fi
deb=$(realpath "$1")
version=$2
[[ -f "$deb" ]] || fail "$deb does not exist (package.deb.build makes it)"

[[ $(id -u) -eq 0 ]] || skip "not root: the namespaces and overlays need root"
for tool in unshare setpriv curl ip findmnt; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not found"
done
unshare --mount --propagation private true 2>/dev/null || skip "unshare --mount is not permitted here"

# shellcheck source=tests/package/scratch_dir.sh
source "$(dirname "$0")/scratch_dir.sh"
scratch_dir test_deb_install
# The scratch directory must stay visible once /etc, /usr and /var are covered.
case "$(realpath "$tmp")/" in
  /etc/* | /usr/* | /var/* | /lib/* | /bin/* | /sbin/* | /lib64/*)
    fail "the scratch directory $tmp is under a directory the test covers with an overlay; set TMPDIR elsewhere"
    ;;
esac

unshare --mount --propagation private --net --pid --fork --mount-proc "$0" --inside "$deb" "$version" "$tmp"
