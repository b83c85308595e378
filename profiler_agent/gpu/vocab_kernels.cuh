// The vocabulary-parallel kernels of the first and last pipeline stages:
// the word and position embeddings with their gradients, and the cross
// entropy loss with its gradient. Included by workloads.cu only (see
// kernel_common.cuh).
#ifndef VTRAIN_PROFILER_AGENT_GPU_VOCAB_KERNELS_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_VOCAB_KERNELS_CUH_

#include <cstdint>

#include "profiler_agent/gpu/kernel_common.cuh"

namespace vtrain::gpu {
namespace {

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

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_VOCAB_KERNELS_CUH_
