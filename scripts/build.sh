#!/usr/bin/env bash
# Configures and builds vtrain into build/ (Release, unity batches, Ninja when
# it is installed and build/ is new). Extra arguments go to CMake;
# BUILD_TARGETS (space-separated) builds only those targets and what they need;
# BUILD_DIR (default build) builds elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
generator=()
# A build folder keeps the generator it was made with; a new one gets Ninja,
# which starts a target's compiles before the libraries below it are linked.
if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
targets=()
for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
