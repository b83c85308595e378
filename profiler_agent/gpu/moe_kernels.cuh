// Our kernels of the MoE block (moe_workload.cu), one thread per element
// (or per token for the router), grid-stride loops like the other
// workloads' memory-bound kernels. Token copies are laid out expert by
// expert: copy r (0 <= r < n*k) is token r % n's (r / n)-th copy, and the
// copies of local expert e are rows [e*per, (e+1)*per), so each expert's
// GEMMs take a contiguous block. The router still computes its softmax and
// top-k on the real logits, but the permutation uses this balanced map
// (forced load balancing, as NVIDIA's MoE benchmarks run).
#ifndef VTRAIN_PROFILER_AGENT_GPU_MOE_KERNELS_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_MOE_KERNELS_CUH_

#include <cstdint>

#include "profiler_agent/gpu/kernel_common.cuh"

namespace vtrain::gpu {
namespace {

constexpr int kMaxTopK = 8;  // workloads.h kMaxMoeTopK

// Per token: softmax over the experts' logits (kept in `probs` for the
// backward), then the top-k probabilities and their experts.
template <class T>
__global__ void router_topk_fwd_kernel(const T* logits, float* probs, float* topk_w, int* topk_id,
                                       int64_t n, int64_t experts, int64_t k) {
  for (int64_t t = GlobalThread(); t < n; t += GridThreads()) {
    const T* row = logits + t * experts;
    float* p = probs + t * experts;
    float peak = -INFINITY;
    for (int64_t e = 0; e < experts; ++e) peak = fmaxf(peak, ToFloat(row[e]));
    float sum = 0;
    for (int64_t e = 0; e < experts; ++e) {
      p[e] = __expf(ToFloat(row[e]) - peak);
      sum += p[e];
    }
    float best_w[kMaxTopK];
    int best_id[kMaxTopK];
    for (int64_t j = 0; j < k; ++j) {
      best_w[j] = -1;
      best_id[j] = 0;
    }
    for (int64_t e = 0; e < experts; ++e) {
      p[e] /= sum;
      // Insert into the sorted top-k.
      int64_t j = k - 1;
      if (p[e] <= best_w[j]) continue;
      while (j > 0 && best_w[j - 1] < p[e]) {
        best_w[j] = best_w[j - 1];
        best_id[j] = best_id[j - 1];
        --j;
      }
      best_w[j] = p[e];
      best_id[j] = static_cast<int>(e);
    }
    for (int64_t j = 0; j < k; ++j) {
      topk_w[t * k + j] = best_w[j];
      topk_id[t * k + j] = best_id[j];
    }
  }
}

// The router's softmax backward: the loss sees the top-k weights only, so
// d logit_e = p_e (g_e - sum_j p_j g_j) with g the weights' gradient at the
// chosen experts and 0 elsewhere.
template <class T>
__global__ void router_topk_bwd_kernel(const float* probs, const float* d_topk_w,
                                       const int* topk_id, T* d_logits, int64_t n, int64_t experts,
                                       int64_t k) {
  for (int64_t t = GlobalThread(); t < n; t += GridThreads()) {
    const float* p = probs + t * experts;
    float dot = 0;
    for (int64_t j = 0; j < k; ++j) dot += p[topk_id[t * k + j]] * d_topk_w[t * k + j];
    for (int64_t e = 0; e < experts; ++e) {
      float g = 0;
      for (int64_t j = 0; j < k; ++j) g += topk_id[t * k + j] == e ? d_topk_w[t * k + j] : 0.0f;
      d_logits[t * experts + e] = FromFloat<T>(p[e] * (g - dot));
    }
  }
}

// copies[r, :] = x[r % n, :] for the n*k copies.
template <class T>
__global__ void moe_permute_fwd_kernel(const T* x, T* copies, int64_t n, int64_t k, int64_t h) {
  const int64_t total = n * k * h;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t r = i / h;
    copies[i] = x[(r % n) * h + i % h];
  }
}

// out[i] = 0.5 * in[i] for i < count: a small memory-bound kernel of 8 bytes
// an element (the router's and the dispatch's small kernels, kSmallKernel).
__global__ void moe_small_stream_kernel(const float* in, float* out, int64_t count) {
  for (int64_t i = GlobalThread(); i < count; i += GridThreads()) out[i] = 0.5f * in[i];
}

// dx[t, :] = sum over t's k copies of d_copies (the gather's backward).
template <class T>
__global__ void moe_permute_bwd_kernel(const T* d_copies, T* dx, int64_t n, int64_t k, int64_t h) {
  const int64_t total = n * h;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += ToFloat(d_copies[j * total + i]);
    dx[i] = FromFloat<T>(sum);
  }
}

// y[t, :] = sum_j w[t, j] * copies[j*n + t, :] (each token's copies back,
// weighted by its router probabilities).
template <class T>
__global__ void moe_unpermute_fwd_kernel(const T* copies, const float* topk_w, T* y, int64_t n,
                                         int64_t k, int64_t h) {
  const int64_t total = n * h;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t t = i / h;
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += topk_w[t * k + j] * ToFloat(copies[j * total + i]);
    y[i] = FromFloat<T>(sum);
  }
}

// The unpermutation's backward: d_copies[j*n + t, :] = w[t, j] dy[t, :], and
// per copy the weight's gradient dot(dy[t, :], copies[j*n + t, :]). One
// block per copy (grid-stride over the copies), its threads over h.
template <class T>
__global__ void moe_unpermute_bwd_kernel(const T* dy, const T* copies, const float* topk_w,
                                         T* d_copies, float* d_topk_w, int64_t n, int64_t k,
                                         int64_t h) {
  for (int64_t r = blockIdx.x; r < n * k; r += gridDim.x) {
    const int64_t t = r % n, j = r / n;
    const float w = topk_w[t * k + j];
    float dot = 0;
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
      const float g = ToFloat(dy[t * h + c]);
      dot += g * ToFloat(copies[r * h + c]);
      d_copies[r * h + c] = FromFloat<T>(w * g);
    }
    dot = BlockReduceSum(dot);
    if (threadIdx.x == 0) d_topk_w[t * k + j] = dot;
  }
}

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_MOE_KERNELS_CUH_
