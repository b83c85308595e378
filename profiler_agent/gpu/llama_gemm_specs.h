// Which GEMMs the Llama workload runs: each linear layer's forward, data
// gradient and weight gradient in Megatron's terms (gemm_specs.h has the
// conventions), in 16 bits or, for the attention and MLP layers under fp8,
// on the fp8 copies with both operands k-contiguous as cuBLASLt's fp8 GEMMs
// need (Transformer Engine's layouts). Plain C++ over the buffers, so the
// layout test checks them on the CPU.
#ifndef VTRAIN_PROFILER_AGENT_GPU_LLAMA_GEMM_SPECS_H_
#define VTRAIN_PROFILER_AGENT_GPU_LLAMA_GEMM_SPECS_H_

#include <cstdint>

#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/llama_buffers.h"
#include "profiler_agent/gpu/llama_plan.h"

namespace vtrain::gpu::internal {

constexpr int kLlamaLinears = kLinearLogit + 1;
constexpr int kGemmPasses = 3;  // forward, data gradient, weight gradient

// A row-major GEMM C[m, n] = op(A) op(B) on dense operands (no batches).
inline GemmSpec DenseGemm(const char* name, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                          const void* a, const void* b, void* c) {
  GemmSpec g;
  g.name = name;
  g.m = m;
  g.n = n;
  g.k = k;
  g.trans_a = ta;
  g.trans_b = tb;
  g.a = a;
  g.lda = ta ? m : k;
  g.b = b;
  g.ldb = tb ? k : n;
  g.c = c;
  g.ldc = n;
  return g;
}

// Whether a GEMM runs in fp8, and then its operands' formats and the fp8
// tensors (3 l + 0 input, 1 weight, 2 output gradient) whose scale_inv
// dequantises them.
struct Fp8Operands {
  bool fp8 = false;
  bool a_e5m2 = false;  // A is an output gradient (E5M2); B is always E4M3
  int a_tensor = 0;
  int b_tensor = 0;
};

// X: LlamaDims or Dims (anything with fp8).
template <class X>
Fp8Operands Fp8OperandsOf(const X& x, int linear, int pass) {
  Fp8Operands o;
  if (!x.fp8 || linear >= kNumFp8Linears) return o;
  const int t = static_cast<int>(kFp8TensorsPerLinear) * linear;
  o.fp8 = true;
  o.a_e5m2 = pass != 0;
  o.a_tensor = pass == 0 ? t : t + 2;  // x, dy, dy^T
  o.b_tensor = pass == 2 ? t : t + 1;  // w, w^T, x^T
  return o;
}

// The cuBLASLt types of an fp8 GEMM: E4M3 or E5M2 inputs dequantised by
// their tensors' scale_inv, the 16-bit output type `d`.
inline GemmTypes Fp8GemmTypes(const Fp8Operands& o, const float* scale_inv, cudaDataType_t d,
                              size_t d_bytes) {
  GemmTypes t;
  t.a = o.a_e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
  t.b = CUDA_R_8F_E4M3;
  t.d = d;
  t.a_bytes = t.b_bytes = 1;
  t.d_bytes = d_bytes;
  t.a_scale = scale_inv + o.a_tensor;
  t.b_scale = scale_inv + o.b_tensor;
  return t;
}

// The GEMM of pass `pass` of linear layer `linear`:
//   forward  Y[n, out]    = X[n, in] W[out, in]^T
//   dgrad    dX[n, in]    = dY[n, out] W          (fp8: dY W^T^T, W^T stored [in, out])
//   wgrad    dW[out, in]  = dY^T X                (fp8: dY^T [out, n] times X^T [in, n]^T)
template <class T>
GemmSpec LlamaGemmSpec(const LlamaDims& x, const LlamaBuffers<T>& b, int linear, int pass) {
  const void* xs[] = {b.ln1_out, b.ctx, b.ln2_out, b.act, b.lnf_out};
  void* ys[] = {b.qkv, b.proj_out, b.fc1_out, b.fc2_out, b.logits};
  const void* dys[] = {b.d_qkv, b.d_h1, b.d_fc1, b.d_h2, b.d_logits};
  void* dxs[] = {b.d_ln1, b.d_ctx, b.d_ln2, b.d_act, b.d_lnf};
  void* dws[] = {b.dw_qkv, b.dw_proj, b.dw_fc1, b.dw_fc2, b.dw_out};
  const int l = linear;
  const int64_t n = x.n;
  const int64_t in = x.in(l);
  const int64_t out = x.out(l);
  const char* name = LinearGemmName(l, pass);
  if (!Fp8OperandsOf(x, l, pass).fp8) {
    if (pass == 0) return DenseGemm(name, n, out, in, false, true, xs[l], b.weight(l), ys[l]);
    if (pass == 1) return DenseGemm(name, n, in, out, false, false, dys[l], b.weight(l), dxs[l]);
    return DenseGemm(name, out, in, n, true, false, dys[l], xs[l], dws[l]);
  }
  const Fp8Linear& f = b.fp8[l];
  if (pass == 0) return DenseGemm(name, n, out, in, false, true, f.x, f.w, ys[l]);
  if (pass == 1) return DenseGemm(name, n, in, out, false, true, f.dy, f.w_t, dxs[l]);
  return DenseGemm(name, out, in, n, false, true, f.dy_t, f.x_t, dws[l]);
}

}  // namespace vtrain::gpu::internal

#endif  // VTRAIN_PROFILER_AGENT_GPU_LLAMA_GEMM_SPECS_H_
