#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang 14 into build-fuzz/
# and runs each for a bounded time, one fuzzer process at a time. See
# tests/fuzz/README.md.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/fuzz.sh [--minutes N] [--target NAME]... [--build-only|--no-build] [--list]

Configures and builds build-fuzz/ (clang-14, -DOPCACHE_FUZZ=ON: the code under
-fsanitize=fuzzer-no-link,address,undefined), then runs every target (or each
--target) for N minutes (default 1), one after the other, and prints per target
the seconds run, the executions and the findings.

  --minutes N     minutes per target (a decimal such as 0.5 is fine)
  --target NAME   run only NAME (repeatable); --list shows the names
  --build-only    build, do not run
  --no-build      run what build-fuzz/ holds (e.g. while it is being rebuilt)
  --list          print the target names and exit

Each target starts from its seeds (tests/fuzz/corpus/NAME) and saved crashes
(tests/fuzz/regressions/NAME), with tests/fuzz/dict/NAME.dict when there is one;
what it learns goes to build-fuzz/corpus/NAME
(not committed). A crash, leak, timeout or undefined behaviour stops that
target and leaves its input in build-fuzz/artifacts/NAME/; the script then
exits 1. Fix the bug, minimize the input (fuzz_NAME -minimize_crash=1 ...),
and keep it under tests/fuzz/regressions/NAME/. A line per run is appended to
build-fuzz/fuzz-log.tsv. Environment: OPCACHE_FUZZ_ARGS adds libFuzzer flags.
EOF
}

main() {
repo=$(cd "$(dirname "$0")/.." && pwd)
build="$repo/build-fuzz"
fuzz_dir="$repo/tests/fuzz"

# Target names and their -max_len (bytes): a few times the largest seed.
declare -A max_len=(
  [bundle_reader]=16384
  [json_key]=8192
  [layouts]=16384
  [config]=4096
  [tokens]=4096
  [trusted_keys]=4096
  [server_request]=16384
)
all_targets=(bundle_reader json_key layouts config tokens trusted_keys server_request)

minutes=1
targets=()
build_only=0
no_build=0
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=${2:?--minutes needs a number}; shift 2 ;;
    --target) targets+=("${2:?--target needs a name}"); shift 2 ;;
    --build-only) build_only=1; shift ;;
    --no-build) no_build=1; shift ;;
    --list) printf '%s\n' "${all_targets[@]}"; exit 0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if ! [[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
  echo "fuzz.sh: --minutes must be a number, not '$minutes'" >&2
  exit 2
fi
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for target in "${targets[@]}"; do
  if [ -z "${max_len[$target]:-}" ]; then
    echo "fuzz.sh: unknown target '$target' (known: ${all_targets[*]})" >&2
    exit 2
  fi
done

# clang 14 and its fuzzer runtime come from Debian's clang-14 and libclang-rt-14-dev.
if ! command -v clang++-14 >/dev/null || ! compgen -G "/usr/lib/llvm-14/lib/clang/14*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  echo "fuzz.sh: clang++-14 or its libFuzzer runtime is missing; run scripts/install-deps.sh --fuzz" >&2
  exit 1
fi

if [ "$no_build" -eq 0 ]; then
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
    -DCMAKE_CXX_COMPILER=clang++-14 -DOPCACHE_FUZZ=ON -DOPCACHE_BUILD_TESTS=OFF -DOPCACHE_BUILD_BENCH=OFF \
    "${launcher[@]}" >/dev/null
  cmake --build "$build" -j"${OPCACHE_JOBS:-2}" --target "${targets[@]/#/fuzz_}"
fi
[ "$build_only" -eq 0 ] || exit 0

# Inputs libFuzzer left in an artifacts directory (crashes, leaks, timeouts, out-of-memory).
count_artifacts() {
  find "$1" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l
}

# Scratch trees (layouts, config, the server's store) on tmpfs when there is one:
# a disk's fsync would be most of a run.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  export TMPDIR=/dev/shm
fi

seconds=$(awk -v m="$minutes" 'BEGIN { s = int(m * 60 + 0.5); print (s < 1 ? 1 : s) }')
summary=()
failed=0
for target in "${targets[@]}"; do
  corpus="$build/corpus/$target"
  artifacts="$build/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  log="$build/fuzz-$target.log"
  echo "== $target: ${seconds}s (log: $log)"
  start=$(date +%s)
  before=$(count_artifacts "$artifacts")
  status=0
  dict=()
  [ ! -f "$fuzz_dir/dict/$target.dict" ] || dict=(-dict="$fuzz_dir/dict/$target.dict")
  # shellcheck disable=SC2086  # OPCACHE_FUZZ_ARGS is a list of flags
  "$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 \
    -max_len="${max_len[$target]}" -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" \
    ${OPCACHE_FUZZ_ARGS:-} "$corpus" "$fuzz_dir/corpus/$target" "$fuzz_dir/regressions/$target" >"$log" 2>&1 || status=$?
  elapsed=$(( $(date +%s) - start ))
  execs=$(awk '/stat::number_of_executed_units/ { n = $NF } END { print n + 0 }' "$log")
  findings=$(( $(count_artifacts "$artifacts") - before ))
  if [ "$status" -ne 0 ]; then
    failed=1
    findings=$(( findings > 0 ? findings : 1 ))
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|artifact_prefix|Test unit written)' "$log" | head -5 || true
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$target" "$elapsed" "$execs" "$findings" >>"$build/fuzz-log.tsv"
  summary+=("$(printf '%-16s %6ss %12s execs  %s findings' "$target" "$elapsed" "$execs" "$findings")")
done

echo
echo "target            seconds   executions  findings"
printf '%s\n' "${summary[@]}"
exit "$failed"
}

main "$@"
