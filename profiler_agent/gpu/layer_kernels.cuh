// The decoder layer's own kernels, standing in for Megatron-LM's fused ones:
// layer norm and its gradients, bias-gradient reductions, the attention core
// (causal softmax, dropout, context permutes) and the residual/MLP
// element-wise kernels. Included by workloads.cu only (see kernel_common.cuh).
#ifndef VTRAIN_PROFILER_AGENT_GPU_LAYER_KERNELS_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_LAYER_KERNELS_CUH_

#include <cstdint>

#include "profiler_agent/gpu/kernel_common.cuh"

namespace vtrain::gpu {
namespace {

// ---------------------------------------------------------------------------
// Layer norm (apex FusedLayerNorm in Megatron): forward saves the row mean
// and 1/std for the backward; the backward's input gradient and its
// gamma/beta gradients are separate kernels as in apex, since the latter
// reduce over rows instead of along them.
// ---------------------------------------------------------------------------

template <class T>
__global__ void layer_norm_fwd_kernel(const T* x, const T* gamma, const T* beta, T* y,
                                      float* mean_out, float* rstd_out, int64_t cols, float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += ToFloat(xr[c]);
  const float mean = BlockReduceSum(sum) / static_cast<float>(cols);
  // Two passes over the (cache-resident) row rather than E[x^2] - E[x]^2,
  // which cancels badly for rows with a large mean.
  float sq = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = ToFloat(xr[c]) - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(BlockReduceSum(sq) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = (ToFloat(xr[c]) - mean) * rstd;
    yr[c] = FromFloat<T>(xhat * ToFloat(gamma[c]) + ToFloat(beta[c]));
  }
  if (threadIdx.x == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
template <class T>
__global__ void layer_norm_bwd_kernel(const T* dy, const T* x, const T* gamma, const float* mean,
                                      const float* rstd, T* dx, int64_t cols) {
  const int64_t row = blockIdx.x;
  const T* dyr = dy + row * cols;
  const T* xr = x + row * cols;
  T* dxr = dx + row * cols;
  const float mu = mean[row];
  const float rs = rstd[row];
  float sum_g = 0.0f;
  float sum_gx = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = ToFloat(dyr[c]) * ToFloat(gamma[c]);
    sum_g += g;
    sum_gx += g * (ToFloat(xr[c]) - mu) * rs;
  }
  const float mean_g = BlockReduceSum(sum_g) / static_cast<float>(cols);
  const float mean_gx = BlockReduceSum(sum_gx) / static_cast<float>(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = ToFloat(dyr[c]) * ToFloat(gamma[c]);
    const float xhat = (ToFloat(xr[c]) - mu) * rs;
    dxr[c] = FromFloat<T>(rs * (g - mean_g - xhat * mean_gx));
  }
}

// Block (kColTile, kRowLanes) over a column tile and a chunk of rows;
// accumulates into fp32 gradients with atomics, like Megatron's fp32
// main_grad that gradients of every micro-batch are added into (and the
// optimizer zeroes), so repeated runs need no zeroing kernel.
template <class T>
__global__ void layer_norm_gamma_beta_grad_kernel(const T* dy, const T* x, const float* mean,
                                                  const float* rstd, int64_t rows, int64_t cols,
                                                  int64_t rows_per_chunk, float* dgamma,
                                                  float* dbeta) {
  __shared__ float sum_gamma[kRowLanes][kColTile + 1];
  __shared__ float sum_beta[kRowLanes][kColTile + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float g = 0.0f;
  float b = 0.0f;
  if (c < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const float d = ToFloat(dy[r * cols + c]);
      g += d * (ToFloat(x[r * cols + c]) - mean[r]) * rstd[r];
      b += d;
    }
  }
  sum_gamma[threadIdx.y][threadIdx.x] = g;
  sum_beta[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int lane = 1; lane < kRowLanes; ++lane) {
      g += sum_gamma[lane][threadIdx.x];
      b += sum_beta[lane][threadIdx.x];
    }
    atomicAdd(dgamma + c, g);
    atomicAdd(dbeta + c, b);
  }
}

// Bias gradients of two GEMMs in one launch (the column sums of their
// output gradients), as the analytical list has one bias_grad_reduce per
// block: columns [0, cols_a) come from `a`, the rest from `b`. Same tiling
// and fp32 accumulation as the gamma/beta gradients.
template <class T>
__global__ void bias_grad_reduce_kernel(const T* a, int64_t cols_a, float* grad_a, const T* b,
                                        int64_t cols_b, float* grad_b, int64_t rows,
                                        int64_t rows_per_chunk) {
  __shared__ float sums[kRowLanes][kColTile + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  const bool in_a = c < cols_a;
  const bool valid = c < cols_a + cols_b;
  const T* src = in_a ? a : b;
  const int64_t cols = in_a ? cols_a : cols_b;
  const int64_t col = in_a ? c : c - cols_a;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float s = 0.0f;
  if (valid) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) s += ToFloat(src[r * cols + col]);
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && valid) {
    for (int lane = 1; lane < kRowLanes; ++lane) s += sums[lane][threadIdx.x];
    atomicAdd((in_a ? grad_a : grad_b) + col, s);
  }
}

// ---------------------------------------------------------------------------
// Attention core (Megatron's CoreAttention, Korthikanti et al. 2022 Sec. 4.1:
// QK^T, scale + causal mask + softmax, dropout, attention x V)
// ---------------------------------------------------------------------------

// One block per row of the [b*a, s, s] scores; row r is query r % s, which
// sees keys 0..r % s (upper-triangular mask). The 1/sqrt(d) factor is
// already in the scores GEMM's alpha, as in Megatron's baddbmm; `scale` is
// the softmax's own input scale (Megatron's query-key layer scaling).
template <class T>
__global__ void scaled_causal_softmax_fwd_kernel(const T* scores, T* probs, int64_t s,
                                                 float scale) {
  const int64_t row = blockIdx.x;
  const int64_t valid = row % s + 1;
  const T* in = scores + row * s;
  T* out = probs + row * s;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < valid; c += blockDim.x) m = fmaxf(m, scale * ToFloat(in[c]));
  m = BlockReduceMax(m);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < valid; c += blockDim.x) {
    sum += expf(scale * ToFloat(in[c]) - m);
  }
  const float inv_sum = 1.0f / BlockReduceSum(sum);
  for (int64_t c = threadIdx.x; c < s; c += blockDim.x) {
    out[c] = FromFloat<T>(c < valid ? expf(scale * ToFloat(in[c]) - m) * inv_sum : 0.0f);
  }
}

// dS = scale * P * (dP - sum(dP * P)), in place on the probability
// gradient (as Megatron's fused kernel writes into its output_grads): each
// element is read and written by the same thread, after the row sum.
template <class T>
__global__ void scaled_causal_softmax_bwd_kernel(const T* probs, T* grad, int64_t s, float scale) {
  const int64_t row = blockIdx.x;
  const int64_t valid = row % s + 1;
  const T* p = probs + row * s;
  T* g = grad + row * s;
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < valid; c += blockDim.x) dot += ToFloat(p[c]) * ToFloat(g[c]);
  dot = BlockReduceSum(dot);
  for (int64_t c = threadIdx.x; c < s; c += blockDim.x) {
    const float v = c < valid ? scale * ToFloat(p[c]) * (ToFloat(g[c]) - dot) : 0.0f;
    g[c] = FromFloat<T>(v);
  }
}

template <class T>
__global__ void attention_dropout_fwd_kernel(const T* probs, T* dropped, uint8_t* mask, int64_t n,
                                             float p, uint32_t seed) {
  DropoutFwd(probs, dropped, mask, n, p, seed);
}

template <class T>
__global__ void attention_dropout_bwd_kernel(const T* dy, const uint8_t* mask, T* dx, int64_t n,
                                             float keep_scale) {
  DropoutBwd(dy, mask, dx, n, keep_scale);
}

// The context GEMM writes [b, a, s, d] (batch-major, as torch.bmm does);
// Megatron permutes it to [s, b, a, d] = [tokens, a*d] with a copy kernel
// before the projection GEMM.
template <class T>
__global__ void context_transpose_copy_kernel(const T* in, T* out, int64_t s, int64_t b, int64_t a,
                                              int64_t d) {
  const int64_t n = s * b * a * d;
  for (int64_t o = GlobalThread(); o < n; o += GridThreads()) {
    const int64_t di = o % d;
    int64_t rest = o / d;
    const int64_t hi = rest % a;
    rest /= a;
    const int64_t bi = rest % b;
    const int64_t si = rest / b;
    out[o] = in[((bi * a + hi) * s + si) * d + di];
  }
}

template <class T>
__global__ void context_transpose_copy_bwd_kernel(const T* in, T* out, int64_t s, int64_t b,
                                                  int64_t a, int64_t d) {
  const int64_t n = s * b * a * d;
  for (int64_t o = GlobalThread(); o < n; o += GridThreads()) {
    const int64_t di = o % d;
    int64_t rest = o / d;
    const int64_t si = rest % s;
    rest /= s;
    const int64_t hi = rest % a;
    const int64_t bi = rest / a;
    out[o] = in[((si * b + bi) * a + hi) * d + di];
  }
}

// ---------------------------------------------------------------------------
// Element-wise kernels of the residual stream and the MLP
// ---------------------------------------------------------------------------

// Only when cuBLASLt has no bias epilogue for the QKV GEMM's shape (Megatron
// then adds the bias in a separate kernel too).
template <class T>
__global__ void bias_add_kernel(T* y, const T* bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    y[i] = FromFloat<T>(ToFloat(y[i]) + ToFloat(bias[i % cols]));
  }
}

// out = residual + dropout(y + bias): Megatron's fused bias_dropout_add
// after the row-parallel projection and FFN-down GEMMs, whose bias add is
// deferred until after the tensor-parallel all-reduce.
template <class T>
__global__ void bias_dropout_add_fwd_kernel(const T* y, const T* bias, const T* residual, T* out,
                                            uint8_t* mask, int64_t rows, int64_t cols, float p,
                                            uint32_t seed) {
  const int64_t n = rows * cols;
  const float keep_scale = 1.0f / (1.0f - p);
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const bool keep = UniformAt(seed, i) >= p;
    mask[i] = keep ? 1 : 0;
    const float v = keep ? (ToFloat(y[i]) + ToFloat(bias[i % cols])) * keep_scale : 0.0f;
    out[i] = FromFloat<T>(ToFloat(residual[i]) + v);
  }
}

// The gradient of the GEMM output; the residual's gradient is the incoming
// gradient itself (no kernel) and the bias gradient comes later from
// bias_grad_reduce_kernel.
template <class T>
__global__ void bias_dropout_add_bwd_kernel(const T* dout, const uint8_t* mask, T* dy, int64_t n,
                                            float keep_scale) {
  DropoutBwd(dout, mask, dy, n, keep_scale);
}

template <class T>
__global__ void bias_gelu_fwd_kernel(const T* x, const T* bias, T* y, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    y[i] = FromFloat<T>(Gelu(ToFloat(x[i]) + ToFloat(bias[i % cols])));
  }
}

// Recomputes x + bias from the saved GEMM output instead of storing it, as
// Megatron's bias_gelu_back does.
template <class T>
__global__ void bias_gelu_bwd_kernel(const T* dy, const T* x, const T* bias, T* dx, int64_t rows,
                                     int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float v = ToFloat(x[i]) + ToFloat(bias[i % cols]);
    dx[i] = FromFloat<T>(ToFloat(dy[i]) * GeluGrad(v));
  }
}

// A layer's input gradient: the residual path's gradient plus the
// layer-norm branch's.
template <class T>
__global__ void residual_add_bwd_kernel(const T* residual_grad, const T* branch_grad, T* out,
                                        int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    out[i] = FromFloat<T>(ToFloat(residual_grad[i]) + ToFloat(branch_grad[i]));
  }
}

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_LAYER_KERNELS_CUH_
