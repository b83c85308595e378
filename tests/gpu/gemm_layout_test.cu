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
#include <functional>
#include <initializer_list>
#include <map>
#include <random>
#include <vector>

#include "profiler_agent/gpu/device_buffers.h"
#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/gemm_specs.h"
#include "profiler_agent/gpu/workloads.h"

using vtrain::gpu::LayerShape;
using vtrain::gpu::ValidateShape;
using vtrain::gpu::WorkloadBytes;
namespace g = vtrain::gpu::internal;
using H = __half;

struct HostArena {
  std::vector<void*> ptrs;
  template <class P>
  void Take(P** ptr, const char*, std::initializer_list<int64_t> dims) {
    size_t n = 1;
    for (auto d : dims) n *= d;
    *ptr = static_cast<P*>(calloc(n, sizeof(P)));
    ptrs.push_back(*ptr);
  }
};

static float F(const H& x) { return __half2float(x); }

int main() {
  LayerShape shape;
  shape.hidden = 12;
  shape.heads = 6;
  shape.tensor_parallel = 2;  // a=3, d=2
  shape.ffn = 20;
  shape.seq = 5;
  shape.micro_batch = 2;
  shape.vocab = 13;  // v=7
  if (!ValidateShape(shape).empty()) {
    printf("bad shape\n");
    return 1;
  }
  // A larger head size for a meaningful test: hidden 24, heads 6 -> d = 4;
  // vocab 13 over t = 2 gives an odd shard of 7.
  shape.hidden = 24;
  const auto x = g::MakeDims(shape);
  printf("h=%ld a=%ld d=%ld f=%ld s=%ld b=%ld n=%ld v=%ld\n", x.h, x.a, x.d, x.f, x.s, x.b, x.n,
         x.v);
  g::Buffers<H> b{};
  HostArena arena;
  b.Layout(x, &arena);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  // Fill every half buffer the GEMMs touch with random values.
  auto fill = [&](H* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) p[i] = __float2half(u(rng));
  };
  const int64_t n = x.n, h = x.h, f = x.f, v = x.v, s = x.s, d = x.d, a = x.a, B = x.b;
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

  const auto specs = g::MakeGemmSpecs(x, b);
  const float isd = 1.0f / std::sqrt((float)d);
  auto Q = [&](int64_t si, int64_t z, int64_t e, int part) {
    const int64_t bi = z / a, hi = z % a;
    return &b.qkv[(si * B + bi) * qkvw + hi * 3 * d + part * d + e];
  };
  auto DQ = [&](int64_t si, int64_t z, int64_t e, int part) {
    const int64_t bi = z / a, hi = z % a;
    return &b.d_qkv[(si * B + bi) * qkvw + hi * 3 * d + part * d + e];
  };
  using Expect = std::map<const H*, float>;
  // out[t][o] = sum_i in[t][i] * W[o][i]  (+bias)
  auto linear = [&](Expect& e, const H* in, const H* w, const H* bias, H* out, int64_t rows,
                    int64_t in_f, int64_t out_f) {
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t o = 0; o < out_f; ++o) {
        float acc = bias ? F(bias[o]) : 0;
        for (int64_t i = 0; i < in_f; ++i) acc += F(in[t * in_f + i]) * F(w[o * in_f + i]);
        e[&out[t * out_f + o]] = acc;
      }
  };
  // dX[t][i] = sum_o dY[t][o] W[o][i]
  auto dgrad = [&](Expect& e, const H* dy, const H* w, H* dx, int64_t rows, int64_t in_f,
                   int64_t out_f) {
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t i = 0; i < in_f; ++i) {
        float acc = 0;
        for (int64_t o = 0; o < out_f; ++o) acc += F(dy[t * out_f + o]) * F(w[o * in_f + i]);
        e[&dx[t * in_f + i]] = acc;
      }
  };
  // dW[o][i] = sum_t dY[t][o] X[t][i]
  auto wgrad = [&](Expect& e, const H* dy, const H* xin, H* dw, int64_t rows, int64_t in_f,
                   int64_t out_f) {
    for (int64_t o = 0; o < out_f; ++o)
      for (int64_t i = 0; i < in_f; ++i) {
        float acc = 0;
        for (int64_t t = 0; t < rows; ++t) acc += F(dy[t * out_f + o]) * F(xin[t * in_f + i]);
        e[&dw[o * in_f + i]] = acc;
      }
  };
  std::function<void(Expect&)> ref[g::kGemmCount];
  ref[g::kGemmQkvFwd] = [&](Expect& e) {
    linear(e, b.ln1_out, b.w_qkv, b.b_qkv, b.qkv, n, h, qkvw);
  };
  ref[g::kGemmScoresFwd] = [&](Expect& e) {
    for (int64_t z = 0; z < bh; ++z)
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < s; ++j) {
          float acc = 0;
          for (int64_t k = 0; k < d; ++k) acc += F(*Q(i, z, k, 0)) * F(*Q(j, z, k, 1));
          e[&b.scores[(z * s + i) * s + j]] = acc * isd;
        }
  };
  ref[g::kGemmContextFwd] = [&](Expect& e) {
    for (int64_t z = 0; z < bh; ++z)
      for (int64_t i = 0; i < s; ++i)
        for (int64_t k = 0; k < d; ++k) {
          float acc = 0;
          for (int64_t j = 0; j < s; ++j)
            acc += F(b.dropped[(z * s + i) * s + j]) * F(*Q(j, z, k, 2));
          e[&b.ctx_bsd[(z * s + i) * d + k]] = acc;
        }
  };
  ref[g::kGemmProjectionFwd] = [&](Expect& e) {
    linear(e, b.ctx, b.w_proj, nullptr, b.proj_out, n, ad, h);
  };
  ref[g::kGemmFc1Fwd] = [&](Expect& e) {
    linear(e, b.ln2_out, b.w_fc1, nullptr, b.fc1_out, n, h, f);
  };
  ref[g::kGemmFc2Fwd] = [&](Expect& e) {
    linear(e, b.gelu_out, b.w_fc2, nullptr, b.fc2_out, n, f, h);
  };
  ref[g::kGemmLogitFwd] = [&](Expect& e) {
    linear(e, b.lnf_out, b.word_emb, nullptr, b.logits, n, h, v);
  };
  ref[g::kGemmLogitDgrad] = [&](Expect& e) { dgrad(e, b.d_logits, b.word_emb, b.d_lnf, n, h, v); };
  ref[g::kGemmLogitWgrad] = [&](Expect& e) { wgrad(e, b.d_logits, b.lnf_out, b.dw_emb, n, h, v); };
  ref[g::kGemmFc2Dgrad] = [&](Expect& e) { dgrad(e, b.dy_fc2, b.w_fc2, b.d_gelu, n, f, h); };
  ref[g::kGemmFc2Wgrad] = [&](Expect& e) { wgrad(e, b.dy_fc2, b.gelu_out, b.dw_fc2, n, f, h); };
  ref[g::kGemmFc1Dgrad] = [&](Expect& e) { dgrad(e, b.d_fc1, b.w_fc1, b.d_ln2, n, h, f); };
  ref[g::kGemmFc1Wgrad] = [&](Expect& e) { wgrad(e, b.d_fc1, b.ln2_out, b.dw_fc1, n, h, f); };
  ref[g::kGemmProjectionDgrad] = [&](Expect& e) {
    dgrad(e, b.dy_proj, b.w_proj, b.d_ctx, n, ad, h);
  };
  ref[g::kGemmProjectionWgrad] = [&](Expect& e) {
    wgrad(e, b.dy_proj, b.ctx, b.dw_proj, n, ad, h);
  };
  ref[g::kGemmContextDgradProbs] = [&](Expect& e) {
    for (int64_t z = 0; z < bh; ++z)
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < s; ++j) {
          float acc = 0;
          for (int64_t k = 0; k < d; ++k)
            acc += F(b.d_ctx_bsd[(z * s + i) * d + k]) * F(*Q(j, z, k, 2));
          e[&b.scores[(z * s + i) * s + j]] = acc;
        }
  };
  ref[g::kGemmContextDgradValues] = [&](Expect& e) {
    for (int64_t z = 0; z < bh; ++z)
      for (int64_t j = 0; j < s; ++j)
        for (int64_t k = 0; k < d; ++k) {
          float acc = 0;
          for (int64_t i = 0; i < s; ++i)
            acc += F(b.dropped[(z * s + i) * s + j]) * F(b.d_ctx_bsd[(z * s + i) * d + k]);
          e[DQ(j, z, k, 2)] = acc;
        }
  };
  ref[g::kGemmScoresDgradQuery] = [&](Expect& e) {
    for (int64_t z = 0; z < bh; ++z)
      for (int64_t i = 0; i < s; ++i)
        for (int64_t k = 0; k < d; ++k) {
          float acc = 0;
          for (int64_t j = 0; j < s; ++j)
            acc += F(b.scores[(z * s + i) * s + j]) * F(*Q(j, z, k, 1));
          e[DQ(i, z, k, 0)] = acc * isd;
        }
  };
  ref[g::kGemmScoresDgradKey] = [&](Expect& e) {
    for (int64_t z = 0; z < bh; ++z)
      for (int64_t j = 0; j < s; ++j)
        for (int64_t k = 0; k < d; ++k) {
          float acc = 0;
          for (int64_t i = 0; i < s; ++i)
            acc += F(b.scores[(z * s + i) * s + j]) * F(*Q(i, z, k, 0));
          e[DQ(j, z, k, 1)] = acc * isd;
        }
  };
  ref[g::kGemmQkvDgrad] = [&](Expect& e) { dgrad(e, b.d_qkv, b.w_qkv, b.d_ln1, n, h, qkvw); };
  ref[g::kGemmQkvWgrad] = [&](Expect& e) { wgrad(e, b.d_qkv, b.ln1_out, b.dw_qkv, n, h, qkvw); };

  int failures = 0;
  for (int id = 0; id < g::kGemmCount; ++id) {
    const g::GemmSpec& sp = specs[id];
    Expect expect;
    ref[id](expect);
    // Emulate cuBLASLt: column-major D[m_cu, n_cu] = alpha op(A) op(B) (+ bias[row]).
    const g::LtCall c = g::ToColumnMajor(sp);
    const int64_t m_cu = c.d.rows, n_cu = c.d.cols;
    const int64_t k_cu = c.a.op == CUBLAS_OP_N ? c.a.cols : c.a.rows;
    const int64_t k_b = c.b.op == CUBLAS_OP_N ? c.b.rows : c.b.cols;
    const int64_t m_a = c.a.op == CUBLAS_OP_N ? c.a.rows : c.a.cols;
    const int64_t n_b = c.b.op == CUBLAS_OP_N ? c.b.cols : c.b.rows;
    bool ok = k_cu == k_b && m_a == m_cu && n_b == n_cu && c.a.ld >= c.a.rows &&
              c.b.ld >= c.b.rows && c.d.ld >= c.d.rows;
    const H* A = static_cast<const H*>(c.a.ptr);
    const H* Bm = static_cast<const H*>(c.b.ptr);
    H* D = static_cast<H*>(const_cast<void*>(c.d.ptr));
    std::map<const H*, float> got;
    for (int64_t z = 0; z < sp.batch; ++z)
      for (int64_t i = 0; i < m_cu; ++i)
        for (int64_t j = 0; j < n_cu; ++j) {
          float acc = 0;
          for (int64_t l = 0; l < k_cu; ++l) {
            const H ea = c.a.op == CUBLAS_OP_N ? A[z * c.a.stride + i + l * c.a.ld]
                                               : A[z * c.a.stride + l + i * c.a.ld];
            const H eb = c.b.op == CUBLAS_OP_N ? Bm[z * c.b.stride + l + j * c.b.ld]
                                               : Bm[z * c.b.stride + j + l * c.b.ld];
            acc += F(ea) * F(eb);
          }
          acc *= sp.alpha;
          if (sp.bias) acc += F(static_cast<const H*>(sp.bias)[i]);
          const H* addr = &D[z * c.d.stride + i + j * c.d.ld];
          if (got.count(addr)) ok = false;  // overlapping outputs
          got[addr] = acc;
        }
    // Write after computing (the real GEMM's outputs never alias its inputs here).
    for (auto& [addr, val] : got) *const_cast<H*>(addr) = __float2half(val);
    if (got.size() != expect.size()) ok = false;
    double max_err = 0;
    for (auto& [addr, val] : expect) {
      auto it = got.find(addr);
      if (it == got.end()) {
        ok = false;
        break;
      }
      max_err = std::max(max_err, (double)std::fabs(it->second - val));
    }
    if (max_err > 1e-3) ok = false;
    printf("%-28s m=%ld n=%ld k=%ld batch=%ld opA=%c opB=%c  elements=%zu max_err=%.2e %s\n",
           sp.name, sp.m, sp.n, sp.k, sp.batch, c.a.op == CUBLAS_OP_N ? 'N' : 'T',
           c.b.op == CUBLAS_OP_N ? 'N' : 'T', expect.size(), max_err, ok ? "OK" : "FAIL");
    failures += !ok;
  }
  // Memory accounting: Adam holds Megatron's 18 bytes per parameter (fp32
  // master, moments and main grad; 16-bit parameter), and more tokens never
  // need less memory.
  LayerShape small;
  small.hidden = 1024;
  small.heads = 16;
  small.seq = 512;
  small.micro_batch = 2;
  small.tensor_parallel = 2;
  const int64_t base = WorkloadBytes(small);
  small.adam_params = 1'000'000;
  const int64_t adam = WorkloadBytes(small) - base;
  const bool adam_ok = adam >= 18'000'000 && adam <= 18'000'000 + 6 * 512;
  printf("adam bytes for 1M parameters: %ld %s\n", static_cast<long>(adam),
         adam_ok ? "OK" : "FAIL");
  failures += !adam_ok;
  small.adam_params = 0;
  small.seq = 1024;
  const bool grows = WorkloadBytes(small) > base;
  printf("twice the sequence needs more memory: %s\n", grows ? "OK" : "FAIL");
  failures += !grows;

  printf("%d failures\n", failures);
  return failures != 0;
}
