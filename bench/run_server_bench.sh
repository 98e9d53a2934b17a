#!/usr/bin/env bash
# Server benchmark (issue 5): drives `opcache serve` with wrk at 64 and 512
# connections for GETs of real bundles, and nginx serving the same bundle
# bytes from disk in the same run. Reports requests/s, p50/p99 latency, the
# ratio to nginx, and the server's peak RSS. See bench/README.md.
#
#   bench/run_server_bench.sh                               # refcc corpus, 10 s per run
#   bench/run_server_bench.sh --duration 30                 # longer runs
#   bench/run_server_bench.sh --corpus tables --kernels 5000  # the ~100 KB kernels of the pull benchmark
set -euo pipefail
shopt -s inherit_errexit

usage() {
  cat <<'EOF'
usage: bench/run_server_bench.sh [options]

  --corpus refcc|tables  refcc: the distinct kernels of examples/models compiled by refcc
                         (~300 bundles of 2-4 KB; default). tables: the generated ~100 KB
                         kernels of the pull benchmark (bundles ~65 KB)
  --kernels N            kernels of the tables corpus to request (default 500)
  --duration S           seconds per wrk run (default 10)
  --warmup S             unmeasured wrk run per server before the first measurement (default 2)
  --connections "C..."   connection counts (default "64 512")
  --rounds R             measure each (server, connections) R times, alternating, and report
                         the median by requests/s (default 1)
  --threads T            `opcache serve --threads` and nginx workers (default: the number of CPUs)
  --wrk-threads W        wrk threads (default: the number of CPUs)
  --serve-args "ARGS"    extra flags for `opcache serve`, e.g. "--max-inflight 1024 --workers 8"
  --build DIR            build directory with opcache and refcc/refcc (default build)
  --corpus-dir DIR       where the corpus is cached (default <build>/bench-corpus/<corpus>)
  --json FILE            JSON results (default <build>/bench-results/server.json)
  --keep                 keep the temporary work directory (logs, wrk output)
  -h, --help             this text
EOF
}

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib/common.sh
source "$repo/bench/lib/common.sh"
# shellcheck source=bench/lib/corpus.sh
source "$repo/bench/lib/corpus.sh"

cmdline=("$0" "$@")
corpus_kind=refcc kernels=500 duration=10 warmup=2 connections="64 512" rounds=1
threads=$(nproc) wrk_threads=$(nproc) build=build corpus="" json="" serve_args=""
while (($#)); do
  case $1 in
    --corpus) corpus_kind=$2; shift 2 ;;
    --kernels) kernels=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --wrk-threads) wrk_threads=$2; shift 2 ;;
    --serve-args) serve_args=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --corpus-dir) corpus=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --keep) BENCH_KEEP=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; bench_die "unknown option $1" ;;
  esac
done
[[ $corpus_kind == refcc || $corpus_kind == tables ]] || bench_die "--corpus must be refcc or tables"
[[ $build = /* ]] || build=$repo/$build
corpus=${corpus:-$build/bench-corpus/$corpus_kind}
json=${json:-$build/bench-results/server.json}
opcache=$build/opcache
refcc=$build/refcc/refcc
[[ -x $opcache ]] || bench_die "$opcache not found; build the target opcache_cli (or pass --build DIR)"
for tool in nginx wrk curl jq; do
  command -v "$tool" >/dev/null || bench_die "$tool is not installed (scripts/install-deps.sh --bench)"
done
# 512 connections to each server plus wrk's own: make sure descriptors suffice.
if (($(ulimit -n) < 4096)); then ulimit -n "$(ulimit -Hn)" 2>/dev/null || true; fi

bench_print_command "${cmdline[@]}"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

work=$(mktemp -d "${TMPDIR:-/tmp}/opcache-server-bench.XXXXXX")
BENCH_TMPDIRS+=("$work")
if [[ $corpus_kind == refcc ]]; then
  [[ -x $refcc || -f $corpus/corpus.json ]] ||
    bench_die "$refcc not found; build the target refcc (or pass --build DIR)"
  corpus_refcc "$opcache" "$refcc" "$repo" "$corpus" "$threads"
  cp "$corpus/keys.txt" "$work/keys.txt"
else
  corpus_tables "$opcache" "$corpus" "$kernels" "$threads"
  corpus_tables_keys "$corpus" "$kernels" >"$work/keys.txt"
fi
sed 's|^|/v1/entries/|' "$work/keys.txt" >"$work/paths.txt"
# The measurements start here (the corpus may have taken a while).
date_start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_start=$(bench_loadavg)
awk -F'\t' 'NR == FNR { want[$1] = 1; next } ($1 in want) { n++; b += $2; r += $3 }
  END { printf "%d %d %d\n", n, b, r }' "$work/keys.txt" "$corpus/entries.tsv" >"$work/sizes"
read -r n_keys bundle_bytes raw_bytes <"$work/sizes"
bench_log "corpus: $n_keys bundles, mean $((bundle_bytes / n_keys)) bytes (raw $((raw_bytes / n_keys)))"

# shellcheck disable=SC2086 # --serve-args is a list of words
bench_start_opcache_server "$opcache" "$corpus/store" "$work/server" "$threads" $serve_args
idle_rss=$(bench_rss_kib "$SERVER_PID")
bench_start_nginx "$work/nginx" "$corpus/www"
bench_log "opcache serve pid $SERVER_PID on port $SERVER_PORT (--threads $threads); nginx pid $NGINX_PID on port $NGINX_PORT"

# Both answer the same bytes for the same path.
probe=$(head -n 1 "$work/paths.txt")
curl -sf "http://127.0.0.1:$SERVER_PORT$probe" -o "$work/probe.opcache"
curl -sf "http://127.0.0.1:$NGINX_PORT$probe" -o "$work/probe.nginx"
cmp -s "$work/probe.opcache" "$work/probe.nginx" || bench_die "opcache serve and nginx answer different bytes for $probe"

declare -A url=([opcache]="http://127.0.0.1:$SERVER_PORT" [nginx]="http://127.0.0.1:$NGINX_PORT")

# run_wrk SERVER CONNECTIONS SECONDS OUT: one wrk run; OUT gets wrk's output.
run_wrk() {
  wrk -t "$wrk_threads" -c "$2" -d "${3}s" --timeout 10s -s "$repo/bench/rotate_paths.lua" \
    "${url[$1]}" -- "$work/paths.txt" >"$4" 2>&1 || bench_die "wrk failed: $(tail -n 3 "$4")"
  grep -q '^WRK_JSON ' "$4" || bench_die "wrk printed no figures: $(tail -n 3 "$4")"
}

if ((warmup > 0)); then
  for s in opcache nginx; do
    bench_log "warm-up: $s, 64 connections, $warmup s"
    run_wrk "$s" 64 "$warmup" "$work/warmup-$s.txt"
  done
fi

: >"$work/runs.jsonl"
order=(opcache nginx)
for c in $connections; do
  for ((r = 1; r <= rounds; r++)); do
    for s in "${order[@]}"; do
      bench_log "$s: $c connections, $duration s (round $r/$rounds)"
      out=$work/wrk-$s-$c-$r.txt
      run_wrk "$s" "$c" "$duration" "$out"
      sed -n 's/^WRK_JSON //p' "$out" |
        jq -c --arg s "$s" --argjson c "$c" --argjson r "$r" \
          '{server: $s, connections: $c, round: $r} + . + {requests_per_second: (.requests / (.duration_us / 1e6))}' \
          >>"$work/runs.jsonl"
      jq -r 'select(.server == "'"$s"'" and .connections == '"$c"' and .round == '"$r"') |
        "  \(.requests_per_second | floor) req/s, p50 \(.latency_us.p50) us, p99 \(.latency_us.p99) us, non-2xx \(.errors.status)"' \
        "$work/runs.jsonl" >&2
    done
    # Alternate which server goes first.
    order=("${order[1]}" "${order[0]}")
  done
done

server_peak_rss=$(bench_peak_rss_kib "$SERVER_PID")
server_rss_end=$(bench_rss_kib "$SERVER_PID")
nginx_peak_rss=$(bench_nginx_peak_rss_kib "$NGINX_PID")
load_end=$(bench_loadavg)
statuses=$(curl -sf "${url[opcache]}/metrics" | grep '^opcache_http_requests_total{route="entry"' || true)

# Per (server, connections): the median round by requests/s.
results=$(jq -s '
  group_by([.connections, .server]) | map(sort_by(.requests_per_second) | .[(length - 1) / 2 | floor])
  | group_by(.connections) | map({
      connections: .[0].connections,
      opcache: (map(select(.server == "opcache"))[0]),
      nginx: (map(select(.server == "nginx"))[0])})
  | map(. + {ratio_to_nginx: {
      requests_per_second: (.opcache.requests_per_second / .nginx.requests_per_second),
      p50_latency: (.opcache.latency_us.p50 / .nginx.latency_us.p50),
      p99_latency: (.opcache.latency_us.p99 / .nginx.latency_us.p99)}})' "$work/runs.jsonl")

mkdir -p "$(dirname "$json")"
jq -n --arg date "$date_start" --arg version "$("$opcache" version | head -n 1)" \
  --argjson machine "$(bench_machine_json "$corpus")" \
  --arg ls "$load_start" --arg le "$load_end" --arg cmd "$(bench_print_command "${cmdline[@]}" | cut -c10-)" \
  --arg kind "$corpus_kind" --argjson n "$n_keys" --argjson b "$bundle_bytes" --argjson raw "$raw_bytes" \
  --argjson opts "$(jq -n --argjson d "$duration" --argjson w "$warmup" --argjson r "$rounds" \
    --argjson t "$threads" --argjson wt "$wrk_threads" --arg c "$connections" --arg sa "$serve_args" \
    '{duration_seconds: $d, warmup_seconds: $w, rounds: $r, server_threads: $t, nginx_workers: $t, serve_args: $sa,
      wrk_threads: $wt, connections: ($c | split(" ") | map(select(length > 0) | tonumber))}')" \
  --argjson res "$results" --argjson runs "$(jq -s . "$work/runs.jsonl")" \
  --argjson idle "$idle_rss" --argjson peak "$server_peak_rss" --argjson rend "$server_rss_end" \
  --argjson npeak "$nginx_peak_rss" --arg statuses "$statuses" \
  '{benchmark: "server", opcache_version: $version, date: $date, command: $cmd, machine: $machine,
    load_average_1m: {start: ($ls|tonumber), end: ($le|tonumber)}, options: $opts,
    corpus: {kind: $kind, bundles: $n, bundle_bytes: $b, raw_bytes: $raw, mean_bundle_bytes: ($b / $n)},
    results: $res, runs: $runs,
    memory_kib: {opcache_serve_rss_idle: $idle, opcache_serve_peak_rss: $peak, opcache_serve_rss_end: $rend,
                 nginx_peak_rss_all_processes: $npeak},
    opcache_entry_requests_by_status: ($statuses | split("\n") | map(select(length > 0)))}' >"$json"

printf '\nopcache serve benchmark — %s; %s corpus: %s bundles, mean %s bytes; %s s per run, rounds %s\n' \
  "$date_start" "$corpus_kind" "$n_keys" "$((bundle_bytes / n_keys))" "$duration" "$rounds"
printf 'opcache serve --threads %s %s, nginx %s workers, wrk -t %s; %s CPUs; load %s -> %s\n\n' \
  "$threads" "$serve_args" "$threads" "$wrk_threads" "$(nproc)" "$load_start" "$load_end"
jq -r '.results[] | . as $x |
  (["opcache", "nginx"][] as $s | $x[$s] |
    [($x.connections | tostring), $s, (.requests_per_second | round | tostring),
     ((.latency_us.p50 / 1000 * 100 | round / 100 | tostring)), ((.latency_us.p99 / 1000 * 100 | round / 100 | tostring)),
     ((.bytes / (.duration_us / 1e6) / 1e6 * 10 | round / 10) | tostring),
     ((.errors.status + .errors.connect + .errors.read + .errors.write + .errors.timeout) | tostring)]),
  [($x.connections | tostring), "opcache/nginx",
   ($x.ratio_to_nginx.requests_per_second * 100 | round / 100 | tostring),
   ($x.ratio_to_nginx.p50_latency * 100 | round / 100 | tostring),
   ($x.ratio_to_nginx.p99_latency * 100 | round / 100 | tostring), "", ""]
  | @tsv' "$json" |
  (printf 'conns\tserver\treq/s\tp50 ms\tp99 ms\tMB/s\terrors\n'; cat) | column -t -s $'\t'
printf '\nopcache serve RSS: %s KiB idle, %s KiB peak (VmHWM), %s KiB at the end; nginx (all processes) peak %s KiB\n' \
  "$idle_rss" "$server_peak_rss" "$server_rss_end" "$nginx_peak_rss"
printf 'errors = non-2xx answers + socket errors seen by wrk. JSON: %s\n' "$json"
