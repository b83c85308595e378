#include "core/profile/llama_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/profile/moe_kernels.h"

namespace vtrain::internal {
namespace {

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
// embedding on Q and K, the attention core (causal FlashAttention reading K/V
// once per group of heads, unless the key asks for the unfused core),
// output projection, residual add. No biases; dropout is 0 in Llama recipes
// and launches nothing.
void AttentionForward(KernelSequence& seq, Fp8Linear fp8, const Shape& x, const OperatorKey& key) {
  const double e = kElem;
  const bool unfused = key.attention_impl == AttentionImpl::kUnfused;
  // Selective recomputation re-runs the attention core alone.
  if (key.attention_core_only) {
    AttentionCoreForward(seq, key, /*dropout=*/false);
    return;
  }
  seq.Memory("rmsnorm_fwd", x.norm_tokens * x.h * 2 * e);
  LinearForward(seq, fp8, "gemm_qkv_fwd", x.tokens, x.qkv_width(), x.h);
  seq.Memory("rotary_q_fwd", 2 * x.q_bytes());
  seq.Memory("rotary_k_fwd", 2 * x.kv_bytes());
  AttentionCoreForward(seq, key, /*dropout=*/false);
  // The unfused core's [b * heads, s, d] output back to [s, b, heads * d].
  if (unfused) seq.Memory("context_transpose_copy", 2 * x.q_bytes());
  LinearForward(seq, fp8, "gemm_projection_fwd", x.tokens, x.h, x.heads_local * x.d);
  seq.Memory("residual_add_fwd", x.norm_tokens * x.h * 3 * e);
  Fp8ScaleUpdate(seq, fp8);
}

void AttentionBackward(KernelSequence& seq, Fp8Linear fp8, const Shape& x, const OperatorKey& key) {
  const double e = kElem;
  LinearBackward(seq, fp8, "gemm_projection_dgrad", "gemm_projection_wgrad", x.tokens, x.h,
                 x.heads_local * x.d);
  if (key.attention_impl == AttentionImpl::kUnfused) {
    seq.Memory("context_transpose_copy_bwd", 2 * x.q_bytes());
  }
  AttentionCoreBackward(seq, key, /*dropout=*/false);
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
void MlpForward(KernelSequence& seq, Fp8Linear fp8, const Shape& x) {
  const double e = kElem;
  seq.Memory("rmsnorm_fwd", x.norm_tokens * x.h * 2 * e);
  LinearForward(seq, fp8, "gemm_fc1_gate_up_fwd", x.tokens, 2 * x.ffn_local, x.h);
  seq.Memory("swiglu_fwd", x.tokens * x.ffn_local * 3 * e);
  LinearForward(seq, fp8, "gemm_fc2_fwd", x.tokens, x.h, x.ffn_local);
  seq.Memory("residual_add_fwd", x.norm_tokens * x.h * 3 * e);
  Fp8ScaleUpdate(seq, fp8);
}

void MlpBackward(KernelSequence& seq, Fp8Linear fp8, const Shape& x) {
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

double FlashAttentionEfficiency(double key_len, double head_dim, bool backward) {
  // Anchored at s = 4096, head dimension 128 (see the header).
  constexpr double kForwardAt4K = 0.60, kBackwardAt4K = 0.45;
  auto length = [](double keys) {
    const double n = std::max(keys, 1.0) / 128;  // key blocks of 128
    return n / (n + 4);
  };
  const double width = std::min(1.1, 1.25 * head_dim / (std::max(head_dim, 1.0) + 32));
  const double at4k = backward ? kBackwardAt4K : kForwardAt4K;
  return at4k * width * length(key_len) / length(4096);
}

double FlashAttentionEfficiency(const OperatorKey& key, double head_dim, bool backward) {
  const double c = static_cast<double>(std::max<int64_t>(1, key.context_parallel));
  return FlashAttentionEfficiency(static_cast<double>(key.seq) / c, head_dim, backward);
}

void AttentionCoreForward(KernelSequence& seq, const OperatorKey& key, bool dropout) {
  const Shape x(key);
  const double e = kElem;
  if (key.attention_impl == AttentionImpl::kFlash) {
    const double lse = x.tokens * x.heads_local * 4;  // fp32 log-sum-exp per row
    seq.FusedTensorCore("flash_attention_fwd", FlashAttentionForwardFlops(key),
                        2 * x.q_bytes() + 2 * x.c * x.kv_bytes() + lse,
                        FlashAttentionEfficiency(key, x.d, /*backward=*/false));
    return;
  }
  // Per sequence: s / c queries against all s keys, every score written.
  const double sq = x.s / x.c, batch_heads = x.b * x.heads_local;
  const double scores = batch_heads * sq * x.s;
  if (x.kv_local < x.heads_local) {
    seq.Memory("gqa_kv_repeat",
               2 * (x.c * x.kv_bytes() + x.c * x.kv_bytes() * x.heads_local / x.kv_local));
  }
  seq.Gemm("bgemm_attention_scores_fwd", sq, x.s, x.d, batch_heads);
  seq.Memory("scaled_masked_softmax_fwd", scores * 2 * e);
  if (dropout) seq.Memory("attention_dropout_fwd", scores * (2 * e + 1));
  seq.Gemm("bgemm_attention_context_fwd", sq, x.d, x.s, batch_heads);
}

void AttentionCoreBackward(KernelSequence& seq, const OperatorKey& key, bool dropout) {
  const Shape x(key);
  const double e = kElem;
  if (key.attention_impl == AttentionImpl::kFlash) {
    // FlashAttention-2's backward: D = rowsum(dO * O), then the main kernel
    // (reads Q, K, V, dO, LSE and D; writes dK and dV; accumulates dQ in
    // fp32), then dQ back to 16 bits.
    const double rows = x.tokens * x.heads_local;
    const double dq_fp32 = x.q_bytes() / e * 4;
    seq.Memory("flash_attention_bwd_preprocess", 2 * x.q_bytes() + rows * 4);
    seq.FusedTensorCore("flash_attention_bwd", FlashAttentionBackwardFlops(key),
                        2 * x.q_bytes() + 4 * x.kv_bytes() + 2 * dq_fp32 + rows * 8,
                        FlashAttentionEfficiency(key, x.d, /*backward=*/true));
    seq.Memory("flash_attention_bwd_dq_convert", dq_fp32 + x.q_bytes());
    return;
  }
  const double sq = x.s / x.c, batch_heads = x.b * x.heads_local;
  const double scores = batch_heads * sq * x.s;
  seq.Gemm("bgemm_context_dgrad_probs", sq, x.s, x.d, batch_heads);
  seq.Gemm("bgemm_context_dgrad_values", x.s, x.d, sq, batch_heads);
  if (dropout) seq.Memory("attention_dropout_bwd", scores * (2 * e + 1));
  seq.Memory("scaled_masked_softmax_bwd", scores * 3 * e);
  seq.Gemm("bgemm_scores_dgrad_query", sq, x.d, x.s, batch_heads);
  seq.Gemm("bgemm_scores_dgrad_key", x.s, x.d, sq, batch_heads);
  if (x.kv_local < x.heads_local) {
    // The repeated keys' and values' gradients summed back per group.
    seq.Memory("gqa_kv_grad_reduce",
               2 * (x.c * x.kv_bytes() * x.heads_local / x.kv_local + x.c * x.kv_bytes()));
  }
}

void Fp8Cast(KernelSequence& seq, Fp8Linear fp8, const char* name, double elements) {
  // Current scaling reads the tensor once for its amax before casting.
  if (fp8.recipe == Fp8Recipe::kCurrent) seq.Memory("fp8_amax", elements * kElem);
  // Reads 16-bit x; writes fp8 x and x^T, and their scales.
  double scales = 0;
  if (fp8.recipe == Fp8Recipe::kBlockwise) scales = 2 * 4.0 / 128;  // fp32 per 1x128 block
  if (fp8.recipe == Fp8Recipe::kMxfp8) scales = 2 * 1.0 / 32;       // E8M0 per 1x32 block
  seq.Memory(name, elements * (kElem + 2 + scales));
}

void Fp8Gemm(KernelSequence& seq, Fp8Linear fp8, const char* name, double m, double n, double k,
             double batch) {
  seq.GemmFp8(name, m, n, k, batch,
              fp8.recipe == Fp8Recipe::kBlockwise ? kBlockwiseGemmEfficiency : 1.0);
}

void LinearForward(KernelSequence& seq, Fp8Linear fp8, const char* gemm, double tokens, double n,
                   double k) {
  if (!fp8) {
    seq.Gemm(gemm, tokens, n, k);
    return;
  }
  Fp8Cast(seq, fp8, "fp8_cast_transpose", tokens * k);
  Fp8Gemm(seq, fp8, gemm, tokens, n, k);
}

void LinearBackward(KernelSequence& seq, Fp8Linear fp8, const char* dgrad, const char* wgrad,
                    double tokens, double n, double k) {
  if (!fp8) {
    seq.Gemm(dgrad, tokens, k, n);
    seq.Gemm(wgrad, n, k, tokens);
    return;
  }
  Fp8Cast(seq, fp8, "fp8_cast_transpose_grad", tokens * n);
  Fp8Gemm(seq, fp8, dgrad, tokens, k, n);
  Fp8Gemm(seq, fp8, wgrad, n, k, tokens);
}

void Fp8ScaleUpdate(KernelSequence& seq, Fp8Linear fp8) {
  // A few KB of amax history and scales: the minimum kernel time.
  if (fp8 && fp8.recipe == Fp8Recipe::kDelayed) seq.Memory("fp8_amax_scale_update", 4096);
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
  const Fp8Linear fp8 = Fp8Of(key);
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
