# shellcheck shell=bash
# Shared helpers for the shell benchmarks (bench/run_server_bench.sh,
# bench/run_pull_bench.sh). Source it; it defines functions only.
#
# Servers started here are tracked by pid and stopped by bench_cleanup, which
# the scripts install as an EXIT trap. Nothing here needs root, touches a
# system configuration or downloads anything.

bench_log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
bench_die() { printf 'error: %s\n' "$*" >&2; exit 2; }

# Pids of the servers this script started, stopped in reverse order on exit.
BENCH_PIDS=()
# Temp directories removed on exit (unless BENCH_KEEP=1).
BENCH_TMPDIRS=()

bench_cleanup() {
  local i pid
  for ((i = ${#BENCH_PIDS[@]} - 1; i >= 0; i--)); do
    pid=${BENCH_PIDS[i]}
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      # Give it up to 10 s to finish (opcache serve drains, nginx quits fast).
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  BENCH_PIDS=()
  if [[ ${BENCH_KEEP:-0} != 1 ]]; then
    for d in "${BENCH_TMPDIRS[@]}"; do rm -rf -- "$d"; done
  else
    for d in "${BENCH_TMPDIRS[@]}"; do bench_log "kept $d"; done
  fi
}

# bench_stop PID: stop one server started here, and forget it.
bench_stop() {
  local pid=$1 rest=() p
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for p in "${BENCH_PIDS[@]}"; do [[ $p == "$pid" ]] || rest+=("$p"); done
  BENCH_PIDS=("${rest[@]}")
}

# bench_free_port: print a TCP port that is free on 127.0.0.1 right now.
bench_free_port() {
  local port
  for _ in $(seq 200); do
    port=$((20000 + RANDOM % 40000))
    if ! ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then
      echo "$port"
      return 0
    fi
  done
  bench_die "found no free TCP port"
}

# bench_wait_http URL [SECONDS]: wait until URL answers (any HTTP status).
bench_wait_http() {
  local url=$1 secs=${2:-20}
  for _ in $(seq $((secs * 10))); do
    if curl -s -o /dev/null --max-time 1 "$url"; then return 0; fi
    sleep 0.1
  done
  return 1
}

# bench_start_nginx PREFIX ROOT [dav]
# Starts nginx in the foreground (daemon off) with its own configuration,
# pid file, logs and temp directories under PREFIX, serving ROOT on a free
# 127.0.0.1 port with sendfile, keep-alive and one worker per CPU. With "dav",
# PUT (creating parent directories) and DELETE are enabled, as for ccache's
# HTTP remote storage. Sets NGINX_PID and NGINX_PORT.
bench_start_nginx() {
  local prefix=$1 root=$2 dav=${3:-} user_line="" dav_lines="" attempt
  mkdir -p "$prefix/logs" "$prefix/tmp"
  # A root master would switch its workers to "nobody", which may not read
  # (or, for WebDAV, write) ROOT; keep the workers as the invoking user.
  if [[ $(id -u) == 0 ]]; then user_line="user $(id -un) $(id -gn);"; fi
  if [[ $dav == dav ]]; then
    dav_lines="dav_methods PUT DELETE; create_full_put_path on; dav_access user:rw group:r all:r; client_max_body_size 512m;"
  fi
  for attempt in 1 2 3 4 5; do
    NGINX_PORT=$(bench_free_port)
    cat >"$prefix/nginx.conf" <<EOF
$user_line
worker_processes $(nproc);
pid $prefix/nginx.pid;
error_log $prefix/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log $prefix/logs/access.log;
  client_body_temp_path $prefix/tmp/body;
  proxy_temp_path $prefix/tmp/proxy;
  fastcgi_temp_path $prefix/tmp/fastcgi;
  uwsgi_temp_path $prefix/tmp/uwsgi;
  scgi_temp_path $prefix/tmp/scgi;
  default_type application/octet-stream;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  open_file_cache max=20000 inactive=60s;
  server {
    listen 127.0.0.1:$NGINX_PORT reuseport;
    root $root;
    location / { $dav_lines }
  }
}
EOF
    nginx -p "$prefix" -e "$prefix/logs/error.log" -c "$prefix/nginx.conf" -g 'daemon off;' \
      >>"$prefix/logs/stdout.log" 2>&1 &
    NGINX_PID=$!
    BENCH_PIDS+=("$NGINX_PID")
    if bench_wait_http "http://127.0.0.1:$NGINX_PORT/" 10 && kill -0 "$NGINX_PID" 2>/dev/null; then
      return 0
    fi
    bench_stop "$NGINX_PID"
    bench_log "nginx did not start on port $NGINX_PORT (attempt $attempt); $(tail -n 2 "$prefix/logs/error.log" 2>/dev/null)"
  done
  bench_die "nginx did not start; see $prefix/logs/error.log"
}

# bench_start_opcache_server OPCACHE STORE LOGDIR THREADS [extra serve flags...]
# Starts `opcache serve` on a free 127.0.0.1 port (port 0 + --port-file),
# anonymous reads, access log to LOGDIR/access.log. Sets SERVER_PID and
# SERVER_PORT.
bench_start_opcache_server() {
  local opcache=$1 store=$2 logdir=$3 threads=$4
  shift 4
  mkdir -p "$logdir"
  rm -f "$logdir/port"
  "$opcache" serve --storage "$store" --listen 127.0.0.1:0 --port-file "$logdir/port" \
    --threads "$threads" --anonymous-read --access-log "$logdir/access.log" "$@" \
    >>"$logdir/server.log" 2>&1 &
  SERVER_PID=$!
  BENCH_PIDS+=("$SERVER_PID")
  for _ in $(seq 200); do
    [[ -s $logdir/port ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || bench_die "opcache serve exited: $(tail -n 5 "$logdir/server.log")"
    sleep 0.1
  done
  [[ -s $logdir/port ]] || bench_die "opcache serve did not write its port file"
  SERVER_PORT=$(head -n 1 "$logdir/port" | sed 's/.*://')
  bench_wait_http "http://127.0.0.1:$SERVER_PORT/healthz" 10 || bench_die "opcache serve does not answer /healthz"
}

# bench_peak_rss_kib PID: the process's peak resident set (VmHWM), in KiB.
bench_peak_rss_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# bench_rss_kib PID: the current resident set (VmRSS), in KiB.
bench_rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# bench_nginx_peak_rss_kib MASTER_PID: sum of VmHWM over the master and its workers.
bench_nginx_peak_rss_kib() {
  local total=0 p
  for p in "$1" $(pgrep -P "$1" || true); do
    total=$((total + $(bench_peak_rss_kib "$p")))
  done
  echo "$total"
}

# bench_machine_json DIR: the machine as a JSON object (DIR: the file system measured).
bench_machine_json() {
  local dir=$1 fs
  fs=$(findmnt -n -o FSTYPE,OPTIONS --target "$dir" 2>/dev/null | head -n 1 || true)
  jq -n --arg nproc "$(nproc)" \
    --arg cpu "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)" \
    --arg kernel "$(uname -sr)" --arg arch "$(uname -m)" \
    --arg mem "$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)" --arg fs "$fs" \
    '{nproc: ($nproc|tonumber), cpu_model: $cpu, kernel: $kernel, arch: $arch,
      mem_total_kib: ($mem|tonumber), work_file_system: $fs}'
}

bench_loadavg() { cut -d' ' -f1 /proc/loadavg; }

# bench_now: seconds since the epoch with nanoseconds, for timing.
bench_now() { date +%s.%N; }
bench_elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# bench_print_command: print the command line this script was started with.
bench_print_command() {
  local q=() a
  for a in "$@"; do q+=("$(printf '%q' "$a")"); done
  printf 'command: %s\n' "${q[*]}"
}
