// Which GEMMs a layer workload runs: their ids, and each one's shape and
// operands inside the workload's buffers, in Megatron-LM's terms.
#ifndef VTRAIN_PROFILER_AGENT_GPU_GEMM_SPECS_H_
#define VTRAIN_PROFILER_AGENT_GPU_GEMM_SPECS_H_

#include <array>
#include <cmath>
#include <cstdint>

#include "profiler_agent/gpu/device_buffers.h"
#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/llama_gemm_specs.h"
#include "profiler_agent/gpu/llama_plan.h"

namespace vtrain::gpu::internal {

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

// The forward, data-gradient and weight-gradient GEMMs of each linear layer
// that runs in fp8 under fp8 (a Linear: QKV, projection, FC1, FC2).
constexpr GemmId kFp8LinearGemms[kNumFp8Linears][kGemmPasses] = {
    {kGemmQkvFwd, kGemmQkvDgrad, kGemmQkvWgrad},
    {kGemmProjectionFwd, kGemmProjectionDgrad, kGemmProjectionWgrad},
    {kGemmFc1Fwd, kGemmFc1Dgrad, kGemmFc1Wgrad},
    {kGemmFc2Fwd, kGemmFc2Dgrad, kGemmFc2Wgrad}};

// Whether GEMM `id` belongs to an fp8-capable linear layer; then *linear
// and *pass say which.
inline bool Fp8LinearOf(int id, int* linear, int* pass) {
  for (int l = 0; l < kNumFp8Linears; ++l) {
    for (int p = 0; p < kGemmPasses; ++p) {
      if (kFp8LinearGemms[l][p] == id) {
        *linear = l;
        *pass = p;
        return true;
      }
    }
  }
  return false;
}

// Under fp8, the linear layers' GEMMs read the fp8 copies instead, both
// operands k-contiguous (llama_gemm_specs.h has the forms); the forward
// keeps its shape, leading dimensions and QKV bias, only the operands change.
template <class T>
void UseFp8Operands(const Buffers<T>& b, std::array<GemmSpec, kGemmCount>* specs) {
  for (int l = 0; l < kNumFp8Linears; ++l) {
    const Fp8Linear& f = b.fp8[l];
    GemmSpec& fwd = (*specs)[kFp8LinearGemms[l][0]];
    fwd.a = f.x;
    fwd.b = f.w;
    GemmSpec& dgrad = (*specs)[kFp8LinearGemms[l][1]];
    dgrad = DenseGemm(dgrad.name, dgrad.m, dgrad.n, dgrad.k, false, true, f.dy, f.w_t, dgrad.c);
    GemmSpec& wgrad = (*specs)[kFp8LinearGemms[l][2]];
    wgrad = DenseGemm(wgrad.name, wgrad.m, wgrad.n, wgrad.k, false, true, f.dy_t, f.x_t, wgrad.c);
  }
}

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
  if (x.fp8) UseFp8Operands(b, &g);
  return g;
}

}  // namespace vtrain::gpu::internal

#endif  // VTRAIN_PROFILER_AGENT_GPU_GEMM_SPECS_H_
