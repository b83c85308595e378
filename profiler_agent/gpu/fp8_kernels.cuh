// Our kernels for fp8 linear layers as Transformer Engine runs them with
// delayed scaling (Micikevicius et al. 2022, "FP8 Formats for Deep
// Learning"): the cast of a 16-bit tensor to fp8 with its transpose (the
// weight gradient's operand) and its absolute maximum, and the update of
// the amax history and scales after a pass. E4M3 for activations and
// weights, E5M2 for gradients.
#ifndef VTRAIN_PROFILER_AGENT_GPU_FP8_KERNELS_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_FP8_KERNELS_CUH_

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "profiler_agent/gpu/kernel_common.cuh"

namespace vtrain::gpu {
namespace {

// The largest finite values of the two formats (OCP FP8 specification).
constexpr float kFp8E4m3Max = 448.0f;
constexpr float kFp8E5m2Max = 57344.0f;
// Tiles of the cast-transpose: 32 x 32 elements, 32 x 8 threads.
constexpr int kCastTile = 32;
constexpr int kCastRows = 8;

// Non-negative floats order like their bit patterns as ints.
__device__ __forceinline__ void AtomicMaxNonNegative(float* address, float value) {
  atomicMax(reinterpret_cast<int*>(address), __float_as_int(value));
}

// out = fp8(x * scale) [rows, cols] and out_t its transpose [cols, rows];
// the largest |x| goes into *amax (atomically). The conversion saturates to
// the format's largest finite value, as Transformer Engine's does.
template <class T, class F8>
__global__ void fp8_cast_transpose_kernel(const T* x, const float* scale, F8* out, F8* out_t,
                                          float* amax, int64_t rows, int64_t cols) {
  __shared__ F8 tile[kCastTile][kCastTile + 1];
  const float sc = *scale;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kCastTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kCastTile;
  float local = 0.0f;
  for (int j = threadIdx.y; j < kCastTile; j += kCastRows) {
    const int64_t r = r0 + j;
    const int64_t c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      const float v = ToFloat(x[r * cols + c]);
      local = fmaxf(local, fabsf(v));
      const F8 q(v * sc);
      out[r * cols + c] = q;
      tile[j][threadIdx.x] = q;
    }
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kCastTile; j += kCastRows) {
    const int64_t c = c0 + j;
    const int64_t r = r0 + threadIdx.x;
    if (r < rows && c < cols) out_t[c * rows + r] = tile[threadIdx.x][j];
  }
  local = WarpReduce<MaxOp>(local);
  if (threadIdx.x == 0) AtomicMaxNonNegative(amax, local);
}

// Delayed scaling for `count` tensors (one module's inputs, weights and
// output gradients): the amax history is [history, count] with the newest
// amax in row 0; each tensor's scale becomes fp8_max / max(history) (kept
// when that is zero or not finite), scale_inv its inverse, and the history
// rolls by one row with row 0 cleared for the next pass. Tensor i's format
// is E5M2 when i % 3 == 2 (output gradients), else E4M3. One thread per
// tensor: a few KB, as in Transformer Engine.
__global__ void fp8_amax_scale_update_kernel(float* amax_history, float* scale, float* scale_inv,
                                             int64_t first, int64_t count, int64_t stride,
                                             int64_t history) {
  const int64_t t = first + threadIdx.x;
  if (threadIdx.x >= count) return;
  float amax = 0.0f;
  for (int64_t h = 0; h < history; ++h) amax = fmaxf(amax, amax_history[h * stride + t]);
  for (int64_t h = history - 1; h > 0; --h) {
    amax_history[h * stride + t] = amax_history[(h - 1) * stride + t];
  }
  amax_history[t] = 0.0f;
  const float fp8_max = t % 3 == 2 ? kFp8E5m2Max : kFp8E4m3Max;
  const float s = fp8_max / amax;
  if (amax > 0.0f && isfinite(s)) {
    scale[t] = s;
    scale_inv[t] = 1.0f / s;
  }
}

// Host side: "" when the current device has fp8 GEMMs (compute capability
// 8.9 or newer: Ada, Hopper, Blackwell), else the message saying so.
inline std::string CheckFp8Device() {
  int device = 0;
  int major = 0;
  int minor = 0;
  if (std::string e = CheckCuda("cudaGetDevice", cudaGetDevice(&device)); !e.empty()) return e;
  if (std::string e =
          CheckCuda("cudaDeviceGetAttribute",
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
      !e.empty()) {
    return e;
  }
  if (std::string e =
          CheckCuda("cudaDeviceGetAttribute",
                    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
      !e.empty()) {
    return e;
  }
  if (major * 10 + minor >= 89) return std::string();
  return "fp8 GEMMs need a GPU of compute capability 8.9 or newer (Ada, Hopper, Blackwell); "
         "this one is sm_" +
         std::to_string(major) + std::to_string(minor) + "; profile with --dtype bf16";
}

// Host side: src [rows, cols] to F8 (E4M3 or E5M2) with its transpose, its
// amax into *amax. Returns "" or the launch error.
template <class F8, class T>
std::string LaunchCastTranspose(cudaStream_t stream, const T* src, int64_t rows, int64_t cols,
                                const float* scale, float* amax, uint8_t* out, uint8_t* out_t) {
  const dim3 grid(static_cast<unsigned>(CeilDiv(cols, kCastTile)),
                  static_cast<unsigned>(CeilDiv(rows, kCastTile)));
  return Launch("fp8_cast_transpose_kernel", fp8_cast_transpose_kernel<T, F8>, grid,
                dim3(kCastTile, kCastRows), stream, src, scale, reinterpret_cast<F8*>(out),
                reinterpret_cast<F8*>(out_t), amax, rows, cols);
}

// Host side: the scale update of `count` (at most 32) tensors from `first`
// of an amax history [rows, stride].
inline std::string LaunchAmaxScaleUpdate(cudaStream_t stream, float* history, float* scale,
                                         float* scale_inv, int64_t first, int64_t count,
                                         int64_t stride, int64_t rows) {
  return Launch("fp8_amax_scale_update_kernel", fp8_amax_scale_update_kernel, 1, 32, stream,
                history, scale, scale_inv, first, count, stride, rows);
}

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_FP8_KERNELS_CUH_
