#!/usr/bin/env bash
# Issue 4's benchmark: the refcc demo's steps (no cache, cold, warm, N ranks at
# once, export) repeated on real model op lists, with medians.
#
#   bench/run_refcc_bench.sh [--build DIR] [--repeat N] [--ranks N] [MODEL...]
#
# MODEL defaults to resnet50 and transformer_block (examples/models/). Prints a
# table per model and writes build/bench-results/refcc-<model>.json. Figures to
# quote: warm/cold speed-up (cold wall / warm wall) and builds per key in the
# N-rank run (1.00 means each distinct kernel was compiled exactly once).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build="$repo/build"
repeat=3
ranks=8
models=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run_refcc_bench: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || models=(resnet50 transformer_block)
mkdir -p "$build/bench-results"
echo "command: $0 --build $build --repeat $repeat --ranks $ranks ${models[*]}"
echo "machine: $(nproc) cores, $(cc --version | head -1), $(date -u +%Y-%m-%dT%H:%MZ)"
for model in "${models[@]}"; do
  echo
  python3 "$repo/scripts/refcc_demo.py" --build "$build" --model "$model" --repeat "$repeat" --ranks "$ranks" \
    --baseline --json "$build/bench-results/refcc-$model.json"
done
