#!/usr/bin/env bash
# Install what is missing, build everything, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DVTRAIN_BUILD_TESTS=ON -DVTRAIN_BUILD_BENCHMARKS=ON
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 900
