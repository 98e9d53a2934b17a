#!/usr/bin/env bash
# The main job of README.md: installs dependencies, builds, then compiles a
# real network's operators with refcc (the reference op compiler, which caches
# every kernel through opcache) and prints what the cache did:
#   cold (empty cache), warm (every kernel a hit), 8 ranks at once on an empty
#   cache (each kernel built once), export to rank_*/kernel_meta, and a
#   corrupted object being detected and rebuilt instead of served.
# Extra arguments go to scripts/refcc_demo.py (e.g. --model resnet50; --help).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# Only what the demo runs: the CLI, the library and refcc (the test suite is
# built by scripts/test.sh).
"$repo/scripts/build.sh" --product-only opcache_cli opcache_shared refcc
exec python3 "$repo/scripts/refcc_demo.py" --build "$repo/build" "$@"
