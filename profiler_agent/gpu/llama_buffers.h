// The device buffers of the Llama workload (llama_workload.cu): per-rank
// dimensions of a Llama shape and every buffer its operators use, laid out
// through the same DeviceArena as the GPT workload's (device_buffers.h).
#ifndef VTRAIN_PROFILER_AGENT_GPU_LLAMA_BUFFERS_H_
#define VTRAIN_PROFILER_AGENT_GPU_LLAMA_BUFFERS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "profiler_agent/gpu/cuda_util.h"
#include "profiler_agent/gpu/device_buffers.h"
#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/llama_plan.h"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu::internal {

// Per-rank dimensions of a (validated) Llama shape.
struct LlamaDims {
  int64_t h = 0;      // hidden
  int64_t a = 0;      // query heads on this rank
  int64_t kv = 0;     // key/value heads on this rank
  int64_t d = 0;      // head dim
  int64_t f = 0;      // FFN width on this rank (the gate-and-up GEMM is 2f wide)
  int64_t s = 0;      // sequence
  int64_t b = 0;      // micro-batch
  int64_t n = 0;      // tokens = s * b
  int64_t v = 0;      // vocabulary shard = ceil(vocab / t)
  int64_t vocab = 0;  // whole vocabulary
  int64_t adam = 0;   // optimizer_step parameters
  bool fp8 = false;

  int64_t ad() const { return a * d; }              // attention width on this rank
  int64_t kd() const { return kv * d; }             // K (or V) width on this rank
  int64_t qkv() const { return (a + 2 * kv) * d; }  // QKV GEMM output width
  // Input and output features of each linear layer (a Linear).
  int64_t in(int l) const {
    const int64_t v_in[] = {h, ad(), h, f, h};
    return v_in[l];
  }
  int64_t out(int l) const {
    const int64_t v_out[] = {qkv(), h, 2 * f, h, v};
    return v_out[l];
  }
};

// The dimensions of `shape` on one rank; `shape` must be a valid Llama shape.
LlamaDims MakeLlamaDims(const LayerShape& shape);

// LayerWorkload::Create for a validated Llama shape (llama_workload.cu).
std::unique_ptr<LayerWorkload> MakeLlamaWorkload(const LayerShape& shape, std::string* error);

template <class T>
struct LlamaBuffers {
  // Embedding (untied from the output layer).
  int32_t* tokens;
  int32_t* labels;
  int32_t* local_ids;
  T* word_emb;  // [v, h]
  T* h0;        // layer input
  float* word_dense_grad;
  float* word_main_grad;
  T* d_h0;
  // Attention block.
  T* ln1_gamma;
  float* ln1_rstd;
  T* ln1_out;
  T* w_qkv;  // [qkv, h]
  T* qkv;    // [n, qkv]: Q heads, K heads, V heads
  T* q_rot;  // [n, ad]
  T* k_rot;  // [n, kd]
  T* ctx;    // attention output [n, ad]
  float* lse;
  T* w_proj;  // [h, ad]
  T* proj_out;
  T* h1;
  T* d_h1;
  T* d_ctx;
  float* delta;
  float* dq_accum;  // [n, ad]
  T* dq;
  T* dk;
  T* d_qkv;
  T* d_ln1;
  T* dx_ln1;
  T* dw_qkv;
  T* dw_proj;
  float* d_ln1_gamma;
  // MLP block.
  T* ln2_gamma;
  float* ln2_rstd;
  T* ln2_out;
  T* w_fc1;    // [2f, h]: gate rows, then up rows
  T* fc1_out;  // [n, 2f]
  T* act;      // [n, f]
  T* w_fc2;    // [h, f]
  T* fc2_out;
  T* h2;
  T* d_h2;
  T* d_act;
  T* d_fc1;
  T* d_ln2;
  T* dx_ln2;
  T* dw_fc1;
  T* dw_fc2;
  float* d_ln2_gamma;
  // Output layer and loss.
  T* lnf_gamma;
  float* lnf_rstd;
  T* lnf_out;
  T* w_out;   // [v, h]
  T* logits;  // [n, v]
  T* d_logits;
  T* d_lnf;
  T* dw_out;
  float* d_lnf_gamma;
  float* logits32;
  float* grad32;
  float* row_max;
  float* sum_exp;
  float* predicted;
  float* loss;
  // Adam.
  float* master;
  float* exp_avg;
  float* exp_avg_sq;
  float* adam_grad;
  T* adam_param;
  float* adam_scalars;
  // fp8 (null unless fp8): per linear layer, and the delayed-scaling state
  // of the kFp8Tensors tensors (linear l's input, weight and output
  // gradient at 3l, 3l + 1, 3l + 2).
  Fp8Linear fp8[kNumFp8Linears];
  float* amax_history;  // [kAmaxHistory, kFp8Tensors]
  float* scale;
  float* scale_inv;
  void* workspace;

  // The 16-bit weight and weight gradient of a Linear.
  T* weight(int l) const {
    T* const w[] = {w_qkv, w_proj, w_fc1, w_fc2, w_out};
    return w[l];
  }

  template <class Arena>
  void Layout(const LlamaDims& x, Arena* arena) {
    const int64_t n = x.n;
    const int64_t h = x.h;
    arena->Take(&tokens, "tokens", {n});
    arena->Take(&labels, "labels", {n});
    arena->Take(&local_ids, "local_ids", {n});
    arena->Take(&word_emb, "word_emb", {x.v, h});
    arena->Take(&h0, "h0", {n, h});
    arena->Take(&word_dense_grad, "word_dense_grad", {x.v, h});
    arena->Take(&word_main_grad, "word_main_grad", {x.v, h});
    arena->Take(&d_h0, "d_h0", {n, h});

    arena->Take(&ln1_gamma, "ln1_gamma", {h});
    arena->Take(&ln1_rstd, "ln1_rstd", {n});
    arena->Take(&ln1_out, "ln1_out", {n, h});
    arena->Take(&w_qkv, "w_qkv", {x.qkv(), h});
    arena->Take(&qkv, "qkv", {n, x.qkv()});
    arena->Take(&q_rot, "q_rot", {n, x.ad()});
    arena->Take(&k_rot, "k_rot", {n, x.kd()});
    arena->Take(&ctx, "context", {n, x.ad()});
    arena->Take(&lse, "lse", {n, x.a});
    arena->Take(&w_proj, "w_proj", {h, x.ad()});
    arena->Take(&proj_out, "proj_out", {n, h});
    arena->Take(&h1, "h1", {n, h});
    arena->Take(&d_h1, "d_h1", {n, h});
    arena->Take(&d_ctx, "d_context", {n, x.ad()});
    arena->Take(&delta, "delta", {n, x.a});
    arena->Take(&dq_accum, "dq_accum", {n, x.ad()});
    arena->Take(&dq, "dq", {n, x.ad()});
    arena->Take(&dk, "dk", {n, x.kd()});
    arena->Take(&d_qkv, "d_qkv", {n, x.qkv()});
    arena->Take(&d_ln1, "d_ln1", {n, h});
    arena->Take(&dx_ln1, "dx_ln1", {n, h});
    arena->Take(&dw_qkv, "dw_qkv", {x.qkv(), h});
    arena->Take(&dw_proj, "dw_proj", {h, x.ad()});
    arena->Take(&d_ln1_gamma, "d_ln1_gamma", {h});

    arena->Take(&ln2_gamma, "ln2_gamma", {h});
    arena->Take(&ln2_rstd, "ln2_rstd", {n});
    arena->Take(&ln2_out, "ln2_out", {n, h});
    arena->Take(&w_fc1, "w_fc1", {2 * x.f, h});
    arena->Take(&fc1_out, "fc1_out", {n, 2 * x.f});
    arena->Take(&act, "swiglu_out", {n, x.f});
    arena->Take(&w_fc2, "w_fc2", {h, x.f});
    arena->Take(&fc2_out, "fc2_out", {n, h});
    arena->Take(&h2, "h2", {n, h});
    arena->Take(&d_h2, "d_h2", {n, h});
    arena->Take(&d_act, "d_swiglu_out", {n, x.f});
    arena->Take(&d_fc1, "d_fc1", {n, 2 * x.f});
    arena->Take(&d_ln2, "d_ln2", {n, h});
    arena->Take(&dx_ln2, "dx_ln2", {n, h});
    arena->Take(&dw_fc1, "dw_fc1", {2 * x.f, h});
    arena->Take(&dw_fc2, "dw_fc2", {h, x.f});
    arena->Take(&d_ln2_gamma, "d_ln2_gamma", {h});

    arena->Take(&lnf_gamma, "lnf_gamma", {h});
    arena->Take(&lnf_rstd, "lnf_rstd", {n});
    arena->Take(&lnf_out, "lnf_out", {n, h});
    arena->Take(&w_out, "w_out", {x.v, h});
    arena->Take(&logits, "logits", {n, x.v});
    arena->Take(&d_logits, "d_logits", {n, x.v});
    arena->Take(&d_lnf, "d_lnf", {n, h});
    arena->Take(&dw_out, "dw_out", {x.v, h});
    arena->Take(&d_lnf_gamma, "d_lnf_gamma", {h});
    arena->Take(&logits32, "logits_fp32", {n, x.v});
    arena->Take(&grad32, "logit_grad_fp32", {n, x.v});
    arena->Take(&row_max, "row_max", {n});
    arena->Take(&sum_exp, "sum_exp", {n});
    arena->Take(&predicted, "predicted_logit", {n});
    arena->Take(&loss, "loss", {n});

    LayoutOptimizerFp8Workspace(x, arena, this);
  }
};

}  // namespace vtrain::gpu::internal

#endif  // VTRAIN_PROFILER_AGENT_GPU_LLAMA_BUFFERS_H_
