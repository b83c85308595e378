#include "profiler_agent/gpu/device_buffers.h"

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>

#include "profiler_agent/gpu/cuda_util.h"
#include "profiler_agent/gpu/llama_buffers.h"
#include "profiler_agent/gpu/moe_workload.h"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {
namespace internal {

Dims MakeDims(const LayerShape& shape) {
  Dims dims;
  const int64_t t = shape.tensor_parallel;
  dims.h = shape.hidden;
  dims.a = shape.heads / t;
  dims.d = shape.hidden / shape.heads;
  dims.f = (shape.ffn > 0 ? shape.ffn : 4 * shape.hidden) / t;
  dims.s = shape.seq;
  dims.b = shape.micro_batch;
  dims.n = shape.seq * shape.micro_batch;
  dims.v = CeilDiv(shape.vocab, t);
  dims.vocab = shape.vocab;
  dims.adam = shape.adam_params;
  dims.fp8 = shape.fp8;
  return dims;
}

LlamaDims MakeLlamaDims(const LayerShape& shape) {
  LlamaDims dims;
  const int64_t t = shape.tensor_parallel;
  dims.h = shape.hidden;
  dims.a = shape.heads / t;
  dims.kv = (shape.kv_heads > 0 ? shape.kv_heads : shape.heads) / t;
  dims.d = shape.hidden / shape.heads;
  dims.f = (shape.ffn > 0 ? shape.ffn : 4 * shape.hidden) / t;
  dims.s = shape.seq;
  dims.b = shape.micro_batch;
  dims.n = shape.seq * shape.micro_batch;
  dims.v = CeilDiv(shape.vocab, t);
  dims.vocab = shape.vocab;
  dims.adam = shape.adam_params;
  dims.fp8 = shape.fp8;
  return dims;
}

DeviceArena::~DeviceArena() { Release(); }

void DeviceArena::Release() {
  // Nothing to report to from here: a failed free at teardown leaves
  // nothing for the caller to do.
  for (void* p : allocations_) (void)cudaFree(p);
  allocations_.clear();
}

}  // namespace internal

// ValidateShape is in shape.cc (plain C++, shared with the tests).

int64_t WorkloadBytes(const LayerShape& shape) {
  if (!ValidateShape(shape).empty()) return std::numeric_limits<int64_t>::max();
  internal::DeviceArena counter(false);
  if (shape.experts > 0) {
    internal::MoeBuffers<__half> layout{};  // same sizes for bf16
    const int64_t ffn = shape.ffn > 0 ? shape.ffn : 4 * shape.hidden;
    layout.Layout(shape.micro_batch * shape.seq, shape.hidden, ffn, shape.experts, shape.moe_top_k,
                  shape.experts / shape.expert_parallel, &counter);
  } else if (shape.llama) {
    internal::LlamaBuffers<__half> layout{};  // same sizes for bf16
    layout.Layout(internal::MakeLlamaDims(shape), &counter);
  } else {
    internal::Buffers<__half> layout{};  // same sizes for bf16
    layout.Layout(internal::MakeDims(shape), &counter);
  }
  if (counter.bytes() >= internal::kMaxBytes) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(counter.bytes());
}

}  // namespace vtrain::gpu
