# shellcheck shell=bash
# Kernel corpora for the shell benchmarks. Source after bench/lib/common.sh.
#
# Two corpora, both made of real compiled kernels stored with the opcache CLI,
# cached under a directory (default <build>/bench-corpus/<name>) so that later
# runs reuse them:
#
#   refcc   every distinct kernel of the example models (examples/models/*.json)
#           compiled by refcc (the reference op compiler) through the opcache
#           store: ~300 kernels, bundles of 2-4 KB. The server benchmark's default.
#   tables  N generated kernels, each a C kernel with a 96 KiB baked-in constant
#           table (a quantised 16-bit lookup table), compiled by `ccache cc` and
#           stored with `opcache put` as a .o/.json/.info triple of ~100 KB raw.
#           The compiles go through ccache with its HTTP remote storage on
#           nginx (WebDAV), which fills the ccache baseline of the pull benchmark.
#
# Each corpus directory holds:
#   store/           an opcache store with every kernel (served by `opcache serve`)
#   keys.txt         the keys, one per line (every entry of the store)
#   kmeta/k_I.key    (tables) the key of kernel I; corpus_tables_keys lists the first N
#   entries.tsv      key, bundle bytes, raw bytes
#   www/v1/entries/<key>   the bundle bytes of each key (what the server sends
#                          for GET /v1/entries/<key>), for nginx to serve
#   corpus.json      what the corpus is, and how long generation took

# The layout version of the generated "tables" kernels; bump it when the
# generator changes so that old caches are regenerated, not mixed.
BENCH_TABLES_VERSION=1
BENCH_SCENARIO="device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1"
# 12288 x 64-bit words = 96 KiB of table per kernel.
BENCH_TABLE_WORDS=12288
BENCH_BATCH=25

# Stores of this benchmark never age (the CANN default limit is 500 MB).
export ASCEND_MAX_OP_CACHE_SIZE=1000000

# corpus_export_www OPCACHE DIR: write DIR/keys.txt, DIR/entries.tsv and
# DIR/www/v1/entries/<key> (a copy of each key's bundle object, checked
# against its SHA-256) for every entry of DIR/store that lacks one.
corpus_export_www() {
  local opcache=$1 dir=$2
  mkdir -p "$dir/www/v1/entries"
  "$opcache" -C "$dir/store" --no-remote --json ls >"$dir/ls.json"
  jq -r '.entries[] | [.key, .bundle_bytes, .raw_bytes, .digest] | @tsv' "$dir/ls.json" |
    sort >"$dir/entries.full.tsv"
  cut -f1-3 "$dir/entries.full.tsv" >"$dir/entries.tsv"
  cut -f1 "$dir/entries.full.tsv" >"$dir/keys.txt"
  local key bytes digest n=0
  : >"$dir/www.check"
  while IFS=$'\t' read -r key bytes _ digest; do
    local dst=$dir/www/v1/entries/$key
    if [[ -f $dst && $(stat -c %s "$dst") == "$bytes" ]]; then continue; fi
    cp "$dir/store/objects/${digest:0:2}/$digest" "$dst.tmp"
    mv "$dst.tmp" "$dst"
    printf '%s  %s\n' "$digest" "$dst" >>"$dir/www.check"
    n=$((n + 1))
  done <"$dir/entries.full.tsv"
  if [[ $n -gt 0 ]]; then
    sha256sum --quiet -c "$dir/www.check" || bench_die "exported bundles differ from the store's objects"
    bench_log "exported $n bundles for nginx to $dir/www/v1/entries"
  fi
}

# corpus_refcc OPCACHE REFCC REPO DIR JOBS
corpus_refcc() {
  local opcache=$1 refcc=$2 repo=$3 dir=$4 jobs=$5
  local stamp
  stamp="refcc corpus v1; $("$opcache" version | head -n 1)"
  if [[ -f $dir/corpus.json && $(jq -r .stamp "$dir/corpus.json") == "$stamp" ]]; then
    bench_log "reusing the refcc corpus in $dir"
    return 0
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  bench_log "compiling the example models with refcc into $dir/store (once; cached)"
  local t0 m
  t0=$(bench_now)
  for m in "$repo"/examples/models/*.json; do
    "$refcc" model "$m" --out "$dir/kernel_meta" --cache-dir "$dir/store" --jobs "$jobs" \
      --scenario "$BENCH_SCENARIO" >&2
  done
  rm -rf "$dir/kernel_meta"
  corpus_export_www "$opcache" "$dir"
  jq -n --arg stamp "$stamp" --arg secs "$(bench_elapsed "$t0" "$(bench_now)")" \
    --arg kernels "$(wc -l <"$dir/keys.txt")" \
    '{stamp: $stamp, kind: "refcc", kernels: ($kernels|tonumber), generation_seconds: ($secs|tonumber)}' \
    >"$dir/corpus.json"
}

# corpus_tables_sources DIR FIRST LAST: write src/k_I.c, desc/k_I.desc.json and
# kmeta/k_I.info for kernels FIRST..LAST (deterministic in I).
corpus_tables_sources() {
  awk -v dir="$1" -v first="$2" -v last="$3" -v words="$BENCH_TABLE_WORDS" '
  function shape(i, k) { return "[" (8 * (1 + (i + k) % 32)) "," (128 * (1 + int(i / 32) % 16)) "]" }
  BEGIN {
    split("Gelu FastGelu Silu Erf Exp Tanh Sigmoid Dequantize", ops, " ");
    split("float16 float32 bfloat16", dtypes, " ");
    for (i = first; i <= last; i++) {
      op = ops[1 + i % 8]; dt = dtypes[1 + int(i / 8) % 3];
      stem = sprintf("k_%05d", i);
      rows = 8 * (1 + i % 32); cols = 128 * (1 + int(i / 32) % 16); blocks = 1 + i % 40;
      src = dir "/src/" stem ".c";
      printf "/* Generated %s kernel %s: %s x %s %s, %d AI-core blocks.\n", op, stem, rows, cols, dt, blocks > src;
      printf " * The activation is evaluated through a quantised 16-bit lookup table\n" > src;
      printf " * (%d entries) baked into the object, as table-driven kernels do. */\n", words * 4 > src;
      printf "#include <stddef.h>\n#include <stdint.h>\n\n" > src;
      printf "#define ROWS %d\n#define COLS %d\n#define BLOCKS %d\n#define LUT_ENTRIES %d\n\n", rows, cols, blocks, words * 4 > src;
      printf "static const uint64_t k_lut[%d] = {\n", words > src;
      srand(i + 1);
      line = "";
      for (w = 0; w < words; w++) {
        word = "";
        for (j = 0; j < 4; j++) {
          v = int(128 + 40 * (rand() + rand() + rand() - 1.5));
          if (v < 0) v = 0; if (v > 255) v = 255;
          word = word sprintf("%02x%02x", int(rand() * 4), v);
        }
        line = line "0x" word "ULL,";
        if (w % 6 == 5) { print line > src; line = "" }
      }
      if (line != "") print line > src;
      printf "};\n\n" > src;
      printf "static const uint32_t k_tiling[BLOCKS][2] = {\n" > src;
      for (b = 0; b < blocks; b++)
        printf "  {%d, %d},\n", int(b * rows / blocks), int((b + 1) * rows / blocks) > src;
      printf "};\n\n" > src;
      printf "void %s__kernel0(const uint16_t *x, uint16_t *y, uint32_t block) {\n", stem > src;
      printf "  const uint16_t *lut = (const uint16_t *)k_lut;\n" > src;
      printf "  if (block >= BLOCKS) return;\n" > src;
      printf "  for (uint32_t r = k_tiling[block][0]; r < k_tiling[block][1]; ++r)\n" > src;
      printf "    for (uint32_t c = 0; c < COLS; ++c) {\n" > src;
      printf "      size_t at = (size_t)r * COLS + c;\n" > src;
      printf "      y[at] = (uint16_t)(lut[x[at] %% LUT_ENTRIES] + %d);\n", i % 97 > src;
      printf "    }\n}\n" > src;
      close(src);

      t = "{\"shape\":" shape(i, 0) ",\"dtype\":\"" dt "\",\"format\":\"ND\"}";
      desc = dir "/desc/" stem ".desc.json";
      printf "{\"op_type\":\"%s\",\"inputs\":[%s],\"outputs\":[%s],\"attrs\":{\"lut\":\"quantised_u16\",\"lut_entries\":%d,\"lut_seed\":%d,\"block_dim\":%d},\"kernel_name\":\"%s__kernel0\",\"full_name\":\"Default/network/%s-op%d\"}\n", \
        op, t, t, words * 4, i + 1, blocks, stem, op, i > desc;
      close(desc);

      info = dir "/kmeta/" stem ".info";
      printf "{\"job_content\":{\"SocInfo\":{\"autoTilingMode\":\"NO_TUNE\",\"coreNum\":\"\",\"deviceId\":\"0\",\"l1Fusion\":\"false\",\"l2Mode\":\"2\",\"op_debug_level\":\"0\",\"op_impl_mode\":\"\",\"socVersion\":\"Ascend910B1\"},\"full_name\":\"Default/network/%s-op%d\",\"fusion_op_name\":\"%s\",\"op_list\":[{\"name\":\"x_0\",\"output_desc\":[{\"data_type\":\"%s\",\"format\":\"ND\",\"ori_format\":\"ND\",\"ori_shape\":%s,\"param_type\":\"required\",\"shape\":%s}],\"type\":\"Data\"},{\"attr_desc\":[\"quantised_u16\",%d,%d],\"build_type\":\"accurately_build\",\"func_name\":\"%s\",\"input_desc\":[{\"data_type\":\"%s\",\"format\":\"ND\",\"name\":\"x_0\",\"ori_format\":\"ND\",\"ori_shape\":%s,\"param_type\":\"required\",\"shape\":%s}],\"module_name\":\"bench.%s\",\"output_desc\":[{\"data_type\":\"%s\",\"format\":\"ND\",\"name\":\"y_0\",\"ori_format\":\"ND\",\"ori_shape\":%s,\"param_type\":\"required\",\"shape\":%s}],\"pattern\":\"ElemWise\",\"type\":\"%s\",\"unknown_shape\":false}]},\"job_id\":%d,\"job_type\":\"SingleOpCompile\",\"source_id\":0}\n", \
        op, i, stem, dt, shape(i, 0), shape(i, 0), words * 4, i + 1, tolower(op), dt, shape(i, 0), shape(i, 0), tolower(op), dt, shape(i, 0), shape(i, 0), op, 1000 + i > info;
      close(info);
    }
  }'
}

# corpus_tables_batch B: make the kernels of batch B (run by xargs in parallel;
# reads CORPUS_* from the environment). The compile goes through ccache with
# the HTTP remote storage in CCACHE_REMOTE_STORAGE, which it fills.
corpus_tables_batch() {
  local b=$1 dir=$CORPUS_DIR
  local first=$((b * BENCH_BATCH)) last=$((b * BENCH_BATCH + BENCH_BATCH - 1))
  ((last < CORPUS_N)) || last=$((CORPUS_N - 1))
  local marker=$dir/done/b_${b}_$((last - first + 1))
  [[ -f $marker ]] && return 0
  corpus_tables_sources "$dir" "$first" "$last"
  local i stem t0 t1 sha
  cd "$dir" || return 1
  for ((i = first; i <= last; i++)); do
    stem=$(printf 'k_%05d' "$i")
    t0=$(date +%s%N)
    ccache cc -std=c11 -O2 -fPIC -ffp-contract=off -c "src/$stem.c" -o "kmeta/$stem.o"
    t1=$(date +%s%N)
    sha=$(sha256sum "kmeta/$stem.o" | cut -d' ' -f1)
    printf '{"batchBindOnly":1,"binFileName":"%s","binFileSuffix":".o","blockDim":%d,"build_result":"","kernelName":"%s__kernel0","magic":"RT_DEV_BINARY_MAGIC_ELF","opParaSize":0,"parameters":[0,0],"sha256":"%s","workspace":{"num":0,"size":[],"type":[]}}\n' \
      "$stem" $((1 + i % 40)) "$stem" "$sha" >"kmeta/$stem.json"
    "$CORPUS_OPCACHE" -C store --no-remote --json put --desc "desc/$stem.desc.json" --scenario "$BENCH_SCENARIO" \
      --build-ms $(((t1 - t0) / 1000000)) "kmeta/$stem.o" "kmeta/$stem.json" "kmeta/$stem.info" |
      jq -r .key >"kmeta/$stem.key"
  done
  : >"$marker"
}

# corpus_tables OPCACHE DIR N JOBS
# Makes (or completes) the tables corpus of N kernels in DIR, JOBS batches at
# a time. Starts its own nginx (WebDAV) on DIR/www for ccache's remote
# storage while compiling.
corpus_tables() {
  local opcache=$1 dir=$2 n=$3 jobs=$4
  local stamp
  stamp="tables corpus v$BENCH_TABLES_VERSION; $(cc --version | head -n 1); $(ccache --version | head -n 1); $("$opcache" version | head -n 1)"
  if [[ -f $dir/corpus.json && $(jq -r .stamp "$dir/corpus.json") != "$stamp" ]]; then
    bench_log "the tables corpus in $dir was made by another generator or toolchain; regenerating"
    rm -rf "$dir"
  fi
  mkdir -p "$dir"/{src,desc,kmeta,done,www/ccache}
  local nb=$(((n + BENCH_BATCH - 1) / BENCH_BATCH)) todo=0 b last
  for ((b = 0; b < nb; b++)); do
    last=$((b * BENCH_BATCH + BENCH_BATCH - 1)); ((last < n)) || last=$((n - 1))
    [[ -f $dir/done/b_${b}_$((last - b * BENCH_BATCH + 1)) ]] || todo=$((todo + 1))
  done
  if ((todo == 0)) && [[ -f $dir/corpus.json ]] && (($(jq -r .kernels "$dir/corpus.json") >= n)); then
    bench_log "reusing the tables corpus in $dir ($(jq -r .kernels "$dir/corpus.json") kernels; using $n)"
    return 0
  fi
  local prev_secs=0 prev_n=0
  if [[ -f $dir/corpus.json ]]; then
    prev_secs=$(jq -r .generation_seconds "$dir/corpus.json")
    prev_n=$(jq -r .kernels "$dir/corpus.json")
  fi
  if ((todo > 0)); then
    bench_log "generating $todo batches of up to $BENCH_BATCH kernels in $dir ($jobs at a time; cached for later runs)"
    local prefix
    prefix=$(mktemp -d "${TMPDIR:-/tmp}/opcache-corpus-nginx.XXXXXX")
    BENCH_TMPDIRS+=("$prefix")
    bench_start_nginx "$prefix" "$dir/www" dav
    local t0
    t0=$(bench_now)
    (
      export CORPUS_DIR=$dir CORPUS_N=$n CORPUS_OPCACHE=$opcache BENCH_TABLE_WORDS BENCH_BATCH BENCH_SCENARIO
      export CCACHE_DIR=$dir/ccache-local CCACHE_REMOTE_STORAGE="http://127.0.0.1:$NGINX_PORT/ccache/"
      export CCACHE_MAXSIZE=20G
      export -f corpus_tables_batch corpus_tables_sources
      # shellcheck disable=SC2016 # $1 is expanded by the inner bash
      seq 0 $((nb - 1)) | xargs -P "$jobs" -I{} bash -c 'set -euo pipefail; corpus_tables_batch "$1"' _ {}
      CCACHE_DIR=$dir/ccache-local ccache --print-stats >"$dir/ccache-populate.stats" 2>/dev/null || true
    )
    prev_secs=$(awk -v a="$prev_secs" -v b="$(bench_elapsed "$t0" "$(bench_now)")" 'BEGIN { printf "%.1f", a + b }')
    bench_stop "$NGINX_PID"
    # The local ccache directory only served the populating compiles.
    rm -rf "$dir/ccache-local"
  fi
  corpus_export_www "$opcache" "$dir"
  local have
  have=$(wc -l <"$dir/keys.txt")
  ((have >= n)) || bench_die "the corpus store holds $have kernels, expected $n"
  ((prev_n > n)) && n=$prev_n
  jq -n --arg stamp "$stamp" --arg secs "$prev_secs" --arg n "$n" \
    '{stamp: $stamp, kind: "tables", kernels: ($n|tonumber), generation_seconds: ($secs|tonumber)}' \
    >"$dir/corpus.json"
}

# corpus_tables_keys DIR N: the keys of kernels 0..N-1, one per line, in order.
corpus_tables_keys() {
  local dir=$1 n=$2 i
  for ((i = 0; i < n; i++)); do cat "$dir/kmeta/$(printf 'k_%05d' "$i").key"; done
}
