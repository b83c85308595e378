#include "core/profile/moe_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/strings/match.h"
#include "core/profile/llama_kernels.h"

namespace vtrain::internal {
namespace {

// One expert's rows in its GEMMs: the expected count, a fraction under
// uneven routing, taken to the next multiple of 8. A dropless expert's token
// count is whatever the router gives it, and its GEMMs run on tensor cores
// regardless: cuBLAS needs the leading dimensions aligned (the hidden and
// FFN widths), not the row count, so the calibrated misaligned-GEMM factor
// (an odd vocabulary's) does not apply to it.
double ExpertRows(double rows) { return std::ceil(rows / 8) * 8; }

// The sizes of one MoE block on one rank.
struct MoeShape {
  double t, h, tokens, copies, local_experts, per_expert, expert_ffn, shared_tokens, shared_local;
  int64_t experts;

  explicit MoeShape(const OperatorKey& key)
      : t(static_cast<double>(key.tensor_parallel)),
        h(static_cast<double>(key.hidden)),
        tokens(MoeRoutedTokens(key)),
        copies(MoeBusiestRankCopies(key)),
        local_experts(static_cast<double>(key.experts) /
                      static_cast<double>(std::max<int64_t>(1, key.expert_parallel))),
        per_expert(ExpertRows(copies / std::max(1.0, local_experts))),
        expert_ffn(static_cast<double>(key.ffn) /
                   static_cast<double>(std::max<int64_t>(1, key.expert_tensor_parallel))),
        // The shared experts are a tensor-parallel MLP: under sequence
        // parallelism on the tokens gathered over t.
        shared_tokens(key.sequence_parallel ? tokens * t : tokens),
        shared_local(static_cast<double>(key.shared_ffn) / t),
        experts(key.experts) {}
};

// Transformer Engine's grouped GEMM runs one cuBLAS GEMM per expert,
// round-robin over its compute streams (transformer_engine/common/gemm/
// cublaslt_gemm.cu, multi_stream_cublas_gemm; get_num_compute_streams()
// returns 4). Its CUTLASS grouped kernel is opt-in
// (NVTE_USE_CUTLASS_GROUPED_GEMM) and not modelled.
constexpr double kGroupedGemmStreams = 4;

// `groups` GEMMs of m x n x k as Transformer Engine's grouped GEMM runs them.
void GroupedGemm(KernelSequence& seq, Fp8Linear fp8, const char* name, double groups, double m,
                 double n, double k) {
  const double fp8_rate =
      !fp8 ? 0 : (fp8.recipe == Fp8Recipe::kBlockwise ? kBlockwiseGemmEfficiency : 1.0);
  seq.GemmsOnStreams(name, m, n, k, groups, kGroupedGemmStreams, fp8_rate);
}

// A grouped linear layer (Transformer Engine's GroupedLinear): `groups`
// GEMMs of m x n x k; with fp8 the input's cast first.
void GroupedForward(KernelSequence& seq, Fp8Linear fp8, const char* name, double groups, double m,
                    double n, double k) {
  if (fp8) Fp8Cast(seq, fp8, "fp8_cast_transpose", groups * m * k);
  GroupedGemm(seq, fp8, name, groups, m, n, k);
}

void GroupedBackward(KernelSequence& seq, Fp8Linear fp8, const char* dgrad, const char* wgrad,
                     double groups, double m, double n, double k) {
  if (fp8) Fp8Cast(seq, fp8, "fp8_cast_transpose_grad", groups * m * n);
  GroupedGemm(seq, fp8, dgrad, groups, m, k, n);
  GroupedGemm(seq, fp8, wgrad, groups, n, k, m);
}

// The small kernels around the router and the dispatch that Megatron-Core
// launches with --moe-router-fusion and --moe-permute-fusion (as the
// recipes set them), counted from megatron/core/transformer/moe/
// {router,moe_utils,token_dispatcher}.py (Megatron-LM d98e8a6): forward,
// the auxiliary loss (6: its fused score and loss kernels, the per-expert
// token sum, the scaling), the dispatch preprocessing (6 small kernels for
// the per-expert and per-rank counts and 2 device-to-host copies) and the
// fused permutation's 3 row-map kernels; backward, the auxiliary loss's 5,
// the router's 4 fp32 casts and 2 for the probabilities' gradient. Each
// costs the GPU little and the host a dispatch: they make a small MoE
// layer host-bound. With the dispatchers' own kernels (in the exchange)
// this gives the 2L + 24 forward and 4L + 19..22 backward kernels a
// Megatron-Core MoE layer launches with L local experts.
void RouterSmallKernels(KernelSequence& seq, const MoeShape& x, bool backward) {
  const double experts = static_cast<double>(x.experts);
  // The sizes the GPU agent's workload gives the same kernels
  // (profiler_agent/gpu/moe_plan.h, MoeSmallKernelBytes).
  const double counts = experts * 8 * std::max(1.0, x.local_experts);
  const double routing_map = x.tokens * experts, probs = 4 * routing_map;
  if (!backward) {
    seq.Memory("router_aux_loss_fwd", probs);
    for (int i = 0; i < 5; ++i) seq.Memory("router_aux_loss_fwd", counts);
    for (int i = 0; i < 8; ++i) seq.Memory("moe_dispatch_preprocess", counts);
    for (int i = 0; i < 3; ++i) seq.Memory("moe_permute_row_map_fwd", routing_map);
    return;
  }
  seq.Memory("router_aux_loss_bwd", probs);
  for (int i = 0; i < 4; ++i) seq.Memory("router_aux_loss_bwd", counts);
  for (int i = 0; i < 4; ++i) seq.Memory("router_fp32_cast_bwd", 6 * routing_map);
  for (int i = 0; i < 2; ++i) seq.Memory("router_probs_grad_bwd", probs);
}

void MoeForward(KernelSequence& seq, Fp8Linear fp8, const MoeShape& x, const OperatorKey& key) {
  const double e = kElem;
  const double experts = static_cast<double>(x.experts);
  const double k = static_cast<double>(key.top_k);
  seq.Memory("rmsnorm_fwd", x.tokens * x.h * 2 * e);
  // Megatron keeps the router out of fp8.
  seq.Gemm("gemm_router_fwd", x.tokens, experts, x.h);
  seq.Memory("router_topk_fwd", x.tokens * experts * 8 + x.tokens * k * 8);
  RouterSmallKernels(seq, x, /*backward=*/false);
  seq.Memory("moe_permute_fwd", 2 * x.tokens * k * x.h * e);
  GroupedForward(seq, fp8, "grouped_gemm_fc1_fwd", x.local_experts, x.per_expert, 2 * x.expert_ffn,
                 x.h);
  seq.Memory("swiglu_fwd", x.copies * x.expert_ffn * 3 * e);
  GroupedForward(seq, fp8, "grouped_gemm_fc2_fwd", x.local_experts, x.per_expert, x.h,
                 x.expert_ffn);
  seq.Memory("moe_unpermute_fwd", 2 * x.tokens * k * x.h * e + x.tokens * k * 4);
  if (x.shared_local > 0) {
    LinearForward(seq, fp8, "gemm_shared_fc1_fwd", x.shared_tokens, 2 * x.shared_local, x.h);
    seq.Memory("swiglu_fwd", x.shared_tokens * x.shared_local * 3 * e);
    LinearForward(seq, fp8, "gemm_shared_fc2_fwd", x.shared_tokens, x.h, x.shared_local);
  }
  seq.Memory("residual_add_fwd", x.tokens * x.h * 3 * e);
  Fp8ScaleUpdate(seq, fp8);
}

void MoeBackward(KernelSequence& seq, Fp8Linear fp8, const MoeShape& x, const OperatorKey& key) {
  const double e = kElem;
  const double experts = static_cast<double>(x.experts);
  const double k = static_cast<double>(key.top_k);
  if (x.shared_local > 0) {
    LinearBackward(seq, fp8, "gemm_shared_fc2_dgrad", "gemm_shared_fc2_wgrad", x.shared_tokens, x.h,
                   x.shared_local);
    seq.Memory("swiglu_bwd", x.shared_tokens * x.shared_local * 5 * e);
    LinearBackward(seq, fp8, "gemm_shared_fc1_dgrad", "gemm_shared_fc1_wgrad", x.shared_tokens,
                   2 * x.shared_local, x.h);
  }
  seq.Memory("moe_unpermute_bwd", 2 * x.tokens * k * x.h * e + x.tokens * k * 4);
  GroupedBackward(seq, fp8, "grouped_gemm_fc2_dgrad", "grouped_gemm_fc2_wgrad", x.local_experts,
                  x.per_expert, x.h, x.expert_ffn);
  seq.Memory("swiglu_bwd", x.copies * x.expert_ffn * 5 * e);
  GroupedBackward(seq, fp8, "grouped_gemm_fc1_dgrad", "grouped_gemm_fc1_wgrad", x.local_experts,
                  x.per_expert, 2 * x.expert_ffn, x.h);
  seq.Memory("moe_permute_bwd", 2 * x.tokens * k * x.h * e);
  seq.Memory("router_topk_bwd", x.tokens * experts * 8 + x.tokens * k * 8);
  RouterSmallKernels(seq, x, /*backward=*/true);
  seq.Gemm("gemm_router_dgrad", x.tokens, x.h, experts);
  seq.Gemm("gemm_router_wgrad", experts, x.h, x.tokens);
  seq.Memory("rmsnorm_bwd", x.tokens * x.h * 4 * e);
  seq.Memory("residual_add_bwd", x.tokens * x.h * 3 * e);
  Fp8ScaleUpdate(seq, fp8);
}

// The sizes of MLA on one rank.
struct MlaShape {
  double t, h, tokens, norm_tokens, c, heads_local, d, rope, v, q_lora, kv_lora;

  explicit MlaShape(const OperatorKey& key)
      : t(static_cast<double>(key.tensor_parallel)),
        h(static_cast<double>(key.hidden)),
        tokens(static_cast<double>(key.micro_batch) * static_cast<double>(key.seq) /
               static_cast<double>(std::max<int64_t>(1, key.context_parallel))),
        norm_tokens(key.sequence_parallel ? tokens / t : tokens),
        c(static_cast<double>(std::max<int64_t>(1, key.context_parallel))),
        heads_local(static_cast<double>(key.heads) / t),
        d(static_cast<double>(key.head_dim)),
        rope(static_cast<double>(key.mla_rope)),
        v(static_cast<double>(key.mla_v)),
        q_lora(static_cast<double>(key.mla_q_lora)),
        kv_lora(static_cast<double>(key.mla_kv_lora)) {}
  double qk_bytes() const { return tokens * heads_local * (d + rope) * kElem; }  // Q or K
  double v_bytes() const { return tokens * heads_local * v * kElem; }            // V, O or dO
  double lse_bytes() const { return tokens * heads_local * 4; }
};

void MlaCore(KernelSequence& seq, const MlaShape& x, const OperatorKey& key) {
  seq.FusedTensorCore("flash_attention_fwd", CausalAttentionFlops(key, x.d + x.rope, x.v, false),
                      x.qk_bytes() * (1 + x.c) + x.v_bytes() * (1 + x.c) + x.lse_bytes(),
                      FlashAttentionEfficiency(key, x.d + x.rope, /*backward=*/false));
}

void MlaForward(KernelSequence& seq, Fp8Linear fp8, const MlaShape& x, const OperatorKey& key) {
  const double e = kElem;
  if (key.attention_core_only) {
    MlaCore(seq, x, key);
    return;
  }
  const double q_width = x.heads_local * (x.d + x.rope);
  seq.Memory("rmsnorm_fwd", x.norm_tokens * x.h * 2 * e);
  if (x.q_lora > 0) {
    LinearForward(seq, fp8, "gemm_q_down_fwd", x.tokens, x.q_lora, x.h);
    seq.Memory("q_rmsnorm_fwd", x.tokens * x.q_lora * 2 * e);
    LinearForward(seq, fp8, "gemm_q_up_fwd", x.tokens, q_width, x.q_lora);
  } else {
    LinearForward(seq, fp8, "gemm_q_fwd", x.tokens, q_width, x.h);
  }
  LinearForward(seq, fp8, "gemm_kv_down_fwd", x.tokens, x.kv_lora + x.rope, x.h);
  seq.Memory("kv_rmsnorm_fwd", x.tokens * x.kv_lora * 2 * e);
  LinearForward(seq, fp8, "gemm_kv_up_fwd", x.tokens, x.heads_local * (x.d + x.v), x.kv_lora);
  seq.Memory("rotary_fwd", 2 * x.tokens * (x.heads_local + 1) * x.rope * e);
  seq.Memory("mla_qk_concat_fwd", 4 * x.qk_bytes());
  MlaCore(seq, x, key);
  LinearForward(seq, fp8, "gemm_projection_fwd", x.tokens, x.h, x.heads_local * x.v);
  seq.Memory("residual_add_fwd", x.norm_tokens * x.h * 3 * e);
  Fp8ScaleUpdate(seq, fp8);
}

void MlaBackward(KernelSequence& seq, Fp8Linear fp8, const MlaShape& x, const OperatorKey& key) {
  const double e = kElem;
  const double q_width = x.heads_local * (x.d + x.rope);
  LinearBackward(seq, fp8, "gemm_projection_dgrad", "gemm_projection_wgrad", x.tokens, x.h,
                 x.heads_local * x.v);
  const double rows = x.tokens * x.heads_local;
  seq.Memory("flash_attention_bwd_preprocess", 2 * x.v_bytes() + rows * 4);
  seq.FusedTensorCore("flash_attention_bwd", CausalAttentionFlops(key, x.d + x.rope, x.v, true),
                      4 * x.qk_bytes() + 4 * x.v_bytes() + 2 * x.qk_bytes() / e * 4 + rows * 8,
                      FlashAttentionEfficiency(key, x.d + x.rope, /*backward=*/true));
  seq.Memory("flash_attention_bwd_dq_convert", x.qk_bytes() / e * 4 + x.qk_bytes());
  seq.Memory("mla_qk_concat_bwd", 4 * x.qk_bytes());
  seq.Memory("rotary_bwd", 2 * x.tokens * (x.heads_local + 1) * x.rope * e);
  LinearBackward(seq, fp8, "gemm_kv_up_dgrad", "gemm_kv_up_wgrad", x.tokens,
                 x.heads_local * (x.d + x.v), x.kv_lora);
  seq.Memory("kv_rmsnorm_bwd", x.tokens * x.kv_lora * 4 * e);
  LinearBackward(seq, fp8, "gemm_kv_down_dgrad", "gemm_kv_down_wgrad", x.tokens, x.kv_lora + x.rope,
                 x.h);
  if (x.q_lora > 0) {
    LinearBackward(seq, fp8, "gemm_q_up_dgrad", "gemm_q_up_wgrad", x.tokens, q_width, x.q_lora);
    seq.Memory("q_rmsnorm_bwd", x.tokens * x.q_lora * 4 * e);
    LinearBackward(seq, fp8, "gemm_q_down_dgrad", "gemm_q_down_wgrad", x.tokens, x.q_lora, x.h);
  } else {
    LinearBackward(seq, fp8, "gemm_q_dgrad", "gemm_q_wgrad", x.tokens, q_width, x.h);
  }
  seq.Memory("rmsnorm_bwd", x.norm_tokens * x.h * 4 * e);
  seq.Memory("residual_add_bwd", x.norm_tokens * x.h * 3 * e);
  Fp8ScaleUpdate(seq, fp8);
}

}  // namespace

std::vector<KernelRecord> RecomputedKernels(const OperatorProfile& forward, RecomputedPart part) {
  const std::vector<KernelRecord>& kernels = forward.kernels;
  if (part == RecomputedPart::kSharedExperts) {
    size_t first = kernels.size(), last = 0;
    for (size_t i = 0; i < kernels.size(); ++i) {
      if (first == kernels.size() && absl::StrContains(kernels[i].name, "shared_fc1_fwd")) {
        first = i;
      }
      if (absl::StrContains(kernels[i].name, "shared_fc2_fwd")) last = i;
    }
    if (first > last) return {};
    if (first > 0 && absl::StrContains(kernels[first - 1].name, "fp8_cast")) --first;
    return {kernels.begin() + static_cast<std::ptrdiff_t>(first),
            kernels.begin() + static_cast<std::ptrdiff_t>(last) + 1};
  }
  std::vector<KernelRecord> out;
  for (const KernelRecord& k : forward.kernels) {
    switch (part) {
      case RecomputedPart::kMlaUpProjection:
        if (absl::StrContains(k.name, "_up_fwd") || absl::StrContains(k.name, "rotary_fwd") ||
            absl::StrContains(k.name, "qk_concat_fwd")) {
          out.push_back(k);
        }
        break;
      case RecomputedPart::kNorm:
        // The first: MLA's q_ and kv_rmsnorm_fwd come after its input norm.
        if (absl::StrContains(k.name, "rmsnorm_fwd") ||
            absl::StrContains(k.name, "layernorm_fwd") ||
            absl::StrContains(k.name, "layer_norm_fwd")) {
          return {k};
        }
        break;
      case RecomputedPart::kMoeAct:
        if (absl::StrContains(k.name, "swiglu_fwd")) return {k};  // before the shared experts'
        break;
      case RecomputedPart::kSharedExperts:
        break;
    }
  }
  return out;
}

double MoeRoutedTokens(const OperatorKey& key) {
  const double tokens = static_cast<double>(key.micro_batch) * static_cast<double>(key.seq) /
                        static_cast<double>(std::max<int64_t>(1, key.context_parallel));
  return key.sequence_parallel ? tokens / static_cast<double>(key.tensor_parallel) : tokens;
}

double MoeBusiestRankCopies(const OperatorKey& key) {
  // Each rank routes tokens * top_k copies; balanced, each EP rank receives
  // as many as it sends; expert tensor parallelism gathers etp ranks' copies.
  return MoeRoutedTokens(key) * static_cast<double>(key.top_k) *
         static_cast<double>(std::max<int64_t>(1, key.expert_tensor_parallel)) *
         static_cast<double>(key.expert_load_permille) / 1000.0;
}

double CausalAttentionFlops(const OperatorKey& key, double qk_dim, double v_dim, bool backward) {
  const double c = static_cast<double>(std::max<int64_t>(1, key.context_parallel));
  const double s = static_cast<double>(key.seq);
  const double heads_local =
      static_cast<double>(key.heads) / static_cast<double>(key.tensor_parallel);
  const double forward =
      (s / c) * s * static_cast<double>(key.micro_batch) * heads_local * (qk_dim + v_dim);
  return backward ? 2.5 * forward : forward;
}

void MoeKernels(KernelSequence& seq, const OperatorKey& key) {
  const Fp8Linear fp8 = Fp8Of(key);
  const MoeShape x(key);
  if (key.op == OperatorKind::kMoeFwd) {
    MoeForward(seq, fp8, x, key);
  } else {
    MoeBackward(seq, fp8, x, key);
  }
}

void MlaKernels(KernelSequence& seq, const OperatorKey& key) {
  const Fp8Linear fp8 = Fp8Of(key);
  const MlaShape x(key);
  if (key.op == OperatorKind::kAttentionFwd) {
    MlaForward(seq, fp8, x, key);
  } else {
    MlaBackward(seq, fp8, x, key);
  }
}

}  // namespace vtrain::internal
