#!/usr/bin/env bash
# GPU sanity run for the agent's CUDA part, for a machine with an NVIDIA GPU.
# Builds profiler_agent/gpu with CMake and the CUDA Toolkit alone (no gRPC,
# SQLite or abseil), profiles one small layer shape with CUPTI, runs a
# single-GPU NCCL check (and a short sweep when there are 2+ GPUs), runs the
# Llama/fp8/MoE kernels' self-test and profiles a small Llama layer and an
# MoE block (in fp8 too, and a GPT layer in fp8, on sm_89 or newer), checks
# the numbers (positive durations, stable kernel sequences, GEMM throughput
# under the GPU's peak) and prints a summary. Takes a few minutes.
#
#   tests/gpu/run.sh [OUT_DIR]      (OUT_DIR keeps the profile-set files)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:-$(mktemp -d)}
mkdir -p "$out"
start=$(date +%s)
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
results=()
step() {  # step NAME COMMAND...: runs it, records PASS/FAIL
  local name=$1; shift
  echo "== $name: $*"
  if "$@"; then results+=("PASS $name"); else results+=("FAIL $name (exit $?)"); fi
}

step build bash -c "cmake -S profiler_agent/gpu -B build-gpu -DCMAKE_BUILD_TYPE=Release \
  -DVTRAIN_BUILD_AGENT_GPU=ON ${CUDA_ARCHITECTURES:+-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHITECTURES} \
  >/dev/null && cmake --build build-gpu -j$(nproc)"
bin=build-gpu/vtrain-agent-gpu
if [ ! -x "$bin" ]; then
  echo "build failed; nothing to run"; exit 1
fi
step info "$bin" info
# A GPT-3 1.3B-like layer (h 2048, 16 heads, s 1024) and a 10M-parameter Adam.
step profile "$bin" profile --hidden 2048 --heads 16 --seq-len 1024 --micro-batch 1 --tp 1 \
  --adam-params 10000000 --warmup 3 --repetitions 10 --check -o "$out/layer.json"
step profile-tp2-bf16 "$bin" profile --hidden 2048 --heads 16 --seq-len 512 --micro-batch 2 \
  --tp 2 --dtype bf16 --repetitions 5 --check -o "$out/layer_tp2_bf16.json"
# Our Llama and fp8 kernels against CPU references, then a small Llama
# layer in bf16 (and fp8 where the GPU has it) run whole.
step selftest "$bin" selftest
# A Llama 3 8B-like layer at a short sequence (h 4096, 32 heads, 8 KV heads).
step profile-llama-bf16 "$bin" profile --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 \
  --seq-len 1024 --micro-batch 1 --vocab 128256 --arch llama --dtype bf16 --repetitions 5 \
  --check -o "$out/llama_bf16.json"
# A Qwen3-30B-A3B-like MoE block (128 experts of width 768, top-8) with 16
# local experts (EP 8): router, permutation, per-expert GEMMs on 4 streams.
step profile-moe-bf16 "$bin" profile --hidden 2048 --heads 32 --kv-heads 4 --ffn 768 \
  --seq-len 1024 --micro-batch 1 --vocab 151936 --arch llama --dtype bf16 --experts 128 \
  --moe-top-k 8 --ep 8 --repetitions 5 --check -o "$out/moe_bf16.json"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
if [ "${cc:-0}" -ge 89 ]; then
  step profile-llama-fp8 "$bin" profile --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 \
    --seq-len 1024 --micro-batch 1 --vocab 128256 --arch llama --dtype fp8 --repetitions 5 \
    --check -o "$out/llama_fp8.json"
  step profile-gpt-fp8 "$bin" profile --hidden 2048 --heads 16 --seq-len 1024 --micro-batch 1 \
    --dtype fp8 --repetitions 5 --check -o "$out/gpt_fp8.json"
fi
step nccl-check "$bin" nccl --check --gpus 1
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "${gpus:-0}" -ge 2 ]; then
  step nccl-sweep "$bin" nccl --min-gpus 2 --max-gpus 2 --max-bytes 64MiB --iterations 5 \
    -o "$out/nccl.json"
fi
# A framework-like process recorded through CUDA_INJECTION64_PATH: its
# operator ranges must come back as tables (the library points NVTX at
# CUPTI): attention_fwd with its two kernels, mlp_fwd with the one inside a
# nested framework range, and nothing from the "dataloader" range.
step inject bash -c "CUDA_INJECTION64_PATH=$PWD/build-gpu/libvtrain_inject.so \
  VTRAIN_PROFILE_SHAPE=hidden=1024,heads=16,seq=128,micro_batch=1 \
  VTRAIN_PROFILE_OUT=$out/inject.json build-gpu/vtrain-inject-demo && \
  grep -q '\"attention_fwd\"' $out/inject.json && grep -q '\"mlp_fwd\"' $out/inject.json && \
  [ \$(grep -c demo_square_kernel $out/inject.json) -eq 1 ] && \
  [ \$(grep -c demo_scale_kernel $out/inject.json) -eq 2 ]"
# Bad input is refused before touching the GPU.
step bad-input bash -c "! $bin profile --hidden 1000 --heads 3 --seq-len 8 --micro-batch 1 -o /dev/null"

echo
echo "== summary ($(( $(date +%s) - start )) s; files in $out)"
for r in "${results[@]}"; do echo "  $r"; done
for f in "$out"/*.json; do
  [ -f "$f" ] && echo "  $(basename "$f"): $(grep -c '"name"' "$f") named entries, $(wc -c < "$f") bytes"
done
printf '%s\n' "${results[@]}" | grep -q '^FAIL' && exit 1
exit 0
