#!/usr/bin/env bash
# Pull benchmark (issue 6): `opcache pull` of N real kernel bundles into an
# empty store from `opcache serve` on loopback, against, in the same run,
#   * the same bundle bytes fetched from nginx by `curl --parallel`, and
#   * ccache restoring the same compiles from its HTTP remote storage on nginx
#     (WebDAV), with an empty local ccache directory and remote_only.
# Prints a table (items/s, MB/s, ratios) and writes JSON. See bench/README.md.
#
#   bench/run_pull_bench.sh                       # 500 kernels (~50 MB raw)
#   bench/run_pull_bench.sh --kernels 5000        # the issue's size (~500 MB raw)
set -euo pipefail
shopt -s inherit_errexit

usage() {
  cat <<'EOF'
usage: bench/run_pull_bench.sh [options]

  --kernels N     kernels in the corpus and pulled (default 500; the issue asks for 5000)
  --parallel P    concurrent transfers for all three clients (default 8, opcache's default)
  --rounds R      repeat the three measurements R times, alternating, report the median (default 1)
  --threads T     `opcache serve --threads` (default: the number of CPUs)
  --gen-jobs J    parallel compiles when generating the corpus (default: the number of CPUs)
  --build DIR     build directory with opcache (default build)
  --corpus DIR    where the corpus is cached (default <build>/bench-corpus/tables)
  --json FILE     JSON results (default <build>/bench-results/pull.json)
  --keep          keep the temporary work directory
  -h, --help      this text
EOF
}

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib/common.sh
source "$repo/bench/lib/common.sh"
# shellcheck source=bench/lib/corpus.sh
source "$repo/bench/lib/corpus.sh"

cmdline=("$0" "$@")
kernels=500 parallel=8 rounds=1 threads=$(nproc) gen_jobs=$(nproc)
build=build corpus="" json=""
while (($#)); do
  case $1 in
    --kernels) kernels=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --gen-jobs) gen_jobs=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --corpus) corpus=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --keep) BENCH_KEEP=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; bench_die "unknown option $1" ;;
  esac
done
[[ $build = /* ]] || build=$repo/$build
corpus=${corpus:-$build/bench-corpus/tables}
json=${json:-$build/bench-results/pull.json}
opcache=$build/opcache
[[ -x $opcache ]] || bench_die "$opcache not found; build the target opcache_cli (or pass --build DIR)"
for tool in nginx curl ccache jq cc sha256sum; do
  command -v "$tool" >/dev/null || bench_die "$tool is not installed (scripts/install-deps.sh --bench)"
done
nginx -V 2>&1 | grep -q -- --with-http_dav_module ||
  bench_die "this nginx lacks the WebDAV module that ccache's HTTP storage needs (Debian's nginx-light has it)"

bench_print_command "${cmdline[@]}"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

corpus_tables "$opcache" "$corpus" "$kernels" "$gen_jobs"
# The measurements start here (the corpus may have taken a while).
date_start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_start=$(bench_loadavg)

work=$(mktemp -d "${TMPDIR:-/tmp}/opcache-pull-bench.XXXXXX")
BENCH_TMPDIRS+=("$work")
corpus_tables_keys "$corpus" "$kernels" >"$work/keys.txt"
# Sizes of exactly these kernels: bundle bytes (on the wire for opcache and
# curl) and raw bytes (.o + .json + .info).
awk -F'\t' 'NR == FNR { want[$1] = 1; next } ($1 in want) { n++; b += $2; r += $3 }
  END { printf "%d %d %d\n", n, b, r }' "$work/keys.txt" "$corpus/entries.tsv" >"$work/sizes"
read -r n_found bundle_bytes raw_bytes <"$work/sizes"
((n_found == kernels)) || bench_die "only $n_found of the $kernels keys are in $corpus/entries.tsv"
obj_bytes=0
for ((i = 0; i < kernels; i++)); do printf '%s/kmeta/k_%05d.o\n' "$corpus" "$i"; done >"$work/objects.txt"
obj_bytes=$(xargs -a "$work/objects.txt" stat -c %s | awk '{ s += $1 } END { print s }')
bench_log "corpus: $kernels kernels, raw $((raw_bytes / 1000000)) MB (.o $((obj_bytes / 1000000)) MB), bundles $((bundle_bytes / 1000000)) MB"

# Servers: both on the corpus directory, both with one thread/worker per CPU.
bench_start_opcache_server "$opcache" "$corpus/store" "$work/server" "$threads"
bench_start_nginx "$work/nginx" "$corpus/www" dav
bench_log "opcache serve pid $SERVER_PID on port $SERVER_PORT; nginx pid $NGINX_PID on port $NGINX_PORT"

# Both sources start with their files in the page cache.
sed "s|^|$corpus/www/v1/entries/|" "$work/keys.txt" | xargs cat >/dev/null
find "$corpus/store/objects" "$corpus/www/ccache" -type f -print0 | xargs -0 cat >/dev/null
cat "$corpus"/store/index.db* >/dev/null

# curl's URL lists: the same keys, the same /v1/entries/<key> paths, from
# nginx (the baseline) and, for reference, from opcache serve.
for target in nginx:$NGINX_PORT opcache:$SERVER_PORT; do
  while read -r key; do
    printf 'url = "http://127.0.0.1:%s/v1/entries/%s"\noutput = "%s/curl-out/%s"\n' \
      "${target#*:}" "$key" "$work" "$key"
  done <"$work/keys.txt" >"$work/curl-${target%%:*}.cfg"
done
ccache_cmd=(ccache cc -std=c11 -O2 -fPIC -ffp-contract=off)

run_opcache() {
  rm -rf "$work/pull-store"
  local t0 t1
  t0=$(bench_now)
  "$opcache" -C "$work/pull-store" --remote "http://127.0.0.1:$SERVER_PORT" --json \
    pull -j "$parallel" --keys "$work/keys.txt" >"$work/pull.json"
  t1=$(bench_now)
  local transferred failed
  transferred=$(jq -r .transferred "$work/pull.json")
  failed=$(jq -r .failed "$work/pull.json")
  [[ $transferred == "$kernels" && $failed == 0 ]] ||
    bench_die "opcache pull transferred $transferred of $kernels, $failed failed: $(cat "$work/pull.json")"
  local entries
  entries=$("$opcache" -C "$work/pull-store" --no-remote --json stats | jq -r .entries)
  [[ $entries == "$kernels" ]] || bench_die "the pulled store holds $entries entries, expected $kernels"
  bench_elapsed "$t0" "$t1"
}

# run_curl nginx|opcache
run_curl() {
  rm -rf "$work/curl-out"
  mkdir -p "$work/curl-out"
  local t0 t1
  t0=$(bench_now)
  curl --parallel --parallel-immediate --parallel-max "$parallel" --fail --silent --show-error --no-progress-meter \
    -K "$work/curl-$1.cfg"
  t1=$(bench_now)
  local got
  got=$(find "$work/curl-out" -type f -printf '%s\n' | awk '{ n++; s += $1 } END { printf "%d %d", n, s }')
  [[ $got == "$kernels $bundle_bytes" ]] || bench_die "curl fetched $got (files bytes), expected $kernels $bundle_bytes"
  bench_elapsed "$t0" "$t1"
}

# Sets CCACHE_WIRE_BYTES and CCACHE_REQUESTS from nginx's access log.
run_ccache() {
  rm -rf "$work/ccache-local" "$work/ccache-out"
  mkdir -p "$work/ccache-out"
  local log=$work/nginx/logs/access.log before t0 t1
  before=$(wc -l <"$log")
  t0=$(bench_now)
  (
    cd "$corpus"
    export CCACHE_DIR=$work/ccache-local CCACHE_REMOTE_STORAGE="http://127.0.0.1:$NGINX_PORT/ccache/"
    export CCACHE_REMOTE_ONLY=true
    for ((i = 0; i < kernels; i++)); do printf 'k_%05d\n' "$i"; done |
      xargs -P "$parallel" -I{} "${ccache_cmd[@]}" -c src/{}.c -o "$work/ccache-out/{}.o"
  )
  t1=$(bench_now)
  local stats hits
  stats=$(CCACHE_DIR=$work/ccache-local ccache --print-stats)
  hits=$(awk '$1 == "remote_storage_hit" { print $2 }' <<<"$stats")
  [[ $hits == "$kernels" ]] || bench_die "ccache had $hits remote hits for $kernels compiles; stats: $(tr '\n' ' ' <<<"$stats")"
  (cd "$work/ccache-out" && for ((i = 0; i < kernels; i++)); do
    cmp -s "$(printf 'k_%05d.o' "$i")" "$corpus/kmeta/$(printf 'k_%05d.o' "$i")" ||
      bench_die "ccache restored a different k_$i.o"
  done)
  tail -n +$((before + 1)) "$log" | awk '$6 == "\"GET" && $7 ~ /^\/ccache\// { n++; s += $10 }
    END { printf "%d %d\n", n, s }' >"$work/ccache-wire"
  read -r CCACHE_REQUESTS CCACHE_WIRE_BYTES <"$work/ccache-wire"
  bench_elapsed "$t0" "$t1"
}

declare -a t_opcache t_curl t_ccache t_curl_opcache
for ((r = 1; r <= rounds; r++)); do
  bench_log "round $r/$rounds: opcache pull of $kernels bundles (-j $parallel)"
  t=$(run_opcache) || exit 1
  t_opcache+=("$t")
  bench_log "  ${t_opcache[-1]} s; curl --parallel from nginx"
  t=$(run_curl nginx) || exit 1
  t_curl+=("$t")
  bench_log "  ${t_curl[-1]} s; ccache restore from nginx (remote_only, -P $parallel)"
  t=$(run_ccache) || exit 1
  t_ccache+=("$t")
  read -r CCACHE_REQUESTS CCACHE_WIRE_BYTES <"$work/ccache-wire"
  bench_log "  ${t_ccache[-1]} s ($CCACHE_REQUESTS GETs); (reference) curl --parallel from opcache serve"
  t=$(run_curl opcache) || exit 1
  t_curl_opcache+=("$t")
  bench_log "  ${t_curl_opcache[-1]} s"
done
server_rss=$(bench_peak_rss_kib "$SERVER_PID")
nginx_rss=$(bench_nginx_peak_rss_kib "$NGINX_PID")
load_end=$(bench_loadavg)

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
s_opcache=$(median "${t_opcache[@]}")
s_curl=$(median "${t_curl[@]}")
s_curl_opcache=$(median "${t_curl_opcache[@]}")
s_ccache=$(median "${t_ccache[@]}")

results=$(jq -n \
  --argjson n "$kernels" --argjson bundle "$bundle_bytes" --argjson raw "$raw_bytes" \
  --argjson obj "$obj_bytes" --argjson ccwire "$CCACHE_WIRE_BYTES" --argjson ccreq "$CCACHE_REQUESTS" \
  --argjson so "$s_opcache" --argjson sc "$s_curl" --argjson sk "$s_ccache" \
  --argjson sco "$s_curl_opcache" '
  def m(x): (x / 1e6);
  def row(secs; wire; raw): {seconds: secs, items_per_second: ($n / secs),
    wire_bytes: wire, wire_megabytes_per_second: m(wire / secs),
    raw_bytes: raw, raw_megabytes_per_second: m(raw / secs)};
  { opcache_pull: row($so; $bundle; $raw),
    curl_parallel_nginx: row($sc; $bundle; $raw),
    ccache_remote_nginx: (row($sk; $ccwire; $obj) + {http_requests: $ccreq}),
    reference_curl_parallel_opcache_serve: row($sco; $bundle; $raw),
    ratios: { opcache_vs_curl_items_per_second: ($sc / $so),
              opcache_vs_ccache_items_per_second: ($sk / $so) } }')

mkdir -p "$(dirname "$json")"
jq -n --arg date "$date_start" --arg version "$("$opcache" version | head -n 1)" \
  --argjson machine "$(bench_machine_json "$work")" \
  --arg ls "$load_start" --arg le "$load_end" --arg cmd "$(bench_print_command "${cmdline[@]}" | cut -c10-)" \
  --argjson corpus "$(jq --argjson n "$kernels" --argjson b "$bundle_bytes" --argjson r "$raw_bytes" --argjson o "$obj_bytes" \
    '. + {used_kernels: $n, bundle_bytes: $b, raw_bytes: $r, object_bytes: $o}' "$corpus/corpus.json")" \
  --argjson opts "$(jq -n --argjson p "$parallel" --argjson r "$rounds" --argjson t "$threads" \
    '{parallel: $p, rounds: $r, server_threads: $t}')" \
  --argjson all "$(jq -n --arg o "${t_opcache[*]}" --arg c "${t_curl[*]}" --arg k "${t_ccache[*]}" \
    --arg co "${t_curl_opcache[*]}" \
    '{reference_curl_parallel_opcache_serve: ($co|split(" ")|map(tonumber)), opcache_pull: ($o|split(" ")|map(tonumber)), curl_parallel_nginx: ($c|split(" ")|map(tonumber)),
      ccache_remote_nginx: ($k|split(" ")|map(tonumber))}')" \
  --argjson res "$results" --argjson srss "$server_rss" --argjson nrss "$nginx_rss" \
  '{benchmark: "pull", opcache_version: $version, date: $date, command: $cmd, machine: $machine,
    load_average_1m: {start: ($ls|tonumber), end: ($le|tonumber)}, options: $opts, corpus: $corpus,
    results: $res, seconds_per_round: $all,
    peak_rss_kib: {opcache_serve: $srss, nginx_all_processes: $nrss}}' >"$json"

# The table.
printf '\nopcache pull benchmark — %s, %s kernels, parallel %s, rounds %s (median), server threads %s\n' \
  "$date_start" "$kernels" "$parallel" "$rounds" "$threads"
printf 'corpus: %s kernels, raw %.1f MB (.o %.1f MB), bundles %.1f MB; load %s -> %s; %s CPUs\n\n' \
  "$kernels" "$(jq -n "$raw_bytes/1e6")" "$(jq -n "$obj_bytes/1e6")" "$(jq -n "$bundle_bytes/1e6")" \
  "$load_start" "$load_end" "$(nproc)"
jq -r '.results as $r |
  ["client", "seconds", "items/s", "wire MB/s", "raw MB/s", "opcache speed-up"],
  ["opcache pull <- opcache serve", $r.opcache_pull.seconds, $r.opcache_pull.items_per_second,
   $r.opcache_pull.wire_megabytes_per_second, $r.opcache_pull.raw_megabytes_per_second, 1],
  ["curl --parallel <- nginx", $r.curl_parallel_nginx.seconds, $r.curl_parallel_nginx.items_per_second,
   $r.curl_parallel_nginx.wire_megabytes_per_second, $r.curl_parallel_nginx.raw_megabytes_per_second,
   $r.ratios.opcache_vs_curl_items_per_second],
  ["ccache remote_only <- nginx", $r.ccache_remote_nginx.seconds, $r.ccache_remote_nginx.items_per_second,
   $r.ccache_remote_nginx.wire_megabytes_per_second, $r.ccache_remote_nginx.raw_megabytes_per_second,
   $r.ratios.opcache_vs_ccache_items_per_second],
  ["(reference) curl --parallel <- opcache serve", $r.reference_curl_parallel_opcache_serve.seconds,
   $r.reference_curl_parallel_opcache_serve.items_per_second,
   $r.reference_curl_parallel_opcache_serve.wire_megabytes_per_second,
   $r.reference_curl_parallel_opcache_serve.raw_megabytes_per_second,
   ($r.reference_curl_parallel_opcache_serve.seconds / $r.opcache_pull.seconds)]
  | map(if type == "number" then (. * 100 | round / 100 | tostring) else . end) | @tsv' "$json" |
  column -t -s $'\t'
printf '\nopcache speed-up = opcache items/s / client items/s (above 1: opcache pull is faster).\n'
printf 'wire = bytes over HTTP (bundles; ccache: its manifests and results); raw = kernel bytes delivered\n'
printf '(opcache, curl: .o+.json+.info inside the bundles; ccache: the .o files). peak RSS: opcache serve %s KiB, nginx %s KiB\n' \
  "$server_rss" "$nginx_rss"
printf 'JSON: %s\n' "$json"
