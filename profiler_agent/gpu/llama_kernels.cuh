// Our kernels for the Llama-style layer (llama_plan.h): RMSNorm forward and
// backward, rotary position embedding on Q and K, SwiGLU, the residual add,
// and a tiled causal flash-style attention (online softmax, forward and
// FlashAttention-2-style backward) with grouped-query heads.
//
// These are deliberately simple kernels written for this agent: they have
// the launch structure and about the memory traffic of the kernels
// Megatron-Core with Transformer Engine launches (no s x s matrix in memory,
// K and V read once per query tile, dQ accumulated in fp32), not their
// speed. The attention kernels in particular compute on CUDA cores from
// shared memory, not on tensor cores: a production measurement of attention
// should record the real FlashAttention or cuDNN fused-attention kernel (for
// instance with the injection library, inject.cc, inside a Megatron run);
// what `profile` measures here is our own kernel.
//
// Layouts: activations are [s, b, width] row-major (token row s_i * b + b_i,
// Megatron's order). Q, K and V of one token sit side by side in the QKV
// GEMM's output [n, (a + 2 kv) d]: Q's a heads, then K's kv heads, then V's.
// Per-row attention statistics (log-sum-exp, the backward's D) are indexed
// ((b_i * a + head) * s + s_i).
#ifndef VTRAIN_PROFILER_AGENT_GPU_LLAMA_KERNELS_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_LLAMA_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "profiler_agent/gpu/kernel_common.cuh"

namespace vtrain::gpu {
namespace {

// Query and key rows per tile of the attention kernels.
constexpr int kFlashTile = 32;
// Shared-memory tiles of Q, K, V and dO hold rows of d + kTilePad elements,
// so that a warp reading one element of 32 different rows (the score loops)
// hits different banks instead of one.
constexpr int64_t kTilePad = 2;
constexpr int kFlashThreads = 128;

// ---------------------------------------------------------------------------
// RMSNorm (Zhang & Sennrich 2019): y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + eps).
// ---------------------------------------------------------------------------

// One block per row.
template <class T>
__global__ void rmsnorm_fwd_kernel(const T* x, const T* gamma, T* y, float* rstd_out, int64_t cols,
                                   float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = ToFloat(xr[c]);
    ss += v * v;
  }
  ss = BlockReduceSum(ss);
  const float rstd = rsqrtf(ss / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    yr[c] = FromFloat<T>(ToFloat(xr[c]) * rstd * ToFloat(gamma[c]));
  }
  if (threadIdx.x == 0) rstd_out[row] = rstd;
}

// Input and gamma gradients in one kernel, as Transformer Engine's fused
// RMSNorm backward: with xhat = x * rstd and g = gamma * dy,
//   dx = rstd * (g - xhat * mean(g * xhat)),   dgamma += dy * xhat.
// Each block takes `rows_per_chunk` rows; each thread owns the columns
// c = threadIdx.x (mod blockDim.x) and sums their dgamma in shared memory
// (cols floats, dynamic), added to the fp32 dgamma once per block.
template <class T>
__global__ void rmsnorm_bwd_kernel(const T* dy, const T* x, const T* gamma, const float* rstd,
                                   T* dx, float* dgamma, int64_t rows, int64_t cols,
                                   int64_t rows_per_chunk) {
  extern __shared__ float dgamma_part[];
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dgamma_part[c] = 0.0f;
  const int64_t first = blockIdx.x * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  for (int64_t row = first; row < last; ++row) {
    const T* dyr = dy + row * cols;
    const T* xr = x + row * cols;
    T* dxr = dx + row * cols;
    const float rs = rstd[row];
    float dot = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      dot += ToFloat(gamma[c]) * ToFloat(dyr[c]) * ToFloat(xr[c]) * rs;
    }
    const float mean_dot = BlockReduceSum(dot) / static_cast<float>(cols);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = ToFloat(xr[c]) * rs;
      const float g = ToFloat(dyr[c]);
      dxr[c] = FromFloat<T>(rs * (ToFloat(gamma[c]) * g - xhat * mean_dot));
      dgamma_part[c] += g * xhat;
    }
  }
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) atomicAdd(&dgamma[c], dgamma_part[c]);
}

// ---------------------------------------------------------------------------
// Rotary position embedding (Su et al. 2021), in the rotate-half form
// Megatron-Core and Llama use: for j < d/2 and angle pos * base^(-2j/d),
//   out[j] = x[j] cos - x[j + d/2] sin,  out[j + d/2] = x[j + d/2] cos + x[j] sin.
// The backward rotates the gradient back (the angle negated).
// ---------------------------------------------------------------------------

template <class T>
__device__ __forceinline__ void RotateHeads(const T* in, int64_t in_stride, T* out,
                                            int64_t out_stride, int64_t tokens, int64_t heads,
                                            int64_t d, int64_t b, float base, float sign) {
  const int64_t half = d / 2;
  const int64_t n = tokens * heads * half;
  const float log2_base = log2f(base);
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t j = i % half;
    const int64_t token_head = i / half;
    const int64_t head = token_head % heads;
    const int64_t token = token_head / heads;
    const float pos = static_cast<float>(token / b);
    const float angle =
        pos * exp2f(-2.0f * static_cast<float>(j) / static_cast<float>(d) * log2_base);
    float sn = 0.0f;
    float cs = 0.0f;
    sincosf(angle, &sn, &cs);
    sn *= sign;
    const T* src = in + token * in_stride + head * d;
    T* dst = out + token * out_stride + head * d;
    const float x1 = ToFloat(src[j]);
    const float x2 = ToFloat(src[j + half]);
    dst[j] = FromFloat<T>(x1 * cs - x2 * sn);
    dst[j + half] = FromFloat<T>(x2 * cs + x1 * sn);
  }
}

template <class T>
__global__ void rotary_fwd_kernel(const T* in, int64_t in_stride, T* out, int64_t out_stride,
                                  int64_t tokens, int64_t heads, int64_t d, int64_t b, float base) {
  RotateHeads(in, in_stride, out, out_stride, tokens, heads, d, b, base, 1.0f);
}

template <class T>
__global__ void rotary_bwd_kernel(const T* in, int64_t in_stride, T* out, int64_t out_stride,
                                  int64_t tokens, int64_t heads, int64_t d, int64_t b, float base) {
  RotateHeads(in, in_stride, out, out_stride, tokens, heads, d, b, base, -1.0f);
}

// ---------------------------------------------------------------------------
// SwiGLU (Shazeer 2020): the gate-and-up GEMM's output [rows, 2f] is
// [gate | up]; out = silu(gate) * up.
// ---------------------------------------------------------------------------

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <class T>
__global__ void swiglu_fwd_kernel(const T* in, T* out, int64_t rows, int64_t f) {
  const int64_t n = rows * f;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t r = i / f;
    const int64_t c = i % f;
    const float g = ToFloat(in[r * 2 * f + c]);
    const float u = ToFloat(in[r * 2 * f + f + c]);
    out[i] = FromFloat<T>(g * Sigmoid(g) * u);
  }
}

// d gate = dy * up * silu'(gate), d up = dy * silu(gate), with
// silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))).
template <class T>
__global__ void swiglu_bwd_kernel(const T* dy, const T* in, T* din, int64_t rows, int64_t f) {
  const int64_t n = rows * f;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t r = i / f;
    const int64_t c = i % f;
    const float g = ToFloat(in[r * 2 * f + c]);
    const float u = ToFloat(in[r * 2 * f + f + c]);
    const float sg = Sigmoid(g);
    const float d = ToFloat(dy[i]);
    din[r * 2 * f + c] = FromFloat<T>(d * u * sg * (1.0f + g * (1.0f - sg)));
    din[r * 2 * f + f + c] = FromFloat<T>(d * g * sg);
  }
}

template <class T>
__global__ void residual_add_fwd_kernel(const T* residual, const T* branch, T* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    out[i] = FromFloat<T>(ToFloat(residual[i]) + ToFloat(branch[i]));
  }
}

// ---------------------------------------------------------------------------
// Causal flash-style attention (Dao et al. 2022; Dao 2023), grouped-query:
// query head `head` reads key/value head head / (heads / kv_heads).
// ---------------------------------------------------------------------------

template <class T>
struct FlashArgs {
  const T* q = nullptr;  // [n, heads * d] (rows q_stride apart)
  const T* k = nullptr;  // [n, kv_heads * d]
  const T* v = nullptr;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
  T* o = nullptr;  // forward output [n, heads * d], o_stride apart
  int64_t o_stride = 0;
  float* lse = nullptr;  // log-sum-exp per query row
  // Backward.
  const T* d_o = nullptr;        // [n, heads * d], o_stride apart
  const float* delta = nullptr;  // rowsum(dO * O)
  float* dq_accum = nullptr;     // [n, heads * d], o_stride apart, fp32
  T* dk = nullptr;
  T* dv = nullptr;
  int64_t dk_stride = 0, dv_stride = 0;
  int64_t s = 0, b = 0, heads = 0, kv_heads = 0, d = 0;
  float scale = 1.0f;  // 1 / sqrt(d)
};

__device__ __forceinline__ int64_t TokenRow(int64_t si, int64_t bi, int64_t b) {
  return si * b + bi;
}
__device__ __forceinline__ int64_t StatIndex(int64_t bi, int64_t head, int64_t si, int64_t heads,
                                             int64_t s) {
  return (bi * heads + head) * s + si;
}

// Shared memory of the forward kernel, in bytes.
inline size_t FlashFwdSharedBytes(int64_t d, size_t elem) {
  const size_t t = kFlashTile;
  return (t * d + t * (t + 1) + 3 * t) * sizeof(float) + 3 * t * (d + kTilePad) * elem;
}

// Shared memory of the backward kernel, in bytes.
inline size_t FlashBwdSharedBytes(int64_t d, size_t elem) {
  const size_t t = kFlashTile;
  return (2 * t * d + 2 * t * (t + 1) + 2 * t) * sizeof(float) + 4 * t * (d + kTilePad) * elem;
}

// Loads rows [r0, r0 + count) of one head of a [n, ...] tensor into a
// [kFlashTile, d] shared tile with rows d + kTilePad apart, zeros past
// `count`.
template <class T>
__device__ __forceinline__ void LoadTile(T* tile, const T* src, int64_t stride, int64_t col0,
                                         int64_t r0, int count, int64_t bi, int64_t b, int64_t d) {
  for (int64_t i = threadIdx.x; i < kFlashTile * d; i += blockDim.x) {
    const int r = static_cast<int>(i / d);
    const int64_t c = i % d;
    tile[r * (d + kTilePad) + c] =
        r < count ? src[TokenRow(r0 + r, bi, b) * stride + col0 + c] : FromFloat<T>(0.0f);
  }
}

// One block per (query tile, micro-batch row and head): streams the key and
// value tiles up to the diagonal, keeping the running row maximum m, the
// running sum l and the unnormalised output in shared memory (online
// softmax), and skips the tiles above the diagonal entirely.
template <class T>
__global__ void flash_attention_fwd_kernel(FlashArgs<T> p) {
  extern __shared__ float smem[];
  const int64_t d = p.d;
  const int64_t ld = d + kTilePad;  // row stride of the 16-bit tiles
  constexpr int kT = kFlashTile;
  float* acc = smem;              // [kT, d]
  float* sc = acc + kT * d;       // [kT, kT + 1] scores, then probabilities
  float* m = sc + kT * (kT + 1);  // running max
  float* l = m + kT;              // running sum
  float* alpha = l + kT;          // rescale of this tile
  T* qs = reinterpret_cast<T*>(alpha + kT);
  T* ks = qs + kT * ld;
  T* vs = ks + kT * ld;
  const int64_t bi = blockIdx.y / p.heads;
  const int64_t head = blockIdx.y % p.heads;
  const int64_t kvh = head / (p.heads / p.kv_heads);
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kT;
  const int rows = static_cast<int>(p.s - q0 < kT ? p.s - q0 : kT);
  LoadTile(qs, p.q, p.q_stride, head * d, q0, rows, bi, p.b, d);
  for (int64_t i = threadIdx.x; i < kT * d; i += blockDim.x) acc[i] = 0.0f;
  if (threadIdx.x < kT) {
    m[threadIdx.x] = -INFINITY;
    l[threadIdx.x] = 0.0f;
  }
  __syncthreads();
  for (int64_t k0 = 0; k0 < q0 + rows; k0 += kT) {
    const int cols = static_cast<int>(p.s - k0 < kT ? p.s - k0 : kT);
    LoadTile(ks, p.k, p.k_stride, kvh * d, k0, cols, bi, p.b, d);
    LoadTile(vs, p.v, p.v_stride, kvh * d, k0, cols, bi, p.b, d);
    __syncthreads();
    for (int i = threadIdx.x; i < kT * kT; i += blockDim.x) {
      const int r = i / kT;
      const int c = i % kT;
      float x = -INFINITY;
      if (r < rows && c < cols && k0 + c <= q0 + r) {
        x = 0.0f;
        for (int64_t e = 0; e < d; ++e) x += ToFloat(qs[r * ld + e]) * ToFloat(ks[c * ld + e]);
        x *= p.scale;
      }
      sc[r * (kT + 1) + c] = x;
    }
    __syncthreads();
    if (threadIdx.x < kT) {
      const int r = threadIdx.x;
      float mx = m[r];
      for (int c = 0; c < cols; ++c) mx = fmaxf(mx, sc[r * (kT + 1) + c]);
      float sum = 0.0f;
      for (int c = 0; c < kT; ++c) {
        const float x = sc[r * (kT + 1) + c];
        const float pr = (mx == -INFINITY || x == -INFINITY) ? 0.0f : expf(x - mx);
        sc[r * (kT + 1) + c] = pr;
        sum += pr;
      }
      const float a = mx == -INFINITY ? 1.0f : expf(m[r] - mx);
      l[r] = l[r] * a + sum;
      m[r] = mx;
      alpha[r] = a;
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < kT * d; i += blockDim.x) {
      const int r = static_cast<int>(i / d);
      const int64_t c = i % d;
      float o = acc[i] * alpha[r];
      for (int j = 0; j < cols; ++j) o += sc[r * (kT + 1) + j] * ToFloat(vs[j * ld + c]);
      acc[i] = o;
    }
    __syncthreads();
  }
  for (int64_t i = threadIdx.x; i < rows * d; i += blockDim.x) {
    const int r = static_cast<int>(i / d);
    const int64_t c = i % d;
    p.o[TokenRow(q0 + r, bi, p.b) * p.o_stride + head * d + c] = FromFloat<T>(acc[i] / l[r]);
  }
  if (threadIdx.x < rows) {
    p.lse[StatIndex(bi, head, q0 + threadIdx.x, p.heads, p.s)] =
        m[threadIdx.x] + logf(l[threadIdx.x]);
  }
}

// D = rowsum(dO * O) per query row (one warp per row), and dQ's fp32
// accumulator zeroed, as FlashAttention-2's preprocessing kernel does.
template <class T>
__global__ void flash_attention_bwd_preprocess_kernel(FlashArgs<T> p, float* delta) {
  const int64_t lane = threadIdx.x & 31;
  const int64_t warps = GridThreads() / 32;
  const int64_t rows = p.s * p.b * p.heads;
  for (int64_t row = GlobalThread() / 32; row < rows; row += warps) {
    const int64_t token = row / p.heads;
    const int64_t head = row % p.heads;
    const int64_t base = token * p.o_stride + head * p.d;
    float acc = 0.0f;
    for (int64_t e = lane; e < p.d; e += 32) {
      acc += ToFloat(p.o[base + e]) * ToFloat(p.d_o[base + e]);
      p.dq_accum[base + e] = 0.0f;
    }
    acc = WarpReduce<SumOp>(acc);
    if (lane == 0) delta[StatIndex(token % p.b, head, token / p.b, p.heads, p.s)] = acc;
  }
}

// One block per (key tile, micro-batch row and key/value head): for every
// query head of the group and every query tile on or below the diagonal,
// recomputes P = exp(scale Q K^T - lse), then dV += P^T dO,
// dS = P (dO V^T - D), dK += scale dS^T Q (in shared memory) and
// dQ += scale dS K (fp32 atomics into dq_accum). Writes dK and dV once.
template <class T>
__global__ void flash_attention_bwd_kernel(FlashArgs<T> p) {
  extern __shared__ float smem[];
  const int64_t d = p.d;
  const int64_t ld = d + kTilePad;  // row stride of the 16-bit tiles
  constexpr int kT = kFlashTile;
  float* dk = smem;                 // [kT, d]
  float* dv = dk + kT * d;          // [kT, d]
  float* pr = dv + kT * d;          // [kT, kT + 1] probabilities
  float* ds = pr + kT * (kT + 1);   // [kT, kT + 1] score gradients
  float* lse = ds + kT * (kT + 1);  // [kT]
  float* dl = lse + kT;             // [kT] D
  T* ks = reinterpret_cast<T*>(dl + kT);
  T* vs = ks + kT * ld;
  T* qs = vs + kT * ld;
  T* dos = qs + kT * ld;
  const int64_t bi = blockIdx.y / p.kv_heads;
  const int64_t kvh = blockIdx.y % p.kv_heads;
  const int64_t group = p.heads / p.kv_heads;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kT;
  const int cols = static_cast<int>(p.s - k0 < kT ? p.s - k0 : kT);
  LoadTile(ks, p.k, p.k_stride, kvh * d, k0, cols, bi, p.b, d);
  LoadTile(vs, p.v, p.v_stride, kvh * d, k0, cols, bi, p.b, d);
  for (int64_t i = threadIdx.x; i < kT * d; i += blockDim.x) dk[i] = dv[i] = 0.0f;
  for (int64_t g = 0; g < group; ++g) {
    const int64_t head = kvh * group + g;
    for (int64_t q0 = k0; q0 < p.s; q0 += kT) {
      const int rows = static_cast<int>(p.s - q0 < kT ? p.s - q0 : kT);
      __syncthreads();  // the previous tile's readers are done
      LoadTile(qs, p.q, p.q_stride, head * d, q0, rows, bi, p.b, d);
      LoadTile(dos, p.d_o, p.o_stride, head * d, q0, rows, bi, p.b, d);
      if (threadIdx.x < kT) {
        const bool in = static_cast<int>(threadIdx.x) < rows;
        const int64_t idx = StatIndex(bi, head, q0 + threadIdx.x, p.heads, p.s);
        lse[threadIdx.x] = in ? p.lse[idx] : 0.0f;
        dl[threadIdx.x] = in ? p.delta[idx] : 0.0f;
      }
      __syncthreads();
      for (int i = threadIdx.x; i < kT * kT; i += blockDim.x) {
        const int r = i / kT;
        const int c = i % kT;
        float prob = 0.0f;
        float grad = 0.0f;
        if (r < rows && c < cols && k0 + c <= q0 + r) {
          float x = 0.0f;
          float dp = 0.0f;
          for (int64_t e = 0; e < d; ++e) {
            x += ToFloat(qs[r * ld + e]) * ToFloat(ks[c * ld + e]);
            dp += ToFloat(dos[r * ld + e]) * ToFloat(vs[c * ld + e]);
          }
          prob = expf(x * p.scale - lse[r]);
          grad = prob * (dp - dl[r]);
        }
        pr[r * (kT + 1) + c] = prob;
        ds[r * (kT + 1) + c] = grad;
      }
      __syncthreads();
      for (int64_t i = threadIdx.x; i < kT * d; i += blockDim.x) {
        const int c = static_cast<int>(i / d);
        const int64_t e = i % d;
        float accv = 0.0f;
        float acck = 0.0f;
        for (int r = 0; r < rows; ++r) {
          accv += pr[r * (kT + 1) + c] * ToFloat(dos[r * ld + e]);
          acck += ds[r * (kT + 1) + c] * ToFloat(qs[r * ld + e]);
        }
        dv[i] += accv;
        dk[i] += acck * p.scale;
      }
      for (int64_t i = threadIdx.x; i < rows * d; i += blockDim.x) {
        const int r = static_cast<int>(i / d);
        const int64_t e = i % d;
        float acc = 0.0f;
        for (int c = 0; c < cols; ++c) acc += ds[r * (kT + 1) + c] * ToFloat(ks[c * ld + e]);
        atomicAdd(&p.dq_accum[TokenRow(q0 + r, bi, p.b) * p.o_stride + head * d + e],
                  acc * p.scale);
      }
    }
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < cols * d; i += blockDim.x) {
    const int r = static_cast<int>(i / d);
    const int64_t e = i % d;
    const int64_t row = TokenRow(k0 + r, bi, p.b);
    p.dk[row * p.dk_stride + kvh * d + e] = FromFloat<T>(dk[i]);
    p.dv[row * p.dv_stride + kvh * d + e] = FromFloat<T>(dv[i]);
  }
}

// dQ's fp32 accumulator back to 16 bits.
template <class T>
__global__ void flash_attention_bwd_dq_convert_kernel(const float* dq_accum, T* dq, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) dq[i] = FromFloat<T>(dq_accum[i]);
}

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_LLAMA_KERNELS_CUH_
