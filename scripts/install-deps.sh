#!/usr/bin/env bash
# Installs every Debian 12 package opcache needs to build, test and benchmark.
# Idempotent: does nothing (not even `apt-get update`) when all are present.
# Run as root, or as a user with sudo.
#
#   scripts/install-deps.sh          build and test dependencies
#   scripts/install-deps.sh --bench  also what bench/run needs (wrk, nginx, ccache, gnuplot)
#   scripts/install-deps.sh --fuzz   also what scripts/fuzz.sh needs (clang 14 and its libFuzzer runtime)
set -euo pipefail

packages=(
  # toolchain
  cmake g++ gcc make pkg-config git
  # libraries the code links
  libcurl4-openssl-dev libssl-dev libzstd-dev libsqlite3-dev
  nlohmann-json3-dev libcli11-dev libinih-dev libboost-dev
  # tests
  doctest-dev libvalijson-dev openssl zstd sqlite3 procps python3 curl
)
if [ "${1:-}" = "--bench" ]; then
  # baselines bench/run measures against in the same run, and gnuplot for its charts
  packages+=(wrk nginx-light ccache gnuplot-nox)
elif [ "${1:-}" = "--fuzz" ]; then
  packages+=(clang-14 libclang-rt-14-dev)
elif [ $# -gt 0 ]; then
  echo "usage: install-deps.sh [--bench|--fuzz]" >&2
  exit 2
fi

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "install-deps: missing packages (${missing[*]}) and not root; run as root or install sudo" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
