// Kernel lists of the analytical generator for DeepSeek- and Mixtral-style
// layers: a Mixture-of-Experts FFN block (router, permutation, grouped expert
// GEMMs, shared experts) and Multi-head Latent Attention.
#ifndef VTRAIN_CORE_PROFILE_MOE_KERNELS_H_
#define VTRAIN_CORE_PROFILE_MOE_KERNELS_H_

#include "core/profile/kernel_model.h"
#include "core/profile/profile.h"

namespace vtrain::internal {

// The MoE block of one layer on one rank (key.op kMoeFwd / kMoeBwd) as
// Megatron-Core runs it with Transformer Engine: RMSNorm, the router GEMM and
// its top-k, the permutation of the token copies, the local experts as one
// grouped GEMM per projection (each expert a GEMM of the tokens routed to it,
// so a small per-expert M pays tile waste), SwiGLU, unpermutation with the
// routing weights, the shared experts as a tensor-parallel SwiGLU MLP, the
// residual add. The tokens of the busiest rank (key.expert_load_permille)
// set the grouped GEMMs' size.
void MoeKernels(KernelSequence& seq, const OperatorKey& key);

// Multi-head Latent Attention (key.mla_kv_lora > 0), forward or backward, as
// Megatron-Core's MLASelfAttention runs it: the down projections replicated
// on every tensor-parallel rank, the up projections and heads split over t,
// FlashAttention with query/key heads of head_dim + rope and value heads of
// mla_v. `core_only`: the attention core alone (selective recomputation).
void MlaKernels(KernelSequence& seq, const OperatorKey& key);

// FLOPs of causal FlashAttention for one micro-batch on one rank with
// query/key heads of `qk_dim` and value heads of `v_dim`: forward
// (s/c) * s * (qk_dim + v_dim) per local head (QK^T and PV halved by the
// causal mask); backward 2.5 times that (recomputed QK^T, dV, dP, dQ, dK).
double CausalAttentionFlops(const OperatorKey& key, double qk_dim, double v_dim, bool backward);

// What selective recomputation re-runs of a forward operator beside the
// modules it rebuilds whole (the attention core, mlp, moe), picked from the
// forward's kernels by the names the generators and the GPU agent give them:
//  kMlaUpProjection (mla_up_proj): of an MLA attention forward, the kernels
//   that re-make Q, K and V from the kept latents (the up-projections, rotary
//   embedding and concatenation).
//  kNorm (layernorm): the forward's first RMSNorm or LayerNorm: a MoE
//   block's pre-MLP norm, MLA's input norm. (A standard attention's input
//   norm and a dense MLP's are fused into their first GEMM by Transformer
//   Engine, which keeps the output; Megatron-Core recomputes only norms that
//   are modules of their own: transformer_layer.py, gpt_layer_specs.py.)
//  kMoeAct (moe_act): a MoE forward's first SwiGLU, the routed experts'.
//  kSharedExperts (shared_experts): a MoE forward's shared experts, from
//   their fc1 GEMM (and its fp8 cast) to their fc2 GEMM.
// Empty for a table whose kernels are not named so.
enum class RecomputedPart { kMlaUpProjection, kNorm, kMoeAct, kSharedExperts };
std::vector<KernelRecord> RecomputedKernels(const OperatorProfile& forward, RecomputedPart part);

// The tokens one rank routes (b * s / c, / t under sequence parallelism) and
// the routed copies the busiest rank's experts compute.
double MoeRoutedTokens(const OperatorKey& key);
double MoeBusiestRankCopies(const OperatorKey& key);

}  // namespace vtrain::internal

#endif  // VTRAIN_CORE_PROFILE_MOE_KERNELS_H_
