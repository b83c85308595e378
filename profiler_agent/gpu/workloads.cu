// Operator workloads of one Megatron-LM GPT decoder layer on one
// tensor-parallel rank, for the agent's CUPTI profiler: each operator
// (embedding, attention and MLP blocks, logit, loss, Adam) enqueues the
// kernel sequence Megatron-LM launches for it, so that measured profile
// tables line up with the analytical generator (core/profile/analytical.cc)
// nearly kernel for kernel: layer-norm backward is two kernels here (input
// grad, then gamma/beta grad, as apex does) and cuBLASLt may add split-K
// reduction kernels; lookups compare whole operators, not kernels.
//
// GEMMs go through cuBLASLt; everything else is a small kernel of our own.
// The kernels are deliberately simple (one block per row for row
// reductions, grid-stride loops for element-wise work): they stand in for
// Megatron's fused kernels (fused layer-norm, scaled-upper-triangular-
// masked softmax, bias-GeLU, bias-dropout-add, vocabulary-parallel cross
// entropy, multi-tensor Adam) with about the same memory traffic and the
// same launch structure, not the same speed.
//
// Layout conventions (Megatron's): activations are row-major [s*b, width]
// with the token row index s_i*b + b_i; weights are row-major
// [out_features, in_features] like torch.nn.Linear, so Y = X W^T.
// cuBLASLt is column-major; a row-major [r, c] matrix is handed to it as a
// column-major [c, r] one with the same leading dimension, and
// C = A B (row-major) is computed as C^T = B^T A^T (column-major), i.e. with
// the operands swapped. ToColumnMajor is the only place that does this.
#include "profiler_agent/gpu/workloads.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// Returns the error string of `expr` from the enclosing function when it is
// not empty. Local to this file (#undef at the end).
#define VTRAIN_RETURN_IF_ERROR(expr)                    \
  do {                                                  \
    std::string vtrain_status_ = (expr);                \
    if (!vtrain_status_.empty()) return vtrain_status_; \
  } while (false)

namespace vtrain::gpu {
namespace {

// ---------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------

constexpr int kThreads = 256;  // block size of every non-GEMM kernel
constexpr int64_t kMaxGridStrideBlocks = 1 << 16;
// Column reductions (bias and layer-norm gamma/beta gradients) use 32-column
// tiles with 8 row lanes each.
constexpr int kColTile = 32;
constexpr int kRowLanes = 8;

constexpr float kDropout = 0.1f;  // Megatron's default hidden and attention dropout
constexpr float kLayerNormEps = 1e-5f;
// The gradient of the loss with respect to each token's loss, loss scale
// included. Chosen so that the softmax-minus-one-hot gradients of a 50k-256k
// vocabulary stay normal fp16 numbers (~kLossGradScale / vocab) and the
// weight gradients summed over thousands of tokens stay far below the fp16
// maximum.
constexpr float kLossGradScale = 32.0f;
// apex's multi_tensor_apply launches at most 320 chunks of 65536 elements
// per kernel; the optimizer step launches one kernel per such slice, like
// Megatron's fused Adam.
constexpr int64_t kAdamElementsPerLaunch = 65536LL * 320;
constexpr uint64_t kWorkspaceBytes = 32ULL << 20;
// No single buffer, and no workload, may need more than this (1 PiB): far
// beyond any GPU, and small enough that every size fits in int64 and
// double exactly.
constexpr double kMaxBytes = 1125899906842624.0;

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

// ---------------------------------------------------------------------------
// Initialisation kernels (Create only)
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Vocabulary-parallel embedding (Megatron's VocabParallelEmbedding): this
// rank holds word rows [vocab_start, vocab_end); other ids give zero rows,
// which the (separately simulated) all-reduce fills in from their owners.
// ---------------------------------------------------------------------------

// Local row of each token, or -1 when another rank owns it.
__global__ void vocab_range_mask_kernel(const int32_t* ids, int32_t* local_ids, int64_t n,
                                        int64_t vocab_start, int64_t vocab_end) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t id = ids[i];
    local_ids[i] =
        id >= vocab_start && id < vocab_end ? static_cast<int32_t>(id - vocab_start) : -1;
  }
}

template <class T>
__global__ void word_embedding_gather_kernel(const int32_t* local_ids, const T* table, T* out,
                                             int64_t tokens, int64_t h) {
  const int64_t n = tokens * h;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t id = local_ids[i / h];
    out[i] = id >= 0 ? table[id * h + i % h] : FromFloat<T>(0.0f);
  }
}

// Token row s_i * b + b_i sits at position s_i.
template <class T>
__global__ void position_embedding_gather_kernel(const T* table, T* out, int64_t tokens, int64_t b,
                                                 int64_t h) {
  const int64_t n = tokens * h;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    out[i] = table[(i / h / b) * h + i % h];
  }
}

// May run in place (out == a).
template <class T>
__global__ void embedding_add_kernel(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    out[i] = FromFloat<T>(ToFloat(a[i]) + ToFloat(b[i]));
  }
}

template <class T>
__global__ void embedding_dropout_fwd_kernel(const T* x, T* y, uint8_t* mask, int64_t n, float p,
                                             uint32_t seed) {
  DropoutFwd(x, y, mask, n, p, seed);
}

template <class T>
__global__ void embedding_dropout_bwd_kernel(const T* dy, const uint8_t* mask, T* dx, int64_t n,
                                             float keep_scale) {
  DropoutBwd(dy, mask, dx, n, keep_scale);
}

// The dense word-embedding gradient (torch's embedding_dense_backward):
// rows of repeated tokens collide, hence the atomics.
template <class T>
__global__ void word_embedding_scatter_add_kernel(const int32_t* local_ids, const T* dy,
                                                  float* dense_grad, int64_t tokens, int64_t h) {
  const int64_t n = tokens * h;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t id = local_ids[i / h];
    if (id >= 0) atomicAdd(dense_grad + id * h + i % h, ToFloat(dy[i]));
  }
}

// Megatron adds the dense [vocab/t, h] gradient into the fp32 main_grad;
// clearing the dense gradient here stands in for torch allocating a zeroed
// one per backward and keeps repeated runs bounded.
__global__ void word_embedding_grad_accumulate_kernel(float* dense_grad, float* main_grad,
                                                      int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    main_grad[i] += dense_grad[i];
    dense_grad[i] = 0.0f;
  }
}

// Every micro-batch sequence uses positions 0..s-1 once, so the position
// gradient is a plain sum over the b tokens of each position (no atomics).
template <class T>
__global__ void position_embedding_bwd_kernel(const T* dy, float* grad, int64_t s, int64_t b,
                                              int64_t h) {
  const int64_t n = s * h;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t si = i / h;
    const int64_t c = i % h;
    float sum = 0.0f;
    for (int64_t bi = 0; bi < b; ++bi) sum += ToFloat(dy[(si * b + bi) * h + c]);
    grad[i] += sum;
  }
}

// ---------------------------------------------------------------------------
// Vocabulary-parallel cross entropy (Megatron's _VocabParallelCrossEntropy):
// the max, the target logit and the sum of exponentials are per-rank
// partials that Megatron all-reduces across the t ranks in between; those
// all-reduces are simulated separately and not launched here.
// ---------------------------------------------------------------------------

// Megatron computes the loss on an fp32 copy of the logits.
template <class T>
__global__ void logits_to_fp32_kernel(const T* logits, float* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) out[i] = ToFloat(logits[i]);
}

__global__ void cross_entropy_max_kernel(const float* logits, float* row_max, int64_t cols) {
  const int64_t row = blockIdx.x;
  const float* r = logits + row * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, r[c]);
  m = BlockReduceMax(m);
  if (threadIdx.x == 0) row_max[row] = m;
}

// In place: logits become exp(logit - row max), kept for the backward's
// softmax.
__global__ void cross_entropy_sub_exp_kernel(float* logits, const float* row_max, int64_t n,
                                             int64_t cols) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    logits[i] = expf(logits[i] - row_max[i / cols]);
  }
}

__global__ void cross_entropy_sum_kernel(const float* exp_logits, float* sum_exp, int64_t cols) {
  const int64_t row = blockIdx.x;
  const float* r = exp_logits + row * cols;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += r[c];
  s = BlockReduceSum(s);
  if (threadIdx.x == 0) sum_exp[row] = s;
}

// The target's (max-shifted) logit when this rank owns the target, else 0.
template <class T>
__global__ void cross_entropy_target_gather_kernel(const int32_t* labels, const T* logits,
                                                   const float* row_max, float* predicted,
                                                   int64_t tokens, int64_t cols,
                                                   int64_t vocab_start) {
  for (int64_t i = GlobalThread(); i < tokens; i += GridThreads()) {
    const int64_t local = static_cast<int64_t>(labels[i]) - vocab_start;
    predicted[i] =
        local >= 0 && local < cols ? ToFloat(logits[i * cols + local]) - row_max[i] : 0.0f;
  }
}

__global__ void cross_entropy_log_kernel(const float* sum_exp, const float* predicted, float* loss,
                                         int64_t tokens) {
  for (int64_t i = GlobalThread(); i < tokens; i += GridThreads()) {
    loss[i] = logf(sum_exp[i]) - predicted[i];
  }
}

// Softmax of the saved exponentials into a separate fp32 gradient buffer
// (Megatron reuses the saved tensor in place; a separate buffer keeps
// repeated backward runs from rescaling it towards zero).
__global__ void cross_entropy_softmax_grad_kernel(const float* exp_logits, const float* sum_exp,
                                                  float* grad, int64_t n, int64_t cols) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    grad[i] = exp_logits[i] / sum_exp[i / cols];
  }
}

__global__ void cross_entropy_target_sub_kernel(const int32_t* labels, float* grad, int64_t tokens,
                                                int64_t cols, int64_t vocab_start) {
  for (int64_t i = GlobalThread(); i < tokens; i += GridThreads()) {
    const int64_t local = static_cast<int64_t>(labels[i]) - vocab_start;
    if (local >= 0 && local < cols) grad[i * cols + local] -= 1.0f;
  }
}

// Scales by the per-token loss gradient and casts back for the logit GEMMs.
template <class T>
__global__ void logit_grad_to_half_kernel(const float* grad, T* out, int64_t n, float scale) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads())
    out[i] = FromFloat<T>(grad[i] * scale);
}

// ---------------------------------------------------------------------------
// Mixed-precision Adam (Megatron's Float16OptimizerWithFloat16Params over
// apex multi-tensor kernels): fp16/bf16 gradients and parameters, fp32
// master weights and moments. Scalars: [0] squared gradient norm, [1]
// non-finite-gradient flag.
// ---------------------------------------------------------------------------

struct AdamHyper {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  float max_grad_norm;
  float inv_loss_scale;
  float bias_correction1;  // 1 - beta1^step
  float bias_correction2;  // 1 - beta2^step
};

__global__ void optimizer_state_reset_kernel(float* scalars) {
  if (threadIdx.x < 2) scalars[threadIdx.x] = 0.0f;
}

// Read-only unless a gradient overflowed: the loss scaler's inf/NaN check.
template <class T>
__global__ void grad_unscale_inf_check_kernel(const T* grad, int64_t n, float inv_scale,
                                              float* found_inf) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    if (!isfinite(ToFloat(grad[i]) * inv_scale)) *found_inf = 1.0f;
  }
}

// Sum of squares for gradient clipping (multi_tensor_l2norm).
template <class T>
__global__ void grad_norm_kernel(const T* grad, int64_t n, float inv_scale, float* norm_sq) {
  float s = 0.0f;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float g = ToFloat(grad[i]) * inv_scale;
    s += g * g;
  }
  s = BlockReduceSum(s);
  if (threadIdx.x == 0) atomicAdd(norm_sq, s);
}

// AdamW with clipping; skips the step when the check found an overflow, as
// the dynamic loss scaler does.
template <class T>
__global__ void adam_step_kernel(const T* grad, float* master, float* exp_avg, float* exp_avg_sq,
                                 int64_t n, const float* scalars, AdamHyper hp) {
  if (scalars[1] != 0.0f) return;
  const float norm = sqrtf(scalars[0]);
  const float clip = fminf(1.0f, hp.max_grad_norm / (norm + 1e-6f));
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float g = ToFloat(grad[i]) * hp.inv_loss_scale * clip;
    const float m = hp.beta1 * exp_avg[i] + (1.0f - hp.beta1) * g;
    const float v = hp.beta2 * exp_avg_sq[i] + (1.0f - hp.beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float update = (m / hp.bias_correction1) / (sqrtf(v / hp.bias_correction2) + hp.eps);
    const float p = master[i];
    master[i] = p - hp.lr * (update + hp.weight_decay * p);
  }
}

template <class T>
__global__ void master_to_half_copy_kernel(const float* master, T* param, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) param[i] = FromFloat<T>(master[i]);
}

// Megatron zeroes the main-grad buffer after the step for the next
// iteration's accumulation. We write a small constant instead of 0: the same
// 4 bytes per parameter, and the next profiled step sees non-zero gradients.
__global__ void zero_main_grad_kernel(float* grad, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) grad[i] = 1e-3f;
}

// ---------------------------------------------------------------------------
// Host helpers
// ---------------------------------------------------------------------------

std::string CudaError(const std::string& what, cudaError_t e) {
  return what + ": " + cudaGetErrorString(e);
}

std::string CublasError(const std::string& what, cublasStatus_t s) {
  return what + ": " + cublasLtGetStatusName(s) + " (" + cublasLtGetStatusString(s) + ")";
}

std::string CheckCuda(const std::string& what, cudaError_t e) {
  return e == cudaSuccess ? std::string() : CudaError(what, e);
}

std::string CheckCublas(const std::string& what, cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? std::string() : CublasError(what, s);
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

// Grid of the column-reduction kernels: one block per 32-column tile and
// enough row chunks to give a large GPU a few hundred blocks, without many
// atomics per gradient element.
dim3 ColumnReduceGrid(int64_t rows, int64_t cols, int64_t* rows_per_chunk) {
  const int64_t tiles = CeilDiv(cols, kColTile);
  const int64_t chunks = std::clamp<int64_t>(CeilDiv(512, tiles), 1, CeilDiv(rows, 64));
  *rows_per_chunk = CeilDiv(rows, chunks);
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(CeilDiv(rows, *rows_per_chunk)));
}

// Per-rank dimensions of a (validated) shape.
struct Dims {
  int64_t h = 0;      // hidden
  int64_t a = 0;      // heads on this rank
  int64_t d = 0;      // head dim
  int64_t f = 0;      // FFN width on this rank
  int64_t s = 0;      // sequence
  int64_t b = 0;      // micro-batch
  int64_t n = 0;      // tokens = s * b
  int64_t v = 0;      // vocabulary shard = ceil(vocab / t)
  int64_t vocab = 0;  // whole vocabulary (token ids and labels)
  int64_t adam = 0;   // optimizer_step parameters

  int64_t ad() const { return a * d; }       // attention width on this rank (h / t)
  int64_t qkv() const { return 3 * a * d; }  // QKV GEMM output width
  int64_t bh() const { return b * a; }       // attention batch count
};

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
  return dims;
}

// Device allocations, or (allocate == false) only their sizes, so that
// WorkloadBytes and Create cannot disagree. Sizes go through double so no
// product of dimensions can overflow.
class DeviceArena {
 public:
  explicit DeviceArena(bool allocate) : allocate_(allocate) {}
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { Release(); }

  template <class P>
  void Take(P** ptr, const char* name, std::initializer_list<int64_t> dims) {
    *ptr = nullptr;
    double count = 1;
    for (int64_t dim : dims) count *= static_cast<double>(dim);
    const double bytes = count * static_cast<double>(sizeof(P));
    // cudaMalloc hands out at least 512-byte granules.
    bytes_ += std::ceil(bytes / 512) * 512;
    if (!allocate_ || !error_.empty()) return;
    if (bytes > kMaxBytes) {
      char size[32];
      std::snprintf(size, sizeof(size), "%.0f", bytes);
      error_ = std::string("buffer ") + name + " would need " + size + " bytes";
      return;
    }
    size_t exact = sizeof(P);
    for (int64_t dim : dims) exact *= static_cast<size_t>(dim);
    void* raw = nullptr;
    const cudaError_t e = cudaMalloc(&raw, exact);
    if (e != cudaSuccess) {
      error_ = CudaError(
          std::string("cudaMalloc(") + name + ", " + std::to_string(exact) + " bytes)", e);
      return;
    }
    allocations_.push_back(raw);
    *ptr = static_cast<P*>(raw);
  }

  const std::string& error() const { return error_; }
  double bytes() const { return bytes_; }

  void Release() {
    // Nothing to report to from here: a failed free at teardown leaves
    // nothing for the caller to do.
    for (void* p : allocations_) (void)cudaFree(p);
    allocations_.clear();
  }

 private:
  bool allocate_;
  double bytes_ = 0;
  std::string error_;
  std::vector<void*> allocations_;
};

// Every device buffer of a workload. Activations follow Korthikanti et al.
// 2022 (Sec. 4.1): per layer the [s, b, h] tensors, the a*s*s*b attention
// scores, softmax output, dropout mask and dropped probabilities, and the
// [s, b, 4h/t] FFN activations; plus weights, their gradients, the logits
// [s*b, v] with their fp32 loss copies, and the Adam state.
template <class T>
struct Buffers {
  // Embedding.
  int32_t* tokens;
  int32_t* labels;
  int32_t* local_ids;
  T* word_emb;  // [v, h], tied with the logit GEMM
  T* pos_emb;   // [s, h]
  T* word_rows;
  T* pos_rows;
  uint8_t* emb_mask;
  T* h0;  // embedding output = layer input
  T* d_emb;
  float* word_dense_grad;
  float* word_main_grad;
  float* pos_grad;
  T* d_h0;
  // Attention block.
  T* ln1_gamma;
  T* ln1_beta;
  float* ln1_mean;
  float* ln1_rstd;
  T* ln1_out;
  T* w_qkv;  // [3ad, h]
  T* b_qkv;
  T* qkv;      // [n, 3ad], per head [q | k | v]
  T* scores;   // [b*a, s, s]; the backward reuses it for dP and dS
  T* probs;    // softmax output
  T* dropped;  // after attention dropout
  uint8_t* attn_mask;
  T* ctx_bsd;  // [b*a, s, d]
  T* ctx;      // [n, ad]
  T* w_proj;   // [h, ad]
  T* b_proj;
  T* proj_out;
  uint8_t* attn_resid_mask;
  T* h1;
  T* dy_proj;
  T* d_ctx;
  T* d_ctx_bsd;
  T* d_qkv;
  T* d_ln1;
  T* dx_ln1;
  T* dw_qkv;
  T* dw_proj;
  float* db_qkv;
  float* db_proj;
  float* d_ln1_gamma;
  float* d_ln1_beta;
  T* d_h1;
  // MLP block.
  T* ln2_gamma;
  T* ln2_beta;
  float* ln2_mean;
  float* ln2_rstd;
  T* ln2_out;
  T* w_fc1;  // [f, h]
  T* b_fc1;
  T* fc1_out;
  T* gelu_out;
  T* w_fc2;  // [h, f]
  T* b_fc2;
  T* fc2_out;
  uint8_t* mlp_mask;
  T* h2;
  T* dy_fc2;
  T* d_gelu;
  T* d_fc1;
  T* d_ln2;
  T* dx_ln2;
  T* dw_fc1;
  T* dw_fc2;
  float* db_fc1;
  float* db_fc2;
  float* d_ln2_gamma;
  float* d_ln2_beta;
  T* d_h2;
  // Logit and loss.
  T* lnf_gamma;
  T* lnf_beta;
  float* lnf_mean;
  float* lnf_rstd;
  T* lnf_out;
  T* logits;  // [n, v]
  T* d_lnf;
  T* dw_emb;  // [v, h]
  float* d_lnf_gamma;
  float* d_lnf_beta;
  float* logits32;  // fp32 copy, then exp(logit - max)
  float* grad32;
  float* row_max;
  float* sum_exp;
  float* predicted;
  float* loss;
  T* d_logits;
  // Adam.
  float* master;
  float* exp_avg;
  float* exp_avg_sq;
  float* adam_grad;  // Megatron's fp32 main grads, which the backward accumulates into
  T* adam_param;
  float* adam_scalars;
  // cuBLASLt.
  void* workspace;

  // Arena: DeviceArena, or anything with the same Take.
  template <class Arena>
  void Layout(const Dims& x, Arena* arena) {
    const int64_t n = x.n;
    const int64_t h = x.h;
    const int64_t scores_n = x.bh() * x.s;  // score rows; times s elements
    arena->Take(&tokens, "tokens", {n});
    arena->Take(&labels, "labels", {n});
    arena->Take(&local_ids, "local_ids", {n});
    arena->Take(&word_emb, "word_emb", {x.v, h});
    arena->Take(&pos_emb, "pos_emb", {x.s, h});
    arena->Take(&word_rows, "word_rows", {n, h});
    arena->Take(&pos_rows, "pos_rows", {n, h});
    arena->Take(&emb_mask, "emb_mask", {n, h});
    arena->Take(&h0, "h0", {n, h});
    arena->Take(&d_emb, "d_emb", {n, h});
    arena->Take(&word_dense_grad, "word_dense_grad", {x.v, h});
    arena->Take(&word_main_grad, "word_main_grad", {x.v, h});
    arena->Take(&pos_grad, "pos_grad", {x.s, h});
    arena->Take(&d_h0, "d_h0", {n, h});

    arena->Take(&ln1_gamma, "ln1_gamma", {h});
    arena->Take(&ln1_beta, "ln1_beta", {h});
    arena->Take(&ln1_mean, "ln1_mean", {n});
    arena->Take(&ln1_rstd, "ln1_rstd", {n});
    arena->Take(&ln1_out, "ln1_out", {n, h});
    arena->Take(&w_qkv, "w_qkv", {x.qkv(), h});
    arena->Take(&b_qkv, "b_qkv", {x.qkv()});
    arena->Take(&qkv, "qkv", {n, x.qkv()});
    arena->Take(&scores, "scores", {scores_n, x.s});
    arena->Take(&probs, "probs", {scores_n, x.s});
    arena->Take(&dropped, "dropped_probs", {scores_n, x.s});
    arena->Take(&attn_mask, "attention_dropout_mask", {scores_n, x.s});
    arena->Take(&ctx_bsd, "context_bsd", {n, x.ad()});
    arena->Take(&ctx, "context", {n, x.ad()});
    arena->Take(&w_proj, "w_proj", {h, x.ad()});
    arena->Take(&b_proj, "b_proj", {h});
    arena->Take(&proj_out, "proj_out", {n, h});
    arena->Take(&attn_resid_mask, "attention_residual_mask", {n, h});
    arena->Take(&h1, "h1", {n, h});
    arena->Take(&dy_proj, "dy_proj", {n, h});
    arena->Take(&d_ctx, "d_context", {n, x.ad()});
    arena->Take(&d_ctx_bsd, "d_context_bsd", {n, x.ad()});
    arena->Take(&d_qkv, "d_qkv", {n, x.qkv()});
    arena->Take(&d_ln1, "d_ln1", {n, h});
    arena->Take(&dx_ln1, "dx_ln1", {n, h});
    arena->Take(&dw_qkv, "dw_qkv", {x.qkv(), h});
    arena->Take(&dw_proj, "dw_proj", {h, x.ad()});
    arena->Take(&db_qkv, "db_qkv", {x.qkv()});
    arena->Take(&db_proj, "db_proj", {h});
    arena->Take(&d_ln1_gamma, "d_ln1_gamma", {h});
    arena->Take(&d_ln1_beta, "d_ln1_beta", {h});
    arena->Take(&d_h1, "d_h1", {n, h});

    arena->Take(&ln2_gamma, "ln2_gamma", {h});
    arena->Take(&ln2_beta, "ln2_beta", {h});
    arena->Take(&ln2_mean, "ln2_mean", {n});
    arena->Take(&ln2_rstd, "ln2_rstd", {n});
    arena->Take(&ln2_out, "ln2_out", {n, h});
    arena->Take(&w_fc1, "w_fc1", {x.f, h});
    arena->Take(&b_fc1, "b_fc1", {x.f});
    arena->Take(&fc1_out, "fc1_out", {n, x.f});
    arena->Take(&gelu_out, "gelu_out", {n, x.f});
    arena->Take(&w_fc2, "w_fc2", {h, x.f});
    arena->Take(&b_fc2, "b_fc2", {h});
    arena->Take(&fc2_out, "fc2_out", {n, h});
    arena->Take(&mlp_mask, "mlp_residual_mask", {n, h});
    arena->Take(&h2, "h2", {n, h});
    arena->Take(&dy_fc2, "dy_fc2", {n, h});
    arena->Take(&d_gelu, "d_gelu", {n, x.f});
    arena->Take(&d_fc1, "d_fc1", {n, x.f});
    arena->Take(&d_ln2, "d_ln2", {n, h});
    arena->Take(&dx_ln2, "dx_ln2", {n, h});
    arena->Take(&dw_fc1, "dw_fc1", {x.f, h});
    arena->Take(&dw_fc2, "dw_fc2", {h, x.f});
    arena->Take(&db_fc1, "db_fc1", {x.f});
    arena->Take(&db_fc2, "db_fc2", {h});
    arena->Take(&d_ln2_gamma, "d_ln2_gamma", {h});
    arena->Take(&d_ln2_beta, "d_ln2_beta", {h});
    arena->Take(&d_h2, "d_h2", {n, h});

    arena->Take(&lnf_gamma, "lnf_gamma", {h});
    arena->Take(&lnf_beta, "lnf_beta", {h});
    arena->Take(&lnf_mean, "lnf_mean", {n});
    arena->Take(&lnf_rstd, "lnf_rstd", {n});
    arena->Take(&lnf_out, "lnf_out", {n, h});
    arena->Take(&logits, "logits", {n, x.v});
    arena->Take(&d_lnf, "d_lnf", {n, h});
    arena->Take(&dw_emb, "dw_emb", {x.v, h});
    arena->Take(&d_lnf_gamma, "d_lnf_gamma", {h});
    arena->Take(&d_lnf_beta, "d_lnf_beta", {h});
    arena->Take(&logits32, "logits_fp32", {n, x.v});
    arena->Take(&grad32, "logit_grad_fp32", {n, x.v});
    arena->Take(&row_max, "row_max", {n});
    arena->Take(&sum_exp, "sum_exp", {n});
    arena->Take(&predicted, "predicted_logit", {n});
    arena->Take(&loss, "loss", {n});
    arena->Take(&d_logits, "d_logits", {n, x.v});

    master = exp_avg = exp_avg_sq = adam_scalars = nullptr;
    adam_grad = nullptr;
    adam_param = nullptr;
    if (x.adam > 0) {
      arena->Take(&master, "adam_master", {x.adam});
      arena->Take(&exp_avg, "adam_exp_avg", {x.adam});
      arena->Take(&exp_avg_sq, "adam_exp_avg_sq", {x.adam});
      arena->Take(&adam_grad, "adam_grad", {x.adam});
      arena->Take(&adam_param, "adam_param", {x.adam});
      arena->Take(&adam_scalars, "adam_scalars", {2});
    }
    unsigned char* ws = nullptr;
    arena->Take(&ws, "cublaslt_workspace", {static_cast<int64_t>(kWorkspaceBytes)});
    workspace = ws;
  }
};

// ---------------------------------------------------------------------------
// GEMMs
// ---------------------------------------------------------------------------

// One GEMM in row-major terms: C[m, n] = alpha * op(A) op(B) (+ bias[n]),
// op(A) [m, k] (A stored [k, m] when trans_a), op(B) [k, n] (B stored
// [n, k] when trans_b); ld* are the stored row lengths; batches are
// stride_* elements apart.
struct GemmSpec {
  const char* name = "";
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool trans_a = false;
  bool trans_b = false;
  const void* a = nullptr;
  int64_t lda = 0;
  int64_t stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  int64_t stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.0f;
  const void* bias = nullptr;  // length n, fused as the bias epilogue when possible
};

// One cuBLASLt (column-major) operand: the matrix as stored, and whether
// the product uses its transpose.
struct LtOperand {
  const void* ptr = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  int64_t stride = 0;
};

// The column-major call computing a row-major GemmSpec:
// D = alpha * op(a) op(b) (+ bias along D's rows).
struct LtCall {
  LtOperand a;
  LtOperand b;
  LtOperand d;
};

// A row-major [r, c] matrix with row length ld is a column-major [c, r]
// matrix with leading dimension ld, so row-major C = op(A) op(B) is
// column-major C^T = op(B)^T op(A)^T: cuBLASLt's A is our B and its B our A,
// each transposed exactly when ours is.
LtCall ToColumnMajor(const GemmSpec& g) {
  LtCall call;
  // Our B, stored [k, n] (or [n, k] when trans_b) row-major.
  call.a.ptr = g.b;
  call.a.op = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  call.a.rows = g.trans_b ? g.k : g.n;
  call.a.cols = g.trans_b ? g.n : g.k;
  call.a.ld = g.ldb;
  call.a.stride = g.stride_b;
  // Our A, stored [m, k] (or [k, m] when trans_a) row-major.
  call.b.ptr = g.a;
  call.b.op = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  call.b.rows = g.trans_a ? g.m : g.k;
  call.b.cols = g.trans_a ? g.k : g.m;
  call.b.ld = g.lda;
  call.b.stride = g.stride_a;
  // C = D, [m, n] row-major; the bias epilogue runs along its column-major
  // rows, i.e. our output features.
  call.d.ptr = g.c;
  call.d.rows = g.n;
  call.d.cols = g.m;
  call.d.ld = g.ldc;
  call.d.stride = g.stride_c;
  return call;
}

// The largest power of two (up to 256) that the pointer and every batch's
// offset from it are multiples of: cuBLASLt's heuristic assumes 256-byte
// aligned operands unless told otherwise, and the attention GEMMs address
// Q, K and V at head-dim offsets inside the QKV output.
uint32_t Alignment(const LtOperand& x, int64_t batch, size_t element_bytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(x.ptr) | 256u;
  if (batch > 1) bits |= static_cast<uint64_t>(x.stride) * element_bytes;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

class Gemm {
 public:
  Gemm() = default;
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  ~Gemm() {
    // Host-side descriptors; nothing useful to do with a failure here.
    if (desc_ != nullptr) (void)cublasLtMatmulDescDestroy(desc_);
    if (layout_a_ != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_a_);
    if (layout_b_ != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_b_);
    if (layout_d_ != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_d_);
  }

  // Builds the descriptors and picks the algorithm once, so Run only
  // enqueues.
  std::string Plan(cublasLtHandle_t lt, const GemmSpec& spec, cudaDataType_t type,
                   size_t element_bytes) {
    spec_ = spec;
    call_ = ToColumnMajor(spec);
    const std::string tag = std::string("(") + spec.name + ")";
    VTRAIN_RETURN_IF_ERROR(
        CheckCublas("cublasLtMatmulDescCreate" + tag,
                    cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F)));
    VTRAIN_RETURN_IF_ERROR(SetDesc(CUBLASLT_MATMUL_DESC_TRANSA, call_.a.op, tag));
    VTRAIN_RETURN_IF_ERROR(SetDesc(CUBLASLT_MATMUL_DESC_TRANSB, call_.b.op, tag));
    VTRAIN_RETURN_IF_ERROR(MakeLayout(&layout_a_, type, call_.a, "A" + tag));
    VTRAIN_RETURN_IF_ERROR(MakeLayout(&layout_b_, type, call_.b, "B" + tag));
    VTRAIN_RETURN_IF_ERROR(MakeLayout(&layout_d_, type, call_.d, "D" + tag));
    if (spec.bias != nullptr) {
      VTRAIN_RETURN_IF_ERROR(SetDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS, tag));
      VTRAIN_RETURN_IF_ERROR(SetDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, spec.bias, tag));
      bias_fused_ = true;
    }

    cublasLtMatmulPreference_t pref = nullptr;
    VTRAIN_RETURN_IF_ERROR(
        CheckCublas("cublasLtMatmulPreferenceCreate" + tag, cublasLtMatmulPreferenceCreate(&pref)));
    std::string error = Choose(lt, pref, element_bytes, tag);
    if (!error.empty() && bias_fused_) {
      // No algorithm with the epilogue for this shape: plain GEMM, and the
      // caller adds the bias with bias_add_kernel.
      bias_fused_ = false;
      error = SetDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT, tag);
      if (error.empty()) error = Choose(lt, pref, element_bytes, tag);
    }
    const cublasStatus_t destroyed = cublasLtMatmulPreferenceDestroy(pref);
    if (!error.empty()) return error;
    return CheckCublas("cublasLtMatmulPreferenceDestroy" + tag, destroyed);
  }

  std::string Run(cublasLtHandle_t lt, cudaStream_t stream, void* workspace) const {
    const float beta = 0.0f;
    // C = D: beta is 0, so C is never read.
    const cublasStatus_t s =
        cublasLtMatmul(lt, desc_, &spec_.alpha, call_.a.ptr, layout_a_, call_.b.ptr, layout_b_,
                       &beta, call_.d.ptr, layout_d_, const_cast<void*>(call_.d.ptr), layout_d_,
                       &algo_, workspace, kWorkspaceBytes, stream);
    return CheckCublas(std::string("cublasLtMatmul(") + spec_.name + ")", s);
  }

  bool bias_fused() const { return bias_fused_; }

 private:
  template <class V>
  std::string SetDesc(cublasLtMatmulDescAttributes_t attr, const V& value, const std::string& tag) {
    return CheckCublas("cublasLtMatmulDescSetAttribute" + tag,
                       cublasLtMatmulDescSetAttribute(desc_, attr, &value, sizeof(value)));
  }

  std::string MakeLayout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, const LtOperand& x,
                         const std::string& tag) {
    VTRAIN_RETURN_IF_ERROR(
        CheckCublas("cublasLtMatrixLayoutCreate" + tag,
                    cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(x.rows),
                                               static_cast<uint64_t>(x.cols), x.ld)));
    if (spec_.batch <= 1) return std::string();
    const int32_t count = static_cast<int32_t>(spec_.batch);
    const int64_t stride = x.stride;
    VTRAIN_RETURN_IF_ERROR(
        CheckCublas("cublasLtMatrixLayoutSetAttribute(batch count)" + tag,
                    cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                     &count, sizeof(count))));
    return CheckCublas(
        "cublasLtMatrixLayoutSetAttribute(batch stride)" + tag,
        cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                         &stride, sizeof(stride)));
  }

  std::string Choose(cublasLtHandle_t lt, cublasLtMatmulPreference_t pref, size_t element_bytes,
                     const std::string& tag) {
    const uint64_t workspace = kWorkspaceBytes;
    const uint32_t align_a = Alignment(call_.a, spec_.batch, element_bytes);
    const uint32_t align_b = Alignment(call_.b, spec_.batch, element_bytes);
    const uint32_t align_d = Alignment(call_.d, spec_.batch, element_bytes);
    const std::string set = "cublasLtMatmulPreferenceSetAttribute" + tag;
    VTRAIN_RETURN_IF_ERROR(CheckCublas(
        set, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &workspace, sizeof(workspace))));
    VTRAIN_RETURN_IF_ERROR(CheckCublas(
        set, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                  &align_a, sizeof(align_a))));
    VTRAIN_RETURN_IF_ERROR(CheckCublas(
        set, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                  &align_b, sizeof(align_b))));
    VTRAIN_RETURN_IF_ERROR(CheckCublas(
        set, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                  &align_d, sizeof(align_d))));
    VTRAIN_RETURN_IF_ERROR(CheckCublas(
        set, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                  &align_d, sizeof(align_d))));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    VTRAIN_RETURN_IF_ERROR(
        CheckCublas("cublasLtMatmulAlgoGetHeuristic" + tag,
                    cublasLtMatmulAlgoGetHeuristic(lt, desc_, layout_a_, layout_b_, layout_d_,
                                                   layout_d_, pref, 1, &result, &found)));
    if (found < 1) {
      return "cublasLtMatmulAlgoGetHeuristic" + tag +
             ": no algorithm for m=" + std::to_string(spec_.m) + " n=" + std::to_string(spec_.n) +
             " k=" + std::to_string(spec_.k) + " batch=" + std::to_string(spec_.batch);
    }
    VTRAIN_RETURN_IF_ERROR(
        CheckCublas("cublasLtMatmulAlgoGetHeuristic result" + tag, result.state));
    algo_ = result.algo;
    return std::string();
  }

  GemmSpec spec_;
  LtCall call_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr;
  cublasLtMatrixLayout_t layout_b_ = nullptr;
  cublasLtMatrixLayout_t layout_d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool bias_fused_ = false;
};

// Every GEMM of the workload.
enum GemmId : int {
  kGemmQkvFwd,
  kGemmScoresFwd,
  kGemmContextFwd,
  kGemmProjectionFwd,
  kGemmFc1Fwd,
  kGemmFc2Fwd,
  kGemmLogitFwd,
  kGemmLogitDgrad,
  kGemmLogitWgrad,
  kGemmFc2Dgrad,
  kGemmFc2Wgrad,
  kGemmFc1Dgrad,
  kGemmFc1Wgrad,
  kGemmProjectionDgrad,
  kGemmProjectionWgrad,
  kGemmContextDgradProbs,
  kGemmContextDgradValues,
  kGemmScoresDgradQuery,
  kGemmScoresDgradKey,
  kGemmQkvDgrad,
  kGemmQkvWgrad,
  kGemmCount,
};

// Each GEMM's spec, in Megatron's terms (weights [out, in]):
//   forward  Y[n, out]   = X[n, in] W^T      (trans_b)
//   dgrad    dX[n, in]   = dY[n, out] W
//   wgrad    dW[out, in] = dY^T X            (trans_a)
// Attention GEMMs run over the b*a (micro-batch, head) pairs and address
// Q, K and V in place inside the QKV output [s, b, a, 3d] (Megatron's
// mixed_x_layer, viewed as [s, b*a, 3d] and split): rows of one pair's Q,
// K or V are b*a*3d elements apart and consecutive pairs 3d apart, as
// torch.baddbmm/bmm hand them to cuBLAS without a copy.
template <class T>
std::array<GemmSpec, kGemmCount> MakeGemmSpecs(const Dims& x, const Buffers<T>& b) {
  const int64_t n = x.n;
  const int64_t h = x.h;
  const int64_t s = x.s;
  const int64_t d = x.d;
  const int64_t row = x.bh() * 3 * d;  // row stride of Q/K/V inside qkv
  const int64_t ss = s * s;
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d));
  const T* q = b.qkv;
  const T* k = b.qkv + d;
  const T* v = b.qkv + 2 * d;
  T* dq = b.d_qkv;
  T* dk = b.d_qkv + d;
  T* dv = b.d_qkv + 2 * d;

  auto dense = [](const char* name, int64_t m, int64_t nn, int64_t kk, bool ta, bool tb,
                  const void* a, const void* bb, void* c) {
    GemmSpec g;
    g.name = name;
    g.m = m;
    g.n = nn;
    g.k = kk;
    g.trans_a = ta;
    g.trans_b = tb;
    g.a = a;
    g.lda = ta ? m : kk;
    g.b = bb;
    g.ldb = tb ? kk : nn;
    g.c = c;
    g.ldc = nn;
    return g;
  };
  auto batched = [&x](const char* name, int64_t m, int64_t nn, int64_t kk, bool ta, bool tb,
                      const void* a, int64_t lda, int64_t sa, const void* bb, int64_t ldb,
                      int64_t sb, void* c, int64_t ldc, int64_t sc, float alpha) {
    GemmSpec g;
    g.name = name;
    g.m = m;
    g.n = nn;
    g.k = kk;
    g.trans_a = ta;
    g.trans_b = tb;
    g.a = a;
    g.lda = lda;
    g.stride_a = sa;
    g.b = bb;
    g.ldb = ldb;
    g.stride_b = sb;
    g.c = c;
    g.ldc = ldc;
    g.stride_c = sc;
    g.batch = x.bh();
    g.alpha = alpha;
    return g;
  };

  std::array<GemmSpec, kGemmCount> g;
  // Attention forward.
  g[kGemmQkvFwd] = dense("gemm_qkv_fwd", n, x.qkv(), h, false, true, b.ln1_out, b.w_qkv, b.qkv);
  g[kGemmQkvFwd].bias = b.b_qkv;
  // scores[s, s] = Q[s, d] K^T / sqrt(d)
  g[kGemmScoresFwd] = batched("bgemm_attention_scores_fwd", s, s, d, false, true, q, row, 3 * d, k,
                              row, 3 * d, b.scores, s, ss, inv_sqrt_d);
  // context[s, d] = P_dropped[s, s] V[s, d]
  g[kGemmContextFwd] = batched("bgemm_attention_context_fwd", s, d, s, false, false, b.dropped, s,
                               ss, v, row, 3 * d, b.ctx_bsd, d, s * d, 1.0f);
  g[kGemmProjectionFwd] =
      dense("gemm_projection_fwd", n, h, x.ad(), false, true, b.ctx, b.w_proj, b.proj_out);
  // MLP forward.
  g[kGemmFc1Fwd] = dense("gemm_fc1_fwd", n, x.f, h, false, true, b.ln2_out, b.w_fc1, b.fc1_out);
  g[kGemmFc2Fwd] = dense("gemm_fc2_fwd", n, h, x.f, false, true, b.gelu_out, b.w_fc2, b.fc2_out);
  // Logit: the word embedding [v, h] is the output layer's weight.
  g[kGemmLogitFwd] =
      dense("gemm_logit_fwd", n, x.v, h, false, true, b.lnf_out, b.word_emb, b.logits);
  g[kGemmLogitDgrad] =
      dense("gemm_logit_dgrad", n, h, x.v, false, false, b.d_logits, b.word_emb, b.d_lnf);
  g[kGemmLogitWgrad] =
      dense("gemm_logit_wgrad", x.v, h, n, true, false, b.d_logits, b.lnf_out, b.dw_emb);
  // MLP backward.
  g[kGemmFc2Dgrad] = dense("gemm_fc2_dgrad", n, x.f, h, false, false, b.dy_fc2, b.w_fc2, b.d_gelu);
  g[kGemmFc2Wgrad] =
      dense("gemm_fc2_wgrad", h, x.f, n, true, false, b.dy_fc2, b.gelu_out, b.dw_fc2);
  g[kGemmFc1Dgrad] = dense("gemm_fc1_dgrad", n, h, x.f, false, false, b.d_fc1, b.w_fc1, b.d_ln2);
  g[kGemmFc1Wgrad] = dense("gemm_fc1_wgrad", x.f, h, n, true, false, b.d_fc1, b.ln2_out, b.dw_fc1);
  // Attention backward.
  g[kGemmProjectionDgrad] =
      dense("gemm_projection_dgrad", n, x.ad(), h, false, false, b.dy_proj, b.w_proj, b.d_ctx);
  g[kGemmProjectionWgrad] =
      dense("gemm_projection_wgrad", h, x.ad(), n, true, false, b.dy_proj, b.ctx, b.dw_proj);
  // dP[s, s] = dContext[s, d] V^T, into the scores buffer.
  g[kGemmContextDgradProbs] = batched("bgemm_context_dgrad_probs", s, s, d, false, true,
                                      b.d_ctx_bsd, d, s * d, v, row, 3 * d, b.scores, s, ss, 1.0f);
  // dV[s, d] = P_dropped^T dContext
  g[kGemmContextDgradValues] =
      batched("bgemm_context_dgrad_values", s, d, s, true, false, b.dropped, s, ss, b.d_ctx_bsd, d,
              s * d, dv, row, 3 * d, 1.0f);
  // dQ[s, d] = dS K / sqrt(d), dS in the scores buffer.
  g[kGemmScoresDgradQuery] = batched("bgemm_scores_dgrad_query", s, d, s, false, false, b.scores, s,
                                     ss, k, row, 3 * d, dq, row, 3 * d, inv_sqrt_d);
  // dK[s, d] = dS^T Q / sqrt(d)
  g[kGemmScoresDgradKey] = batched("bgemm_scores_dgrad_key", s, d, s, true, false, b.scores, s, ss,
                                   q, row, 3 * d, dk, row, 3 * d, inv_sqrt_d);
  g[kGemmQkvDgrad] =
      dense("gemm_qkv_dgrad", n, h, x.qkv(), false, false, b.d_qkv, b.w_qkv, b.d_ln1);
  g[kGemmQkvWgrad] =
      dense("gemm_qkv_wgrad", x.qkv(), h, n, true, false, b.d_qkv, b.ln1_out, b.dw_qkv);
  return g;
}

// ---------------------------------------------------------------------------
// The workload
// ---------------------------------------------------------------------------

template <class T>
class Workload final : public LayerWorkload {
 public:
  static std::unique_ptr<LayerWorkload> Make(const LayerShape& shape, std::string* error) {
    std::unique_ptr<Workload> w(new Workload(shape));
    const std::string e = w->Init();
    if (!e.empty()) {
      *error = e;
      return nullptr;  // the destructor frees whatever Init got
    }
    return w;
  }

  ~Workload() override {
    // Teardown cannot report; wait for in-flight kernels before freeing
    // what they use.
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
    arena_.Release();
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  std::vector<std::string> Operators() const override {
    std::vector<std::string> ops = {"embedding_fwd", "attention_fwd", "mlp_fwd",   "logit_fwd",
                                    "loss_fwd",      "loss_bwd",      "logit_bwd", "mlp_bwd",
                                    "attention_bwd", "embedding_bwd"};
    if (dims_.adam > 0) ops.push_back("optimizer_step");
    return ops;
  }

  std::string Run(const std::string& op) override {
    if (op == "embedding_fwd") return EmbeddingFwd();
    if (op == "attention_fwd") return AttentionFwd();
    if (op == "mlp_fwd") return MlpFwd();
    if (op == "logit_fwd") return LogitFwd();
    if (op == "loss_fwd") return LossFwd();
    if (op == "loss_bwd") return LossBwd();
    if (op == "logit_bwd") return LogitBwd();
    if (op == "mlp_bwd") return MlpBwd();
    if (op == "attention_bwd") return AttentionBwd();
    if (op == "embedding_bwd") return EmbeddingBwd();
    if (op == "optimizer_step") {
      if (dims_.adam <= 0) return "optimizer_step needs adam_params > 0 in the shape";
      return OptimizerStep();
    }
    std::string known;
    for (const std::string& name : Operators()) known += (known.empty() ? "" : ", ") + name;
    return "unknown operator '" + op + "'; expected one of: " + known;
  }

  std::string Synchronize() override {
    return CheckCuda("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }

 private:
  explicit Workload(const LayerShape& shape) : dims_(MakeDims(shape)), arena_(true) {}

  static constexpr cudaDataType_t kDataType = std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF;

  std::string Init() {
    int devices = 0;
    VTRAIN_RETURN_IF_ERROR(CheckCuda("cudaGetDeviceCount", cudaGetDeviceCount(&devices)));
    if (devices == 0) return "cudaGetDeviceCount: no CUDA device";
    VTRAIN_RETURN_IF_ERROR(CheckCuda("cudaStreamCreateWithFlags",
                                     cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
    VTRAIN_RETURN_IF_ERROR(CheckCublas("cublasLtCreate", cublasLtCreate(&lt_)));
    buf_.Layout(dims_, &arena_);
    if (!arena_.error().empty()) return arena_.error();
    VTRAIN_RETURN_IF_ERROR(InitBuffers());
    VTRAIN_RETURN_IF_ERROR(PlanGemms());
    // One pass over every operator so that saved statistics, masks and
    // probabilities are the ones the forward produces, and every backward
    // finds consistent inputs however the profiler orders its runs.
    for (const std::string& op : Operators()) VTRAIN_RETURN_IF_ERROR(Run(op));
    return Synchronize();
  }

  template <class P>
  std::string Fill(P* p, int64_t n, float offset, float scale) {
    return Launch("init_uniform_kernel", init_uniform_kernel<P>, GridFor(n), kThreads, stream_, p,
                  n, NextSeed(), offset, scale);
  }

  // Small values (weights like Megatron's init_method_std = 0.02),
  // layer-norm gains near 1, gradients accumulators at 0.
  std::string InitBuffers() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t n = x.n;
    const int64_t h = x.h;
    const int64_t sc = x.bh() * x.s * x.s;
    const float w = 0.02f;
    VTRAIN_RETURN_IF_ERROR(Launch("init_token_ids_kernel", init_token_ids_kernel, GridFor(n),
                                  kThreads, stream_, b.tokens, n, x.vocab, NextSeed()));
    VTRAIN_RETURN_IF_ERROR(Launch("init_token_ids_kernel", init_token_ids_kernel, GridFor(n),
                                  kThreads, stream_, b.labels, n, x.vocab, NextSeed()));
    VTRAIN_RETURN_IF_ERROR(Launch("init_token_ids_kernel", init_token_ids_kernel, GridFor(n),
                                  kThreads, stream_, b.local_ids, n, x.v, NextSeed()));
    uint8_t* const residual_masks[] = {b.emb_mask, b.attn_resid_mask, b.mlp_mask};
    for (uint8_t* mask : residual_masks) {
      VTRAIN_RETURN_IF_ERROR(Launch("init_dropout_mask_kernel", init_dropout_mask_kernel,
                                    GridFor(n * h), kThreads, stream_, mask, n * h, NextSeed(),
                                    kDropout));
    }
    VTRAIN_RETURN_IF_ERROR(Launch("init_dropout_mask_kernel", init_dropout_mask_kernel, GridFor(sc),
                                  kThreads, stream_, b.attn_mask, sc, NextSeed(), kDropout));

    struct Fp16Init {
      T* p;
      int64_t n;
      float offset;
      float scale;
    };
    const Fp16Init halves[] = {
        {b.word_emb, x.v * h, 0, w},
        {b.pos_emb, x.s * h, 0, w},
        {b.word_rows, n * h, 0, w},
        {b.pos_rows, n * h, 0, w},
        {b.h0, n * h, 0, w},
        {b.d_emb, n * h, 0, w},
        {b.d_h0, n * h, 0, w},
        {b.ln1_gamma, h, 1, w},
        {b.ln1_beta, h, 0, w},
        {b.ln1_out, n * h, 0, 1},
        {b.w_qkv, x.qkv() * h, 0, w},
        {b.b_qkv, x.qkv(), 0, w},
        {b.qkv, n * x.qkv(), 0, w},
        {b.scores, sc, 0, w},
        {b.probs, sc, 0, w},
        {b.dropped, sc, 0, w},
        {b.ctx_bsd, n * x.ad(), 0, w},
        {b.ctx, n * x.ad(), 0, w},
        {b.w_proj, h * x.ad(), 0, w},
        {b.b_proj, h, 0, w},
        {b.proj_out, n * h, 0, w},
        {b.h1, n * h, 0, w},
        {b.dy_proj, n * h, 0, w},
        {b.d_ctx, n * x.ad(), 0, w},
        {b.d_ctx_bsd, n * x.ad(), 0, w},
        {b.d_qkv, n * x.qkv(), 0, w},
        {b.d_ln1, n * h, 0, w},
        {b.dx_ln1, n * h, 0, w},
        {b.dw_qkv, x.qkv() * h, 0, w},
        {b.dw_proj, h * x.ad(), 0, w},
        {b.d_h1, n * h, 0, w},
        {b.ln2_gamma, h, 1, w},
        {b.ln2_beta, h, 0, w},
        {b.ln2_out, n * h, 0, 1},
        {b.w_fc1, x.f * h, 0, w},
        {b.b_fc1, x.f, 0, w},
        {b.fc1_out, n * x.f, 0, w},
        {b.gelu_out, n * x.f, 0, w},
        {b.w_fc2, h * x.f, 0, w},
        {b.b_fc2, h, 0, w},
        {b.fc2_out, n * h, 0, w},
        {b.h2, n * h, 0, w},
        {b.dy_fc2, n * h, 0, w},
        {b.d_gelu, n * x.f, 0, w},
        {b.d_fc1, n * x.f, 0, w},
        {b.d_ln2, n * h, 0, w},
        {b.dx_ln2, n * h, 0, w},
        {b.dw_fc1, x.f * h, 0, w},
        {b.dw_fc2, h * x.f, 0, w},
        {b.d_h2, n * h, 0, w},
        {b.lnf_gamma, h, 1, w},
        {b.lnf_beta, h, 0, w},
        {b.lnf_out, n * h, 0, 1},
        {b.logits, n * x.v, 0, 1},
        {b.d_lnf, n * h, 0, w},
        {b.dw_emb, x.v * h, 0, w},
        {b.d_logits, n * x.v, 0, w},
    };
    for (const Fp16Init& init : halves) {
      VTRAIN_RETURN_IF_ERROR(Fill(init.p, init.n, init.offset, init.scale));
    }
    struct Fp32Init {
      float* p;
      int64_t n;
      float offset;
      float scale;
    };
    const Fp32Init floats[] = {
        {b.word_dense_grad, x.v * h, 0, 0},
        {b.word_main_grad, x.v * h, 0, 0},
        {b.pos_grad, x.s * h, 0, 0},
        {b.ln1_mean, n, 0, 0},
        {b.ln1_rstd, n, 1, 0},
        {b.db_qkv, x.qkv(), 0, 0},
        {b.db_proj, h, 0, 0},
        {b.d_ln1_gamma, h, 0, 0},
        {b.d_ln1_beta, h, 0, 0},
        {b.ln2_mean, n, 0, 0},
        {b.ln2_rstd, n, 1, 0},
        {b.db_fc1, x.f, 0, 0},
        {b.db_fc2, h, 0, 0},
        {b.d_ln2_gamma, h, 0, 0},
        {b.d_ln2_beta, h, 0, 0},
        {b.lnf_mean, n, 0, 0},
        {b.lnf_rstd, n, 1, 0},
        {b.d_lnf_gamma, h, 0, 0},
        {b.d_lnf_beta, h, 0, 0},
        {b.logits32, n * x.v, 1, 0.5f},
        {b.grad32, n * x.v, 0, 0},
        {b.row_max, n, 1, 0},
        {b.sum_exp, n, static_cast<float>(x.v), 0},
        {b.predicted, n, 0, 0},
        {b.loss, n, 0, 0},
    };
    for (const Fp32Init& init : floats) {
      VTRAIN_RETURN_IF_ERROR(Fill(init.p, init.n, init.offset, init.scale));
    }
    if (x.adam > 0) {
      VTRAIN_RETURN_IF_ERROR(Fill(b.master, x.adam, 0, w));
      VTRAIN_RETURN_IF_ERROR(Fill(b.exp_avg, x.adam, 0, 0));
      VTRAIN_RETURN_IF_ERROR(Fill(b.exp_avg_sq, x.adam, 0, 0));
      VTRAIN_RETURN_IF_ERROR(Fill(b.adam_grad, x.adam, 0, 1e-3f));
      VTRAIN_RETURN_IF_ERROR(Fill(b.adam_param, x.adam, 0, w));
      VTRAIN_RETURN_IF_ERROR(Fill(b.adam_scalars, 2, 0, 0));
    }
    return std::string();
  }

  std::string PlanGemms() {
    const std::array<GemmSpec, kGemmCount> specs = MakeGemmSpecs(dims_, buf_);
    for (int i = 0; i < kGemmCount; ++i) {
      VTRAIN_RETURN_IF_ERROR(gemms_[i].Plan(lt_, specs[i], kDataType, sizeof(T)));
    }
    return std::string();
  }

  std::string RunGemm(GemmId id) { return gemms_[id].Run(lt_, stream_, buf_.workspace); }

  uint32_t NextSeed() { return ++seed_ * 0x6C8E9CF5u; }

  std::string LayerNormFwd(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                           float* rstd) {
    return Launch("layer_norm_fwd_kernel", layer_norm_fwd_kernel<T>, static_cast<unsigned>(dims_.n),
                  kThreads, stream_, x, gamma, beta, y, mean, rstd, dims_.h, kLayerNormEps);
  }

  // Input gradient, then the gamma/beta gradients.
  std::string LayerNormBwd(const T* dy, const T* x, const T* gamma, const float* mean,
                           const float* rstd, T* dx, float* dgamma, float* dbeta) {
    VTRAIN_RETURN_IF_ERROR(Launch("layer_norm_bwd_kernel", layer_norm_bwd_kernel<T>,
                                  static_cast<unsigned>(dims_.n), kThreads, stream_, dy, x, gamma,
                                  mean, rstd, dx, dims_.h));
    int64_t rows_per_chunk = 0;
    const dim3 grid = ColumnReduceGrid(dims_.n, dims_.h, &rows_per_chunk);
    return Launch("layer_norm_gamma_beta_grad_kernel", layer_norm_gamma_beta_grad_kernel<T>, grid,
                  dim3(kColTile, kRowLanes), stream_, dy, x, mean, rstd, dims_.n, dims_.h,
                  rows_per_chunk, dgamma, dbeta);
  }

  std::string BiasGradReduce(const T* a, int64_t cols_a, float* grad_a, const T* bb, int64_t cols_b,
                             float* grad_b) {
    int64_t rows_per_chunk = 0;
    const dim3 grid = ColumnReduceGrid(dims_.n, cols_a + cols_b, &rows_per_chunk);
    return Launch("bias_grad_reduce_kernel", bias_grad_reduce_kernel<T>, grid,
                  dim3(kColTile, kRowLanes), stream_, a, cols_a, grad_a, bb, cols_b, grad_b,
                  dims_.n, rows_per_chunk);
  }

  // --- Operators (kernel order as in core/profile/analytical.cc) ---

  std::string EmbeddingFwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t nh = x.n * x.h;
    // This workload is rank 0 of the tensor-parallel group.
    VTRAIN_RETURN_IF_ERROR(Launch("vocab_range_mask_kernel", vocab_range_mask_kernel, GridFor(x.n),
                                  kThreads, stream_, b.tokens, b.local_ids, x.n, int64_t{0}, x.v));
    VTRAIN_RETURN_IF_ERROR(Launch("word_embedding_gather_kernel", word_embedding_gather_kernel<T>,
                                  GridFor(nh), kThreads, stream_, b.local_ids, b.word_emb,
                                  b.word_rows, x.n, x.h));
    VTRAIN_RETURN_IF_ERROR(Launch("position_embedding_gather_kernel",
                                  position_embedding_gather_kernel<T>, GridFor(nh), kThreads,
                                  stream_, b.pos_emb, b.pos_rows, x.n, x.b, x.h));
    VTRAIN_RETURN_IF_ERROR(Launch("embedding_add_kernel", embedding_add_kernel<T>, GridFor(nh),
                                  kThreads, stream_, b.word_rows, b.pos_rows, b.word_rows, nh));
    return Launch("embedding_dropout_fwd_kernel", embedding_dropout_fwd_kernel<T>, GridFor(nh),
                  kThreads, stream_, b.word_rows, b.h0, b.emb_mask, nh, kDropout, NextSeed());
  }

  std::string AttentionFwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t sc = x.bh() * x.s * x.s;
    VTRAIN_RETURN_IF_ERROR(
        LayerNormFwd(b.h0, b.ln1_gamma, b.ln1_beta, b.ln1_out, b.ln1_mean, b.ln1_rstd));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmQkvFwd));
    if (!gemms_[kGemmQkvFwd].bias_fused()) {
      VTRAIN_RETURN_IF_ERROR(Launch("bias_add_kernel", bias_add_kernel<T>, GridFor(x.n * x.qkv()),
                                    kThreads, stream_, b.qkv, b.b_qkv, x.n, x.qkv()));
    }
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmScoresFwd));
    VTRAIN_RETURN_IF_ERROR(Launch(
        "scaled_causal_softmax_fwd_kernel", scaled_causal_softmax_fwd_kernel<T>,
        static_cast<unsigned>(x.bh() * x.s), kThreads, stream_, b.scores, b.probs, x.s, 1.0f));
    VTRAIN_RETURN_IF_ERROR(Launch("attention_dropout_fwd_kernel", attention_dropout_fwd_kernel<T>,
                                  GridFor(sc), kThreads, stream_, b.probs, b.dropped, b.attn_mask,
                                  sc, kDropout, NextSeed()));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmContextFwd));
    VTRAIN_RETURN_IF_ERROR(Launch("context_transpose_copy_kernel", context_transpose_copy_kernel<T>,
                                  GridFor(x.n * x.ad()), kThreads, stream_, b.ctx_bsd, b.ctx, x.s,
                                  x.b, x.a, x.d));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmProjectionFwd));
    return Launch("bias_dropout_add_fwd_kernel", bias_dropout_add_fwd_kernel<T>, GridFor(x.n * x.h),
                  kThreads, stream_, b.proj_out, b.b_proj, b.h0, b.h1, b.attn_resid_mask, x.n, x.h,
                  kDropout, NextSeed());
  }

  std::string MlpFwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    VTRAIN_RETURN_IF_ERROR(
        LayerNormFwd(b.h1, b.ln2_gamma, b.ln2_beta, b.ln2_out, b.ln2_mean, b.ln2_rstd));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmFc1Fwd));
    VTRAIN_RETURN_IF_ERROR(Launch("bias_gelu_fwd_kernel", bias_gelu_fwd_kernel<T>,
                                  GridFor(x.n * x.f), kThreads, stream_, b.fc1_out, b.b_fc1,
                                  b.gelu_out, x.n, x.f));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmFc2Fwd));
    return Launch("bias_dropout_add_fwd_kernel", bias_dropout_add_fwd_kernel<T>, GridFor(x.n * x.h),
                  kThreads, stream_, b.fc2_out, b.b_fc2, b.h1, b.h2, b.mlp_mask, x.n, x.h, kDropout,
                  NextSeed());
  }

  std::string LogitFwd() {
    Buffers<T>& b = buf_;
    VTRAIN_RETURN_IF_ERROR(
        LayerNormFwd(b.h2, b.lnf_gamma, b.lnf_beta, b.lnf_out, b.lnf_mean, b.lnf_rstd));
    return RunGemm(kGemmLogitFwd);
  }

  std::string LossFwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t nv = x.n * x.v;
    const unsigned rows = static_cast<unsigned>(x.n);
    VTRAIN_RETURN_IF_ERROR(Launch("logits_to_fp32_kernel", logits_to_fp32_kernel<T>, GridFor(nv),
                                  kThreads, stream_, b.logits, b.logits32, nv));
    VTRAIN_RETURN_IF_ERROR(Launch("cross_entropy_max_kernel", cross_entropy_max_kernel, rows,
                                  kThreads, stream_, b.logits32, b.row_max, x.v));
    VTRAIN_RETURN_IF_ERROR(Launch("cross_entropy_sub_exp_kernel", cross_entropy_sub_exp_kernel,
                                  GridFor(nv), kThreads, stream_, b.logits32, b.row_max, nv, x.v));
    VTRAIN_RETURN_IF_ERROR(Launch("cross_entropy_sum_kernel", cross_entropy_sum_kernel, rows,
                                  kThreads, stream_, b.logits32, b.sum_exp, x.v));
    VTRAIN_RETURN_IF_ERROR(Launch(
        "cross_entropy_target_gather_kernel", cross_entropy_target_gather_kernel<T>, GridFor(x.n),
        kThreads, stream_, b.labels, b.logits, b.row_max, b.predicted, x.n, x.v, int64_t{0}));
    return Launch("cross_entropy_log_kernel", cross_entropy_log_kernel, GridFor(x.n), kThreads,
                  stream_, b.sum_exp, b.predicted, b.loss, x.n);
  }

  std::string LossBwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t nv = x.n * x.v;
    VTRAIN_RETURN_IF_ERROR(Launch("cross_entropy_softmax_grad_kernel",
                                  cross_entropy_softmax_grad_kernel, GridFor(nv), kThreads, stream_,
                                  b.logits32, b.sum_exp, b.grad32, nv, x.v));
    VTRAIN_RETURN_IF_ERROR(Launch("cross_entropy_target_sub_kernel",
                                  cross_entropy_target_sub_kernel, GridFor(x.n), kThreads, stream_,
                                  b.labels, b.grad32, x.n, x.v, int64_t{0}));
    return Launch("logit_grad_to_half_kernel", logit_grad_to_half_kernel<T>, GridFor(nv), kThreads,
                  stream_, b.grad32, b.d_logits, nv, kLossGradScale);
  }

  std::string LogitBwd() {
    Buffers<T>& b = buf_;
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmLogitDgrad));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmLogitWgrad));
    // The final layer norm's input is the last layer's output; its gradient
    // is that layer's incoming gradient.
    return LayerNormBwd(b.d_lnf, b.h2, b.lnf_gamma, b.lnf_mean, b.lnf_rstd, b.d_h2, b.d_lnf_gamma,
                        b.d_lnf_beta);
  }

  std::string MlpBwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const float keep_scale = 1.0f / (1.0f - kDropout);
    VTRAIN_RETURN_IF_ERROR(Launch("bias_dropout_add_bwd_kernel", bias_dropout_add_bwd_kernel<T>,
                                  GridFor(x.n * x.h), kThreads, stream_, b.d_h2, b.mlp_mask,
                                  b.dy_fc2, x.n * x.h, keep_scale));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmFc2Dgrad));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmFc2Wgrad));
    // The FC1 bias gradient needs bias_gelu_bwd's output, so the reduction
    // of both biases comes after it.
    VTRAIN_RETURN_IF_ERROR(Launch("bias_gelu_bwd_kernel", bias_gelu_bwd_kernel<T>,
                                  GridFor(x.n * x.f), kThreads, stream_, b.d_gelu, b.fc1_out,
                                  b.b_fc1, b.d_fc1, x.n, x.f));
    VTRAIN_RETURN_IF_ERROR(BiasGradReduce(b.d_fc1, x.f, b.db_fc1, b.dy_fc2, x.h, b.db_fc2));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmFc1Dgrad));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmFc1Wgrad));
    VTRAIN_RETURN_IF_ERROR(LayerNormBwd(b.d_ln2, b.h1, b.ln2_gamma, b.ln2_mean, b.ln2_rstd,
                                        b.dx_ln2, b.d_ln2_gamma, b.d_ln2_beta));
    return Launch("residual_add_bwd_kernel", residual_add_bwd_kernel<T>, GridFor(x.n * x.h),
                  kThreads, stream_, b.d_h2, b.dx_ln2, b.d_h1, x.n * x.h);
  }

  std::string AttentionBwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t sc = x.bh() * x.s * x.s;
    const float keep_scale = 1.0f / (1.0f - kDropout);
    VTRAIN_RETURN_IF_ERROR(Launch("bias_dropout_add_bwd_kernel", bias_dropout_add_bwd_kernel<T>,
                                  GridFor(x.n * x.h), kThreads, stream_, b.d_h1, b.attn_resid_mask,
                                  b.dy_proj, x.n * x.h, keep_scale));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmProjectionDgrad));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmProjectionWgrad));
    VTRAIN_RETURN_IF_ERROR(Launch("context_transpose_copy_bwd_kernel",
                                  context_transpose_copy_bwd_kernel<T>, GridFor(x.n * x.ad()),
                                  kThreads, stream_, b.d_ctx, b.d_ctx_bsd, x.s, x.b, x.a, x.d));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmContextDgradProbs));   // dP into scores
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmContextDgradValues));  // dV into d_qkv
    VTRAIN_RETURN_IF_ERROR(Launch("attention_dropout_bwd_kernel", attention_dropout_bwd_kernel<T>,
                                  GridFor(sc), kThreads, stream_, b.scores, b.attn_mask, b.scores,
                                  sc, keep_scale));
    VTRAIN_RETURN_IF_ERROR(Launch(
        "scaled_causal_softmax_bwd_kernel", scaled_causal_softmax_bwd_kernel<T>,
        static_cast<unsigned>(x.bh() * x.s), kThreads, stream_, b.probs, b.scores, x.s, 1.0f));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmScoresDgradQuery));  // dQ into d_qkv
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmScoresDgradKey));    // dK into d_qkv
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmQkvDgrad));
    VTRAIN_RETURN_IF_ERROR(RunGemm(kGemmQkvWgrad));
    VTRAIN_RETURN_IF_ERROR(BiasGradReduce(b.d_qkv, x.qkv(), b.db_qkv, b.dy_proj, x.h, b.db_proj));
    VTRAIN_RETURN_IF_ERROR(LayerNormBwd(b.d_ln1, b.h0, b.ln1_gamma, b.ln1_mean, b.ln1_rstd,
                                        b.dx_ln1, b.d_ln1_gamma, b.d_ln1_beta));
    return Launch("residual_add_bwd_kernel", residual_add_bwd_kernel<T>, GridFor(x.n * x.h),
                  kThreads, stream_, b.d_h1, b.dx_ln1, b.d_h0, x.n * x.h);
  }

  std::string EmbeddingBwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t nh = x.n * x.h;
    VTRAIN_RETURN_IF_ERROR(Launch("embedding_dropout_bwd_kernel", embedding_dropout_bwd_kernel<T>,
                                  GridFor(nh), kThreads, stream_, b.d_h0, b.emb_mask, b.d_emb, nh,
                                  1.0f / (1.0f - kDropout)));
    VTRAIN_RETURN_IF_ERROR(Launch("word_embedding_scatter_add_kernel",
                                  word_embedding_scatter_add_kernel<T>, GridFor(nh), kThreads,
                                  stream_, b.local_ids, b.d_emb, b.word_dense_grad, x.n, x.h));
    VTRAIN_RETURN_IF_ERROR(Launch(
        "word_embedding_grad_accumulate_kernel", word_embedding_grad_accumulate_kernel,
        GridFor(x.v * x.h), kThreads, stream_, b.word_dense_grad, b.word_main_grad, x.v * x.h));
    return Launch("position_embedding_bwd_kernel", position_embedding_bwd_kernel<T>,
                  GridFor(x.s * x.h), kThreads, stream_, b.d_emb, b.pos_grad, x.s, x.b, x.h);
  }

  // Per kernel kind, one launch per apex-sized slice of the flat buffer,
  // kinds in Megatron's order: overflow check, gradient norm, Adam, copy of
  // the master weights into the fp16/bf16 parameters; then the fp32 main
  // grads are reset (core/profile/analytical.cc has the same sequence and
  // traffic: 18 bytes of state per parameter, Korthikanti et al. 2022).
  std::string OptimizerStep() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    constexpr float kInvLossScale = 1.0f;  // gradients are stored unscaled
    VTRAIN_RETURN_IF_ERROR(Launch("optimizer_state_reset_kernel", optimizer_state_reset_kernel, 1,
                                  32, stream_, b.adam_scalars));
    const int64_t slices = CeilDiv(x.adam, kAdamElementsPerLaunch);
    auto slice_len = [&](int64_t i) {
      return std::min(kAdamElementsPerLaunch, x.adam - i * kAdamElementsPerLaunch);
    };
    for (int64_t i = 0; i < slices; ++i) {
      const int64_t off = i * kAdamElementsPerLaunch;
      VTRAIN_RETURN_IF_ERROR(Launch(
          "grad_unscale_inf_check_kernel", grad_unscale_inf_check_kernel<float>, GridFor(slice_len(i)),
          kThreads, stream_, b.adam_grad + off, slice_len(i), kInvLossScale, b.adam_scalars + 1));
    }
    for (int64_t i = 0; i < slices; ++i) {
      const int64_t off = i * kAdamElementsPerLaunch;
      VTRAIN_RETURN_IF_ERROR(Launch("grad_norm_kernel", grad_norm_kernel<float>, GridFor(slice_len(i)),
                                    kThreads, stream_, b.adam_grad + off, slice_len(i),
                                    kInvLossScale, b.adam_scalars));
    }
    ++adam_step_;
    AdamHyper hp;
    hp.lr = 1e-4f;
    hp.beta1 = 0.9f;
    hp.beta2 = 0.95f;
    hp.eps = 1e-8f;
    hp.weight_decay = 0.1f;
    hp.max_grad_norm = 1.0f;
    hp.inv_loss_scale = kInvLossScale;
    hp.bias_correction1 =
        static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta1), adam_step_));
    hp.bias_correction2 =
        static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta2), adam_step_));
    for (int64_t i = 0; i < slices; ++i) {
      const int64_t off = i * kAdamElementsPerLaunch;
      VTRAIN_RETURN_IF_ERROR(Launch("adam_step_kernel", adam_step_kernel<float>, GridFor(slice_len(i)),
                                    kThreads, stream_, b.adam_grad + off, b.master + off,
                                    b.exp_avg + off, b.exp_avg_sq + off, slice_len(i),
                                    b.adam_scalars, hp));
    }
    for (int64_t i = 0; i < slices; ++i) {
      const int64_t off = i * kAdamElementsPerLaunch;
      VTRAIN_RETURN_IF_ERROR(Launch("master_to_half_copy_kernel", master_to_half_copy_kernel<T>,
                                    GridFor(slice_len(i)), kThreads, stream_, b.master + off,
                                    b.adam_param + off, slice_len(i)));
    }
    return Launch("zero_main_grad_kernel", zero_main_grad_kernel, GridFor(x.adam), kThreads,
                  stream_, b.adam_grad, x.adam);
  }

  Dims dims_;
  DeviceArena arena_;
  Buffers<T> buf_{};
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  uint32_t seed_ = 0;
  double adam_step_ = 0;
  std::array<Gemm, kGemmCount> gemms_;
};

}  // namespace

// ValidateShape is in shape.cc (plain C++, shared with the tests).

int64_t WorkloadBytes(const LayerShape& shape) {
  if (!ValidateShape(shape).empty()) return std::numeric_limits<int64_t>::max();
  DeviceArena counter(false);
  Buffers<__half> layout{};  // same sizes for bf16
  layout.Layout(MakeDims(shape), &counter);
  if (counter.bytes() >= kMaxBytes) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(counter.bytes());
}

std::unique_ptr<LayerWorkload> LayerWorkload::Create(const LayerShape& shape, std::string* error) {
  std::string ignored;
  if (error == nullptr) error = &ignored;
  error->clear();
  if (std::string e = ValidateShape(shape); !e.empty()) {
    *error = e;
    return nullptr;
  }
  const int64_t bytes = WorkloadBytes(shape);
  if (bytes == std::numeric_limits<int64_t>::max()) {
    *error = "shape needs more than 1 PiB of device memory";
    return nullptr;
  }
  if (shape.bf16) return Workload<__nv_bfloat16>::Make(shape, error);
  return Workload<__half>::Make(shape, error);
}

}  // namespace vtrain::gpu

#undef VTRAIN_RETURN_IF_ERROR
