// The kernels that give a workload's buffers their first values (random-ish
// numbers, token ids, dropout masks); LayerWorkload::Create runs them once.
// Included by workloads.cu only (see kernel_common.cuh).
#ifndef VTRAIN_PROFILER_AGENT_GPU_INIT_KERNELS_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_INIT_KERNELS_CUH_

#include <cstdint>

#include "profiler_agent/gpu/kernel_common.cuh"

namespace vtrain::gpu {
namespace {

template <class T>
__global__ void init_uniform_kernel(T* p, int64_t n, uint32_t seed, float offset, float scale) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    p[i] = FromFloat<T>(offset + scale * (2.0f * UniformAt(seed, i) - 1.0f));
  }
}

__global__ void init_token_ids_kernel(int32_t* ids, int64_t n, int64_t vocab, uint32_t seed) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    ids[i] = static_cast<int32_t>(HashIndex(seed, i) % static_cast<uint64_t>(vocab));
  }
}

__global__ void init_dropout_mask_kernel(uint8_t* mask, int64_t n, uint32_t seed, float p) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    mask[i] = UniformAt(seed, i) >= p ? 1 : 0;
  }
}

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_INIT_KERNELS_CUH_
