#include "core/profile/llama_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/profile/moe_kernels.h"

namespace vtrain::internal {
namespace {

constexpr double kElem = 2;  // bf16 / fp16 bytes per element

// The shape of one Llama operator on one GPU.
struct Shape {
  // c: context-parallel ranks (a rank holds s / c of the sequence, its
  // queries, and attends to all s keys); norm_tokens: the tokens layer norms
  // and residual adds run on, tokens / t with sequence parallelism
  // (Korthikanti et al. 2022, §4.2.2).
  double t, h, s, b, c, tokens, norm_tokens, d, heads_local, kv_local, ffn_local, vocab_local;

  explicit Shape(const OperatorKey& key)
      : t(static_cast<double>(key.tensor_parallel)),
        h(static_cast<double>(key.hidden)),
        s(static_cast<double>(key.seq)),
        b(static_cast<double>(key.micro_batch)),
        c(static_cast<double>(std::max<int64_t>(1, key.context_parallel))),
        tokens(b * s / c),
        norm_tokens(key.sequence_parallel ? tokens / t : tokens),
        d(key.head_dim > 0 ? static_cast<double>(key.head_dim)
          : key.heads > 0  ? h / static_cast<double>(key.heads)
                           : 0),
        heads_local(static_cast<double>(key.heads) / t),
        kv_local(static_cast<double>(key.kv_heads > 0 ? key.kv_heads : key.heads) / t),
        ffn_local(static_cast<double>(key.ffn) / t),
        vocab_local(std::ceil(static_cast<double>(key.vocab) / t)) {}
  double q_bytes() const { return tokens * heads_local * d * kElem; }  // Q, O, dO or dQ
  double kv_bytes() const { return tokens * kv_local * d * kElem; }    // K, V, dK or dV
  double qkv_width() const { return (heads_local + 2 * kv_local) * d; }
};

// Megatron-Core's attention block with Transformer Engine (Llama recipe):
// RMSNorm, fused QKV GEMM of (heads + 2 kv_heads) * head_dim columns, rotary
// embedding on Q and K, causal FlashAttention reading K/V once per group of
// heads (grouped-query attention), output projection, residual add. No
// biases; dropout is 0 in Llama recipes and launches nothing.
void AttentionForward(KernelSequence& seq, bool fp8, const Shape& x, const OperatorKey& key) {
  const double e = kElem;
  const double lse = x.tokens * x.heads_local * 4;  // fp32 log-sum-exp per row
  // Selective recomputation re-runs the attention core alone.
  if (key.attention_core_only) {
    seq.FusedTensorCore("flash_attention_fwd", FlashAttentionForwardFlops(key),
                        2 * x.q_bytes() + 2 * x.c * x.kv_bytes() + lse, kFlashForwardEfficiency);
    return;
  }
  seq.Memory("rmsnorm_fwd", x.norm_tokens * x.h * 2 * e);
  LinearForward(seq, fp8, "gemm_qkv_fwd", x.tokens, x.qkv_width(), x.h);
  seq.Memory("rotary_q_fwd", 2 * x.q_bytes());
  seq.Memory("rotary_k_fwd", 2 * x.kv_bytes());
  seq.FusedTensorCore("flash_attention_fwd", FlashAttentionForwardFlops(key),
                      2 * x.q_bytes() + 2 * x.c * x.kv_bytes() + lse, kFlashForwardEfficiency);
  LinearForward(seq, fp8, "gemm_projection_fwd", x.tokens, x.h, x.heads_local * x.d);
  seq.Memory("residual_add_fwd", x.norm_tokens * x.h * 3 * e);
  Fp8ScaleUpdate(seq, fp8);
}

void AttentionBackward(KernelSequence& seq, bool fp8, const Shape& x, const OperatorKey& key) {
  const double e = kElem;
  const double rows = x.tokens * x.heads_local;
  const double dq_fp32 = x.q_bytes() / e * 4;
  LinearBackward(seq, fp8, "gemm_projection_dgrad", "gemm_projection_wgrad", x.tokens, x.h,
                 x.heads_local * x.d);
  // FlashAttention-2's backward: D = rowsum(dO * O), then the main kernel
  // (reads Q, K, V, dO, LSE and D; writes dK and dV; accumulates dQ in
  // fp32), then dQ back to 16 bits.
  seq.Memory("flash_attention_bwd_preprocess", 2 * x.q_bytes() + rows * 4);
  seq.FusedTensorCore("flash_attention_bwd", FlashAttentionBackwardFlops(key),
                      2 * x.q_bytes() + 4 * x.kv_bytes() + 2 * dq_fp32 + rows * 8,
                      kFlashBackwardEfficiency);
  seq.Memory("flash_attention_bwd_dq_convert", dq_fp32 + x.q_bytes());
  seq.Memory("rotary_q_bwd", 2 * x.q_bytes());
  seq.Memory("rotary_k_bwd", 2 * x.kv_bytes());
  LinearBackward(seq, fp8, "gemm_qkv_dgrad", "gemm_qkv_wgrad", x.tokens, x.qkv_width(), x.h);
  seq.Memory("rmsnorm_bwd", x.norm_tokens * x.h * 4 * e);
  seq.Memory("residual_add_bwd", x.norm_tokens * x.h * 3 * e);
  Fp8ScaleUpdate(seq, fp8);
}

// The SwiGLU MLP as Megatron-Core runs it: the gate and up projections
// fused into one GEMM of 2 * ffn columns (--swiglu), SiLU(gate) * up in one
// element-wise kernel, the down projection, residual add.
void MlpForward(KernelSequence& seq, bool fp8, const Shape& x) {
  const double e = kElem;
  seq.Memory("rmsnorm_fwd", x.norm_tokens * x.h * 2 * e);
  LinearForward(seq, fp8, "gemm_fc1_gate_up_fwd", x.tokens, 2 * x.ffn_local, x.h);
  seq.Memory("swiglu_fwd", x.tokens * x.ffn_local * 3 * e);
  LinearForward(seq, fp8, "gemm_fc2_fwd", x.tokens, x.h, x.ffn_local);
  seq.Memory("residual_add_fwd", x.norm_tokens * x.h * 3 * e);
  Fp8ScaleUpdate(seq, fp8);
}

void MlpBackward(KernelSequence& seq, bool fp8, const Shape& x) {
  const double e = kElem;
  LinearBackward(seq, fp8, "gemm_fc2_dgrad", "gemm_fc2_wgrad", x.tokens, x.h, x.ffn_local);
  // Reads gate, up and the output gradient; writes both input gradients.
  seq.Memory("swiglu_bwd", x.tokens * x.ffn_local * 5 * e);
  LinearBackward(seq, fp8, "gemm_fc1_dgrad", "gemm_fc1_wgrad", x.tokens, 2 * x.ffn_local, x.h);
  seq.Memory("rmsnorm_bwd", x.norm_tokens * x.h * 4 * e);
  seq.Memory("residual_add_bwd", x.norm_tokens * x.h * 3 * e);
  Fp8ScaleUpdate(seq, fp8);
}

}  // namespace

void LinearForward(KernelSequence& seq, bool fp8, const char* gemm, double tokens, double n,
                   double k) {
  if (!fp8) {
    seq.Gemm(gemm, tokens, n, k);
    return;
  }
  // Reads 16-bit x, writes fp8 x and fp8 x^T (te cast_transpose).
  seq.Memory("fp8_cast_transpose", tokens * k * (kElem + 2));
  seq.GemmFp8(gemm, tokens, n, k);
}

void LinearBackward(KernelSequence& seq, bool fp8, const char* dgrad, const char* wgrad,
                    double tokens, double n, double k) {
  if (!fp8) {
    seq.Gemm(dgrad, tokens, k, n);
    seq.Gemm(wgrad, n, k, tokens);
    return;
  }
  seq.Memory("fp8_cast_transpose_grad", tokens * n * (kElem + 2));
  seq.GemmFp8(dgrad, tokens, k, n);
  seq.GemmFp8(wgrad, n, k, tokens);
}

void Fp8ScaleUpdate(KernelSequence& seq, bool fp8) {
  // A few KB of amax history and scales: the minimum kernel time.
  if (fp8) seq.Memory("fp8_amax_scale_update", 4096);
}

double FlashAttentionForwardFlops(const OperatorKey& key) {
  const Shape x(key);
  // Causal: half of QK^T and PV; with context parallelism each rank's
  // s / c queries (load-balanced chunks) against all s keys.
  return 2 * (x.s / x.c) * x.s * x.d * x.b * x.heads_local;
}

double FlashAttentionBackwardFlops(const OperatorKey& key) {
  const Shape x(key);
  return 5 * (x.s / x.c) * x.s * x.d * x.b * x.heads_local;
}

std::vector<KernelRecord> GenerateLlamaKernels(const GpuSpec& gpu, const OperatorKey& key,
                                               const AnalyticalParams& params) {
  KernelSequence seq(gpu, ComputeDType(key.dtype), params);
  const bool fp8 = key.dtype == DType::kFp8;
  const Shape x(key);
  const double e = kElem;
  const bool mla = key.mla_kv_lora > 0;
  switch (key.op) {
    case OperatorKind::kMoeFwd:
    case OperatorKind::kMoeBwd:
      MoeKernels(seq, key);
      break;
    case OperatorKind::kAttentionFwd:
      if (mla) {
        MlaKernels(seq, key);
        break;
      }
      AttentionForward(seq, fp8, x, key);
      break;
    case OperatorKind::kAttentionBwd:
      if (mla) {
        MlaKernels(seq, key);
        break;
      }
      AttentionBackward(seq, fp8, x, key);
      break;
    case OperatorKind::kMlpFwd:
      MlpForward(seq, fp8, x);
      break;
    case OperatorKind::kMlpBwd:
      MlpBackward(seq, fp8, x);
      break;
    case OperatorKind::kEmbeddingFwd:
      // Vocabulary-parallel lookup of the padded vocabulary; rotary
      // embeddings need no position table.
      seq.Memory("vocab_range_mask", x.tokens * 8 * 3);
      seq.Memory("word_embedding_gather", x.tokens * x.h * 2 * e);
      break;
    case OperatorKind::kEmbeddingBwd:
      seq.Memory("word_embedding_dense_bwd", x.tokens * x.h * 2 * e + x.tokens * 8);
      seq.Memory("word_embedding_grad_accumulate", x.vocab_local * x.h * (e + 8));
      break;
    case OperatorKind::kLogitFwd:
      // The untied output layer stays in 16 bits under fp8 (Megatron keeps
      // the output layer out of Transformer Engine's fp8 autocast).
      seq.Memory("final_rmsnorm_fwd", x.norm_tokens * x.h * 2 * e);
      seq.Gemm("gemm_logit_fwd", x.tokens, x.vocab_local, x.h);
      break;
    case OperatorKind::kLogitBwd:
      seq.Gemm("gemm_logit_dgrad", x.tokens, x.h, x.vocab_local);
      seq.Gemm("gemm_logit_wgrad", x.vocab_local, x.h, x.tokens);
      seq.Memory("final_rmsnorm_bwd", x.norm_tokens * x.h * 4 * e);
      break;
    case OperatorKind::kLossFwd:
    case OperatorKind::kLossBwd:
    case OperatorKind::kOptimizerStep:
      break;  // shared with GPT: GenerateOperatorKernels never sends them here
  }
  return std::move(seq).Finish();
}

}  // namespace vtrain::internal
