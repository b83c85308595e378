// The workloads' GEMMs checked on the CPU, so CI covers them without a GPU:
// every GEMM spec of gemm_specs.h goes through its row-major -> column-major
// mapping (ToColumnMajor), cuBLASLt's column-major strided-batch semantics
// are emulated on host memory, and the result is compared with a direct
// reference of what the GEMM means (Y = X W^T, dgrad, wgrad, the attention
// batches read in place from the QKV buffer). Also fails on overlapping
// outputs and leading dimensions smaller than a matrix. Exit 0: all pass.
#include <cublasLt.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <random>
#include <vector>

#include "profiler_agent/gpu/device_buffers.h"
#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/gemm_specs.h"
#include "profiler_agent/gpu/workloads.h"
#include "tests/gpu/lt_emulator.h"

using vtrain::gpu::LayerShape;
using vtrain::gpu::ValidateShape;
using vtrain::gpu::WorkloadBytes;

// The shape the GEMMs are checked at; false if it does not validate.
static bool MakeTestShape(LayerShape* shape) {
  shape->hidden = 12;
  shape->heads = 6;
  shape->tensor_parallel = 2;  // a=3, d=2
  shape->ffn = 20;
  shape->seq = 5;
  shape->micro_batch = 2;
  shape->vocab = 13;  // v=7
  if (!ValidateShape(*shape).empty()) return false;
  // A larger head size for a meaningful test: hidden 24, heads 6 -> d = 4;
  // vocab 13 over t = 2 gives an odd shard of 7.
  shape->hidden = 24;
  return true;
}

// Fills every half buffer the GEMMs touch with random values.
static void FillInputs(const g::Dims& x, g::Buffers<H>* buffers) {
  g::Buffers<H>& b = *buffers;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  auto fill = [&](H* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) p[i] = __float2half(u(rng));
  };
  const int64_t n = x.n, h = x.h, f = x.f, v = x.v, s = x.s;
  const int64_t qkvw = x.qkv(), ad = x.ad(), bh = x.bh();
  fill(b.ln1_out, n * h);
  fill(b.w_qkv, qkvw * h);
  fill(b.b_qkv, qkvw);
  fill(b.qkv, n * qkvw);
  fill(b.scores, bh * s * s);
  fill(b.dropped, bh * s * s);
  fill(b.ctx_bsd, n * ad);
  fill(b.ctx, n * ad);
  fill(b.w_proj, h * ad);
  fill(b.ln2_out, n * h);
  fill(b.w_fc1, f * h);
  fill(b.gelu_out, n * f);
  fill(b.w_fc2, h * f);
  fill(b.lnf_out, n * h);
  fill(b.word_emb, v * h);
  fill(b.d_logits, n * v);
  fill(b.dy_fc2, n * h);
  fill(b.d_fc1, n * f);
  fill(b.dy_proj, n * h);
  fill(b.d_ctx_bsd, n * ad);
  fill(b.d_qkv, n * qkvw);
}

// Element e of part (0 Q, 1 K, 2 V) of attention pair z at sequence
// position si, inside a QKV-shaped buffer [s, b, a, 3d].
static H* QkvAt(H* qkv, const g::Dims& x, int64_t si, int64_t z, int64_t e, int part) {
  const int64_t bi = z / x.a, hi = z % x.a;
  return &qkv[(si * x.b + bi) * x.qkv() + hi * 3 * x.d + part * x.d + e];
}

// The attention scaling 1/sqrt(d).
static float InvSqrtD(const g::Dims& x) { return 1.0f / std::sqrt((float)x.d); }

// scores[z][i][j] = Q_i . K_j / sqrt(d), Q and K read in place from qkv.
static void ScoresFwd(Expect& e, const g::Dims& x, const g::Buffers<H>& b) {
  const int64_t s = x.s, d = x.d, bh = x.bh();
  const float isd = InvSqrtD(x);
  for (int64_t z = 0; z < bh; ++z)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        float acc = 0;
        for (int64_t k = 0; k < d; ++k)
          acc += F(*QkvAt(b.qkv, x, i, z, k, 0)) * F(*QkvAt(b.qkv, x, j, z, k, 1));
        e[&b.scores[(z * s + i) * s + j]] = acc * isd;
      }
}

// ctx_bsd[z][i][k] = sum_j dropped[z][i][j] V_j[k], V read in place from qkv.
static void ContextFwd(Expect& e, const g::Dims& x, const g::Buffers<H>& b) {
  const int64_t s = x.s, d = x.d, bh = x.bh();
  for (int64_t z = 0; z < bh; ++z)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t k = 0; k < d; ++k) {
        float acc = 0;
        for (int64_t j = 0; j < s; ++j)
          acc += F(b.dropped[(z * s + i) * s + j]) * F(*QkvAt(b.qkv, x, j, z, k, 2));
        e[&b.ctx_bsd[(z * s + i) * d + k]] = acc;
      }
}

// d_probs (in scores)[z][i][j] = sum_k d_ctx_bsd[z][i][k] V_j[k].
static void ContextDgradProbs(Expect& e, const g::Dims& x, const g::Buffers<H>& b) {
  const int64_t s = x.s, d = x.d, bh = x.bh();
  for (int64_t z = 0; z < bh; ++z)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        float acc = 0;
        for (int64_t k = 0; k < d; ++k)
          acc += F(b.d_ctx_bsd[(z * s + i) * d + k]) * F(*QkvAt(b.qkv, x, j, z, k, 2));
        e[&b.scores[(z * s + i) * s + j]] = acc;
      }
}

// dV_j[k] (in d_qkv) = sum_i dropped[z][i][j] d_ctx_bsd[z][i][k].
static void ContextDgradValues(Expect& e, const g::Dims& x, const g::Buffers<H>& b) {
  const int64_t s = x.s, d = x.d, bh = x.bh();
  for (int64_t z = 0; z < bh; ++z)
    for (int64_t j = 0; j < s; ++j)
      for (int64_t k = 0; k < d; ++k) {
        float acc = 0;
        for (int64_t i = 0; i < s; ++i)
          acc += F(b.dropped[(z * s + i) * s + j]) * F(b.d_ctx_bsd[(z * s + i) * d + k]);
        e[QkvAt(b.d_qkv, x, j, z, k, 2)] = acc;
      }
}

// dQ_i[k] (in d_qkv) = sum_j d_scores[z][i][j] K_j[k] / sqrt(d).
static void ScoresDgradQuery(Expect& e, const g::Dims& x, const g::Buffers<H>& b) {
  const int64_t s = x.s, d = x.d, bh = x.bh();
  const float isd = InvSqrtD(x);
  for (int64_t z = 0; z < bh; ++z)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t k = 0; k < d; ++k) {
        float acc = 0;
        for (int64_t j = 0; j < s; ++j)
          acc += F(b.scores[(z * s + i) * s + j]) * F(*QkvAt(b.qkv, x, j, z, k, 1));
        e[QkvAt(b.d_qkv, x, i, z, k, 0)] = acc * isd;
      }
}

// dK_j[k] (in d_qkv) = sum_i d_scores[z][i][j] Q_i[k] / sqrt(d).
static void ScoresDgradKey(Expect& e, const g::Dims& x, const g::Buffers<H>& b) {
  const int64_t s = x.s, d = x.d, bh = x.bh();
  const float isd = InvSqrtD(x);
  for (int64_t z = 0; z < bh; ++z)
    for (int64_t j = 0; j < s; ++j)
      for (int64_t k = 0; k < d; ++k) {
        float acc = 0;
        for (int64_t i = 0; i < s; ++i)
          acc += F(b.scores[(z * s + i) * s + j]) * F(*QkvAt(b.qkv, x, i, z, k, 0));
        e[QkvAt(b.d_qkv, x, j, z, k, 1)] = acc * isd;
      }
}

// The direct reference of GEMM `id`: the value each output element must get.
static void Reference(int id, const g::Dims& x, const g::Buffers<H>& b, Expect& e) {
  const int64_t n = x.n, h = x.h, f = x.f, v = x.v;
  const int64_t qkvw = x.qkv(), ad = x.ad();
  switch (id) {
    case g::kGemmQkvFwd:
      return Linear(e, b.ln1_out, b.w_qkv, b.b_qkv, b.qkv, n, h, qkvw);
    case g::kGemmScoresFwd:
      return ScoresFwd(e, x, b);
    case g::kGemmContextFwd:
      return ContextFwd(e, x, b);
    case g::kGemmProjectionFwd:
      return Linear(e, b.ctx, b.w_proj, nullptr, b.proj_out, n, ad, h);
    case g::kGemmFc1Fwd:
      return Linear(e, b.ln2_out, b.w_fc1, nullptr, b.fc1_out, n, h, f);
    case g::kGemmFc2Fwd:
      return Linear(e, b.gelu_out, b.w_fc2, nullptr, b.fc2_out, n, f, h);
    case g::kGemmLogitFwd:
      return Linear(e, b.lnf_out, b.word_emb, nullptr, b.logits, n, h, v);
    case g::kGemmLogitDgrad:
      return Dgrad(e, b.d_logits, b.word_emb, b.d_lnf, n, h, v);
    case g::kGemmLogitWgrad:
      return Wgrad(e, b.d_logits, b.lnf_out, b.dw_emb, n, h, v);
    case g::kGemmFc2Dgrad:
      return Dgrad(e, b.dy_fc2, b.w_fc2, b.d_gelu, n, f, h);
    case g::kGemmFc2Wgrad:
      return Wgrad(e, b.dy_fc2, b.gelu_out, b.dw_fc2, n, f, h);
    case g::kGemmFc1Dgrad:
      return Dgrad(e, b.d_fc1, b.w_fc1, b.d_ln2, n, h, f);
    case g::kGemmFc1Wgrad:
      return Wgrad(e, b.d_fc1, b.ln2_out, b.dw_fc1, n, h, f);
    case g::kGemmProjectionDgrad:
      return Dgrad(e, b.dy_proj, b.w_proj, b.d_ctx, n, ad, h);
    case g::kGemmProjectionWgrad:
      return Wgrad(e, b.dy_proj, b.ctx, b.dw_proj, n, ad, h);
    case g::kGemmContextDgradProbs:
      return ContextDgradProbs(e, x, b);
    case g::kGemmContextDgradValues:
      return ContextDgradValues(e, x, b);
    case g::kGemmScoresDgradQuery:
      return ScoresDgradQuery(e, x, b);
    case g::kGemmScoresDgradKey:
      return ScoresDgradKey(e, x, b);
    case g::kGemmQkvDgrad:
      return Dgrad(e, b.d_qkv, b.w_qkv, b.d_ln1, n, h, qkvw);
    case g::kGemmQkvWgrad:
      return Wgrad(e, b.d_qkv, b.ln1_out, b.dw_qkv, n, h, qkvw);
    default:
      return;
  }
}

// Checks every GEMM spec in order; the number that fail.
static int CheckAllGemms(const g::Dims& x, const g::Buffers<H>& b) {
  const auto specs = g::MakeGemmSpecs(x, b);
  int failures = 0;
  for (int id = 0; id < g::kGemmCount; ++id) {
    Expect expect;
    Reference(id, x, b, expect);
    failures += !CheckGemm(specs[id], expect);
  }
  return failures;
}

// Under fp8 the QKV, projection, FC1 and FC2 GEMMs read host-made fp8
// copies of their inputs (as the cast-transpose kernels write them) and must
// equal the reference over the dequantised values, in cuBLASLt's fp8 form.
static int CheckFp8Gemms() {
  LayerShape shape;
  shape.hidden = 64;
  shape.heads = 4;
  shape.tensor_parallel = 2;  // a = 2, d = 16
  shape.ffn = 64;             // f = 32
  shape.seq = 8;
  shape.micro_batch = 2;  // n = 16
  shape.vocab = 20;
  shape.bf16 = shape.fp8 = true;
  if (!ValidateShape(shape).empty()) {
    printf("bad fp8 shape: %s\n", ValidateShape(shape).c_str());
    return 1;
  }
  const g::Dims x = g::MakeDims(shape);
  g::Buffers<H> b{};
  HostArena arena;
  b.Layout(x, &arena);
  FillInputs(x, &b);
  const auto specs = g::MakeGemmSpecs(x, b);
  const H* xs[] = {b.ln1_out, b.ctx, b.ln2_out, b.gelu_out};
  const H* dys[] = {b.d_qkv, b.dy_proj, b.d_fc1, b.dy_fc2};
  const H* biases[] = {b.b_qkv, nullptr, nullptr, nullptr};  // the others are added after
  int failures = 0;
  for (int l = 0; l < vtrain::gpu::kNumFp8Linears; ++l) {
    const g::Fp8Linear& f = b.fp8[l];
    const int64_t in = x.in(l), out = x.out(l);
    const std::vector<H> xq = CastTranspose(xs[l], x.n, in, false, f.x, f.x_t);
    const std::vector<H> wq = CastTranspose(b.weight(l), out, in, false, f.w, f.w_t);
    const std::vector<H> dyq = CastTranspose(dys[l], x.n, out, true, f.dy, f.dy_t);
    for (int pass = 0; pass < g::kGemmPasses; ++pass) {
      const g::GemmSpec& sp = specs[g::kFp8LinearGemms[l][pass]];
      H* c = static_cast<H*>(sp.c);
      Expect e;
      if (pass == 0) Linear(e, xq.data(), wq.data(), biases[l], c, x.n, in, out);
      if (pass == 1) Dgrad(e, dyq.data(), wq.data(), c, x.n, in, out);
      if (pass == 2) Wgrad(e, dyq.data(), xq.data(), c, x.n, in, out);
      failures += !CheckFp8Gemm(sp, g::Fp8OperandsOf(x, l, pass).a_e5m2, e);
    }
  }
  return failures;
}

// The small shape the memory accounting is checked at.
static LayerShape MemoryShape() {
  LayerShape small;
  small.hidden = 1024;
  small.heads = 16;
  small.seq = 512;
  small.micro_batch = 2;
  small.tensor_parallel = 2;
  return small;
}

// Adam holds Megatron's 18 bytes per parameter (fp32 master, moments and
// main grad; 16-bit parameter).
static bool CheckAdamBytes() {
  LayerShape small = MemoryShape();
  const int64_t base = WorkloadBytes(small);
  small.adam_params = 1'000'000;
  const int64_t adam = WorkloadBytes(small) - base;
  const bool adam_ok = adam >= 18'000'000 && adam <= 18'000'000 + 6 * 512;
  printf("adam bytes for 1M parameters: %ld %s\n", static_cast<long>(adam),
         adam_ok ? "OK" : "FAIL");
  return adam_ok;
}

// More tokens never need less memory.
static bool CheckMemoryGrowsWithSequence() {
  LayerShape small = MemoryShape();
  const int64_t base = WorkloadBytes(small);
  small.seq = 1024;
  const bool grows = WorkloadBytes(small) > base;
  printf("twice the sequence needs more memory: %s\n", grows ? "OK" : "FAIL");
  return grows;
}

int main() {
  LayerShape shape;
  if (!MakeTestShape(&shape)) {
    printf("bad shape\n");
    return 1;
  }
  const g::Dims x = g::MakeDims(shape);
  printf("h=%ld a=%ld d=%ld f=%ld s=%ld b=%ld n=%ld v=%ld\n", x.h, x.a, x.d, x.f, x.s, x.b, x.n,
         x.v);
  g::Buffers<H> b{};
  HostArena arena;
  b.Layout(x, &arena);
  FillInputs(x, &b);

  int failures = CheckAllGemms(x, b);
  printf("== fp8\n");
  failures += CheckFp8Gemms();
  failures += !CheckAdamBytes();
  failures += !CheckMemoryGrowsWithSequence();

  printf("%d failures\n", failures);
  return failures != 0;
}
