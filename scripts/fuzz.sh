#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang into build-fuzz/ and
# runs each for a fixed time on a copy of its seed corpus, so CI's fuzzing
# costs the same whatever the targets' speed. Exits non-zero when a target
# crashes or finds undefined behaviour; the crashing input is left in
# build-fuzz/fuzz-out/<target>/.
#   FUZZ_TIME=10 (seconds per target), FUZZ_RUNS=N (a number of executions per
#   target instead, when FUZZ_TIME=0), FUZZ_TARGETS="bandwidth operator_key"
#   (a subset).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/install-deps.sh clang libclang-rt-14-dev

runs=${FUZZ_RUNS:-20000}
time_s=${FUZZ_TIME:-10}
all_targets=(profile_set_json job_json vtrain_config nccl_tests vtrain_trace measurement_csv
  operator_key bandwidth cluster_trace megatron_args bridge_config)
read -r -a targets <<<"${FUZZ_TARGETS:-${all_targets[*]}}"

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
generator=()
if [ ! -f build-fuzz/CMakeCache.txt ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DVTRAIN_BUILD_FUZZERS=ON -DVTRAIN_BUILD_TESTS=OFF -DVTRAIN_BUILD_BENCHMARKS=OFF \
  -DVTRAIN_BUILD_AGENT_GPU=OFF "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/%/_fuzzer}"

limit=(-runs="$runs")
if [ "$time_s" -gt 0 ]; then limit=(-max_total_time="$time_s"); fi
failed=()
for t in "${targets[@]}"; do
  out=build-fuzz/fuzz-out/$t
  rm -rf "$out"
  mkdir -p "$out/corpus"
  cp tests/fuzz/corpus/"$t"/* "$out/corpus/"
  # Seeds kept elsewhere (as tests/fuzz/CMakeLists.txt's SEEDS).
  if [ "$t" = megatron_args ]; then cp data/megatron-launches/* "$out/corpus/"; fi
  if [ "$t" = bridge_config ]; then cp data/megatron-bridge/* "$out/corpus/"; fi
  start=$(date +%s)
  if (cd "$out" && "../../tests/fuzz/${t}_fuzzer" "${limit[@]}" -max_len=4096 -timeout=10 \
        -rss_limit_mb=4096 -print_final_stats=1 corpus >log.txt 2>&1); then
    echo "fuzz.sh: $t: ok ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$out/log.txt" |
      grep -o '[0-9]*$') runs, $(($(date +%s) - start)) s)"
  else
    echo "fuzz.sh: $t: FAILED; see $out/log.txt and the crash-* input in $out/"
    tail -n 40 "$out/log.txt"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: failed: ${failed[*]}"
  exit 1
fi
