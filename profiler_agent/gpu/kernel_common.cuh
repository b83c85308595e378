// What every kernel of the workloads shares: block and tile sizes, device
// helpers (fp16/bf16 conversion, counter-based random numbers, warp and block
// reductions, GeLU, dropout) and the host side of launching them.
//
// The kernel headers (*_kernels.cuh) are included by workloads.cu alone and
// keep the unnamed namespace the kernels always had: CUPTI records kernels
// under their demangled names ("vtrain::gpu::(anonymous namespace)::
// layer_norm_fwd_kernel<__half>(...)"), which end up in the profile tables.
#ifndef VTRAIN_PROFILER_AGENT_GPU_KERNEL_COMMON_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_KERNEL_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "profiler_agent/gpu/cuda_util.h"

namespace vtrain::gpu {
namespace {

using internal::CeilDiv;
using internal::CheckCuda;

constexpr int kThreads = 256;  // block size of every non-GEMM kernel
constexpr int64_t kMaxGridStrideBlocks = 1 << 16;
// Column reductions (bias and layer-norm gamma/beta gradients) use 32-column
// tiles with 8 row lanes each.
constexpr int kColTile = 32;
constexpr int kRowLanes = 8;

// ---------------------------------------------------------------------------
// Device helpers
// ---------------------------------------------------------------------------

__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(float x) { return x; }

template <class T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}

__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Counter-based random numbers: a 32-bit integer hash of (seed, index), so
// that dropout needs no RNG state and a mask element depends only on its
// index (what Philox gives Megatron, at a fraction of the cost).
__device__ __forceinline__ uint32_t HashIndex(uint32_t seed, uint64_t i) {
  uint32_t x = static_cast<uint32_t>(i) ^ (seed * 0x9E3779B9u);
  x ^= static_cast<uint32_t>(i >> 32) * 0x85EBCA6Bu;
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// Uniform in [0, 1) from the top 24 bits.
__device__ __forceinline__ float UniformAt(uint32_t seed, uint64_t i) {
  return static_cast<float>(HashIndex(seed, i) >> 8) * (1.0f / 16777216.0f);
}

struct SumOp {
  static constexpr float kIdentity = 0.0f;
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  static constexpr float kIdentity = -INFINITY;
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class Op>
__device__ __forceinline__ float WarpReduce(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = Op()(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Block-wide reduction, returned to every thread. Every thread of the block
// must call it (blockDim.x a multiple of 32). Back-to-back calls are safe: a
// call's writes to `partial` come after every thread passed the previous
// call's second barrier, by which time warp 0 has read it. Each Op has its
// own shared arrays (one per template instance).
template <class Op>
__device__ float BlockReduce(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  v = WarpReduce<Op>(v);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x >> 5);
    float r = lane < warps ? partial[lane] : Op::kIdentity;
    r = WarpReduce<Op>(r);
    if (lane == 0) total = r;
  }
  __syncthreads();
  return total;
}

__device__ float BlockReduceSum(float v) { return BlockReduce<SumOp>(v); }
__device__ float BlockReduceMax(float v) { return BlockReduce<MaxOp>(v); }

// tanh approximation of GeLU (Megatron's bias_gelu) and its derivative.
constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

__device__ __forceinline__ float Gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(kGeluK * (x + kGeluC * x * x * x)));
}
__device__ __forceinline__ float GeluGrad(float x) {
  const float t = tanhf(kGeluK * (x + kGeluC * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluC * x * x);
}

template <class T>
__device__ __forceinline__ void DropoutFwd(const T* x, T* y, uint8_t* mask, int64_t n, float p,
                                           uint32_t seed) {
  const float keep_scale = 1.0f / (1.0f - p);
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const bool keep = UniformAt(seed, i) >= p;
    mask[i] = keep ? 1 : 0;
    y[i] = FromFloat<T>(keep ? ToFloat(x[i]) * keep_scale : 0.0f);
  }
}

// May run in place (dx == dy).
template <class T>
__device__ __forceinline__ void DropoutBwd(const T* dy, const uint8_t* mask, T* dx, int64_t n,
                                           float keep_scale) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    dx[i] = FromFloat<T>(mask[i] ? ToFloat(dy[i]) * keep_scale : 0.0f);
  }
}

// ---------------------------------------------------------------------------
// Launching
// ---------------------------------------------------------------------------

unsigned GridFor(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>(CeilDiv(n, kThreads), 1, kMaxGridStrideBlocks));
}

// Launches `kernel` and returns "" or "<name>: <CUDA error>".
template <class... KernelArgs, class... Args>
std::string Launch(const char* name, void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                   cudaStream_t stream, Args... args) {
  static_assert(sizeof...(KernelArgs) == sizeof...(Args), "kernel argument count");
  kernel<<<grid, block, 0, stream>>>(static_cast<KernelArgs>(args)...);
  return CheckCuda(name, cudaGetLastError());
}

// The same with `shared_bytes` of dynamic shared memory (above 48 KiB the
// kernel's cudaFuncAttributeMaxDynamicSharedMemorySize must have been set).
template <class... KernelArgs, class... Args>
std::string LaunchShared(const char* name, void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                         size_t shared_bytes, cudaStream_t stream, Args... args) {
  static_assert(sizeof...(KernelArgs) == sizeof...(Args), "kernel argument count");
  kernel<<<grid, block, shared_bytes, stream>>>(static_cast<KernelArgs>(args)...);
  return CheckCuda(name, cudaGetLastError());
}

// Grid of the column-reduction kernels: one block per 32-column tile and
// enough row chunks to give a large GPU a few hundred blocks, without many
// atomics per gradient element.
dim3 ColumnReduceGrid(int64_t rows, int64_t cols, int64_t* rows_per_chunk) {
  const int64_t tiles = CeilDiv(cols, kColTile);
  const int64_t chunks = std::clamp<int64_t>(CeilDiv(512, tiles), 1, CeilDiv(rows, 64));
  *rows_per_chunk = CeilDiv(rows, chunks);
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(CeilDiv(rows, *rows_per_chunk)));
}

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_KERNEL_COMMON_CUH_
