#!/usr/bin/env bash
# Install what is missing, build everything, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DVTRAIN_BUILD_TESTS=ON -DVTRAIN_BUILD_BENCHMARKS=ON
if [ -x build/profiler_agent/gpu/vtrain-agent-gpu ]; then
  echo "test.sh: the agent's CUDA part was built; its no-GPU paths are tested here (tests/gpu/run.sh needs a GPU)"
else
  echo "test.sh: no CUDA Toolkit found; the agent's CUDA part is not built or tested"
fi
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 900
