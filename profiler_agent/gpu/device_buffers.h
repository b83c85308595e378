// The device buffers of one layer workload: per-rank dimensions of a shape,
// every buffer the operators use with its size and initial values, and the
// arena that allocates them (or only adds up their sizes).
#ifndef VTRAIN_PROFILER_AGENT_GPU_DEVICE_BUFFERS_H_
#define VTRAIN_PROFILER_AGENT_GPU_DEVICE_BUFFERS_H_

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "profiler_agent/gpu/cuda_util.h"
#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/llama_plan.h"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu::internal {

// No single buffer, and no workload, may need more than this (1 PiB): far
// beyond any GPU, and small enough that every size fits in int64 and
// double exactly.
constexpr double kMaxBytes = 1125899906842624.0;

// Transformer Engine's delayed-scaling amax history (NeMo's Llama recipes
// use 1024 steps with the "max" algorithm).
constexpr int64_t kAmaxHistory = 1024;
// fp8 tensors per linear layer: its input, its weight, its output gradient.
constexpr int64_t kFp8TensorsPerLinear = 3;
constexpr int64_t kFp8Tensors = kNumFp8Linears * kFp8TensorsPerLinear;

// The fp8 copies of one linear layer (uint8_t storage; E4M3 for x and w,
// E5M2 for dy): the input and its transpose, the weight and its transpose
// (cast once at start-up, as Transformer Engine caches them across
// micro-batches), the output gradient and its transpose.
struct Fp8Linear {
  uint8_t* x;     // [n, in]
  uint8_t* x_t;   // [in, n]
  uint8_t* w;     // [out, in]
  uint8_t* w_t;   // [in, out]
  uint8_t* dy;    // [n, out]
  uint8_t* dy_t;  // [out, n]
};

// Lays out the fp8 state of buffers `b` (members fp8[], amax_history, scale,
// scale_inv) for dimensions `x` (n tokens, in(l)/out(l) features of linear
// layer l, fp8): nothing unless x.fp8.
template <class X, class B, class Arena>
void LayoutFp8(const X& x, Arena* arena, B* b) {
  b->amax_history = b->scale = b->scale_inv = nullptr;
  for (Fp8Linear& f : b->fp8) f = Fp8Linear{};
  if (!x.fp8) return;
  for (int l = 0; l < kNumFp8Linears; ++l) {
    Fp8Linear& f = b->fp8[l];
    arena->Take(&f.x, "fp8_x", {x.n, x.in(l)});
    arena->Take(&f.x_t, "fp8_x_t", {x.in(l), x.n});
    arena->Take(&f.w, "fp8_w", {x.out(l), x.in(l)});
    arena->Take(&f.w_t, "fp8_w_t", {x.in(l), x.out(l)});
    arena->Take(&f.dy, "fp8_dy", {x.n, x.out(l)});
    arena->Take(&f.dy_t, "fp8_dy_t", {x.out(l), x.n});
  }
  arena->Take(&b->amax_history, "fp8_amax_history", {kAmaxHistory, kFp8Tensors});
  arena->Take(&b->scale, "fp8_scale", {kFp8Tensors});
  arena->Take(&b->scale_inv, "fp8_scale_inv", {kFp8Tensors});
}

// Lays out what every workload's buffers end with: the optimizer state of
// x.adam parameters (nothing when 0), the fp8 state (LayoutFp8) and the
// cuBLASLt workspace, in that order.
template <class X, class B, class Arena>
void LayoutOptimizerFp8Workspace(const X& x, Arena* arena, B* b) {
  b->master = b->exp_avg = b->exp_avg_sq = b->adam_scalars = nullptr;
  b->adam_grad = nullptr;
  b->adam_param = nullptr;
  if (x.adam > 0) {
    arena->Take(&b->master, "adam_master", {x.adam});
    arena->Take(&b->exp_avg, "adam_exp_avg", {x.adam});
    arena->Take(&b->exp_avg_sq, "adam_exp_avg_sq", {x.adam});
    arena->Take(&b->adam_grad, "adam_grad", {x.adam});
    arena->Take(&b->adam_param, "adam_param", {x.adam});
    arena->Take(&b->adam_scalars, "adam_scalars", {2});
  }
  LayoutFp8(x, arena, b);
  unsigned char* ws = nullptr;
  arena->Take(&ws, "cublaslt_workspace", {static_cast<int64_t>(kWorkspaceBytes)});
  b->workspace = ws;
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
  bool fp8 = false;   // QKV, projection, FC1 and FC2 in fp8

  int64_t ad() const { return a * d; }       // attention width on this rank (h / t)
  int64_t qkv() const { return 3 * a * d; }  // QKV GEMM output width
  int64_t bh() const { return b * a; }       // attention batch count
  // Input and output features of each fp8 linear layer (a Linear below
  // kNumFp8Linears: QKV, projection, FC1, FC2).
  int64_t in(int l) const {
    const int64_t v_in[] = {h, ad(), h, f};
    return v_in[l];
  }
  int64_t out(int l) const {
    const int64_t v_out[] = {qkv(), h, f, h};
    return v_out[l];
  }
};

// The dimensions of `shape` on one rank; `shape` must be valid
// (ValidateShape).
Dims MakeDims(const LayerShape& shape);

// Device allocations, or (allocate == false) only their sizes, so that
// WorkloadBytes and Create cannot disagree. Sizes go through double so no
// product of dimensions can overflow.
class DeviceArena {
 public:
  explicit DeviceArena(bool allocate) : allocate_(allocate) {}
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena();

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

  // Frees every allocation (also done by the destructor).
  void Release();

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
  // fp8 (null unless fp8; llama_buffers.h's LlamaBuffers has the same).
  Fp8Linear fp8[kNumFp8Linears];
  float* amax_history;
  float* scale;
  float* scale_inv;
  // cuBLASLt.
  void* workspace;

  // The 16-bit weight of an fp8 Linear.
  T* weight(int l) const {
    T* const w[] = {w_qkv, w_proj, w_fc1, w_fc2};
    return w[l];
  }

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

    LayoutOptimizerFp8Workspace(x, arena, this);
  }
};

// The first values of one buffer of n elements: uniform in
// [offset - scale, offset + scale) (a constant when scale is 0).
template <class P>
struct BufferInit {
  P* p;
  int64_t n;
  float offset;
  float scale;
};

// Small values (weights like Megatron's init_method_std = 0.02), layer-norm
// gains near 1. In the order Create fills them: each fill takes the next
// random seed.
template <class T>
std::vector<BufferInit<T>> HalfBufferInits(const Dims& x, const Buffers<T>& b) {
  const int64_t n = x.n;
  const int64_t h = x.h;
  const int64_t sc = x.bh() * x.s * x.s;
  const float w = 0.02f;
  return {
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
}

// The fp32 buffers: gradient accumulators at 0, saved statistics at
// harmless values.
template <class T>
std::vector<BufferInit<float>> FloatBufferInits(const Dims& x, const Buffers<T>& b) {
  const int64_t n = x.n;
  const int64_t h = x.h;
  return {
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
}

}  // namespace vtrain::gpu::internal

#endif  // VTRAIN_PROFILER_AGENT_GPU_DEVICE_BUFFERS_H_
