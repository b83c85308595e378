// The Llama workload's GEMMs (llama_gemm_specs.h) checked on the CPU, so CI
// covers them without a GPU: each linear layer's forward, dgrad and wgrad go
// through ToColumnMajor and an emulation of cuBLASLt and must equal the
// direct reference (Y = X W^T, dX = dY W, dW = dY^T X) element for element.
// Under fp8 the attention and MLP GEMMs run on host-made fp8 copies (the
// input, weight and output gradient cast, and their transposes, as the
// cast-transpose kernels write them): they must also be in the TN form
// cuBLASLt's fp8 GEMMs need (both operands k-contiguous, leading dimensions
// multiples of 16), and equal the reference over the dequantised values.
// Exit 0: all pass.
#include <cublasLt.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/llama_buffers.h"
#include "profiler_agent/gpu/llama_gemm_specs.h"
#include "profiler_agent/gpu/llama_plan.h"
#include "profiler_agent/gpu/workloads.h"
#include "tests/gpu/lt_emulator.h"

using vtrain::gpu::LayerShape;
using vtrain::gpu::ValidateShape;

// hidden 64, 4 heads and 2 KV heads over t = 2 (a = 2, kv = 1, d = 16),
// FFN 32 per rank, 16 tokens, a vocabulary shard of 10: every fp8 dimension
// a multiple of 16.
static LayerShape TestShape(bool fp8) {
  LayerShape s;
  s.hidden = 64;
  s.heads = 4;
  s.kv_heads = 2;
  s.tensor_parallel = 2;
  s.ffn = 64;
  s.seq = 8;
  s.micro_batch = 2;
  s.vocab = 20;
  s.llama = true;
  s.bf16 = fp8;
  s.fp8 = fp8;
  return s;
}

// The 16-bit inputs of linear layer l: X, W, dY.
struct LinearInputs {
  const H* x;
  const H* w;
  const H* dy;
};

static LinearInputs Inputs(const g::LlamaBuffers<H>& b, int l) {
  const H* xs[] = {b.ln1_out, b.ctx, b.ln2_out, b.act, b.lnf_out};
  const H* dys[] = {b.d_qkv, b.d_h1, b.d_fc1, b.d_h2, b.d_logits};
  return {xs[l], b.weight(l), dys[l]};
}

// The direct reference of pass `pass` over the given inputs, into the
// spec's output.
static Expect Reference(const g::GemmSpec& sp, const g::LlamaDims& x, int l, int pass, const H* in,
                        const H* w, const H* dy) {
  Expect e;
  H* out = static_cast<H*>(sp.c);
  if (pass == 0) Linear(e, in, w, nullptr, out, x.n, x.in(l), x.out(l));
  if (pass == 1) Dgrad(e, dy, w, out, x.n, x.in(l), x.out(l));
  if (pass == 2) Wgrad(e, dy, in, out, x.n, x.in(l), x.out(l));
  return e;
}

static int CheckLayout(bool fp8) {
  const LayerShape shape = TestShape(fp8);
  if (!ValidateShape(shape).empty()) {
    printf("bad shape: %s\n", ValidateShape(shape).c_str());
    return 1;
  }
  const g::LlamaDims x = g::MakeLlamaDims(shape);
  g::LlamaBuffers<H> b{};
  HostArena arena;
  b.Layout(x, &arena);
  std::mt19937 rng(fp8 ? 2 : 1);
  std::uniform_real_distribution<float> u(-2, 2);
  int failures = 0;
  for (int l = 0; l < g::kLlamaLinears; ++l) {
    const LinearInputs in = Inputs(b, l);
    for (const H* p : {in.x, in.w}) {
      for (int64_t i = 0; i < (p == in.w ? x.out(l) : x.n) * x.in(l); ++i) {
        const_cast<H*>(p)[i] = __float2half(u(rng));
      }
    }
    for (int64_t i = 0; i < x.n * x.out(l); ++i) const_cast<H*>(in.dy)[i] = __float2half(u(rng));
    std::vector<H> xq, wq, dyq;
    if (g::Fp8OperandsOf(x, l, 0).fp8) {
      const g::Fp8Linear& f = b.fp8[l];
      xq = CastTranspose(in.x, x.n, x.in(l), false, f.x, f.x_t);
      wq = CastTranspose(in.w, x.out(l), x.in(l), false, f.w, f.w_t);
      dyq = CastTranspose(in.dy, x.n, x.out(l), true, f.dy, f.dy_t);
    }
    for (int pass = 0; pass < g::kGemmPasses; ++pass) {
      const g::GemmSpec sp = g::LlamaGemmSpec(x, b, l, pass);
      const g::Fp8Operands o = g::Fp8OperandsOf(x, l, pass);
      if (!o.fp8) {
        failures += !CheckGemm(sp, Reference(sp, x, l, pass, in.x, in.w, in.dy));
        continue;
      }
      failures +=
          !CheckFp8Gemm(sp, o.a_e5m2, Reference(sp, x, l, pass, xq.data(), wq.data(), dyq.data()));
    }
  }
  return failures;
}

int main() {
  int failures = 0;
  for (bool fp8 : {false, true}) {
    printf("== Llama GEMMs, %s\n", fp8 ? "fp8" : "16-bit");
    failures += CheckLayout(fp8);
  }
  printf("%d failures\n", failures);
  return failures != 0;
}
