// RunKernelSelfTest (selftest.h): each Llama/fp8 kernel on a small shape
// against a CPU reference in double precision. The kernels are instantiated
// for float here, so the comparison checks the algorithm (indexing,
// masking, online softmax, the gradients) with tight tolerances; the
// workloads run them in fp16/bf16. Shapes are deliberately not multiples of
// the tiles (s = 80 against 32-row tiles) and use grouped-query heads.
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "profiler_agent/gpu/cuda_util.h"
#include "profiler_agent/gpu/fp8_kernels.cuh"
#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/kernel_common.cuh"
#include "profiler_agent/gpu/llama_kernels.cuh"
#include "profiler_agent/gpu/moe_selftest.cuh"
#include "profiler_agent/gpu/selftest.h"
#include "profiler_agent/gpu/selftest_support.cuh"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {
namespace {

// --- RMSNorm -----------------------------------------------------------------

void CheckRmsNorm(SelfTest& t) {
  const int64_t rows = 37;
  const int64_t cols = 300;
  const float eps = 1e-5f;
  const std::vector<float> x = Random(rows * cols, 1, 0.3f);
  const std::vector<float> gamma = Random(cols, 2, 1, 0.1f);
  const std::vector<float> dy = Random(rows * cols, 3);
  Pool pool;
  float* d_x = pool.Upload(x);
  float* dg = pool.Upload(gamma);
  float* ddy = pool.Upload(dy);
  float* y = pool.Zeros<float>(rows * cols);
  float* rstd = pool.Zeros<float>(rows);
  float* dxo = pool.Zeros<float>(rows * cols);
  float* dgamma = pool.Zeros<float>(cols);
  if (!t.Note("rmsnorm", pool)) return;
  rmsnorm_fwd_kernel<float><<<rows, kThreads>>>(d_x, dg, y, rstd, cols, eps);
  const int64_t chunk = 5;
  rmsnorm_bwd_kernel<float><<<CeilDiv(rows, chunk), kThreads, cols * sizeof(float)>>>(
      ddy, d_x, dg, rstd, dxo, dgamma, rows, cols, chunk);
  pool.Note(cudaGetLastError());
  const std::vector<float> got_y = pool.Download(y, rows * cols);
  const std::vector<float> got_dx = pool.Download(dxo, rows * cols);
  const std::vector<float> got_dg = pool.Download(dgamma, cols);
  if (!t.Note("rmsnorm", pool)) return;
  std::vector<double> want_y(rows * cols), want_dx(rows * cols), want_dg(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
    const double rs = 1 / std::sqrt(ss / cols + eps);
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c) dot += gamma[c] * dy[r * cols + c] * x[r * cols + c] * rs;
    dot /= cols;
    for (int64_t c = 0; c < cols; ++c) {
      const double xh = x[r * cols + c] * rs;
      want_y[r * cols + c] = xh * gamma[c];
      want_dx[r * cols + c] = rs * (gamma[c] * dy[r * cols + c] - xh * dot);
      want_dg[c] += dy[r * cols + c] * xh;
    }
  }
  t.Expect("rmsnorm_fwd", MaxError(got_y, want_y), 1e-5);
  t.Expect("rmsnorm_bwd dx", MaxError(got_dx, want_dx), 1e-5);
  t.Expect("rmsnorm_bwd dgamma", MaxError(got_dg, want_dg), 1e-4);
}

// --- Rotary and SwiGLU ------------------------------------------------------------

void CheckRotary(SelfTest& t) {
  const int64_t s = 9, b = 2, heads = 3, d = 8, stride = 40, n = s * b;
  const float base = 10000.0f;
  const std::vector<float> in = Random(n * stride, 4);
  Pool pool;
  float* din = pool.Upload(in);
  float* out = pool.Zeros<float>(n * heads * d);
  float* back = pool.Zeros<float>(n * stride);
  if (!t.Note("rotary", pool)) return;
  // Heads start 4 elements into each row (as K sits after Q in the QKV rows).
  rotary_fwd_kernel<float><<<4, 64>>>(din + 4, stride, out, heads * d, n, heads, d, b, base);
  rotary_bwd_kernel<float><<<4, 64>>>(out, heads * d, back + 4, stride, n, heads, d, b, base);
  pool.Note(cudaGetLastError());
  const std::vector<float> got = pool.Download(out, n * heads * d);
  const std::vector<float> got_back = pool.Download(back, n * stride);
  if (!t.Note("rotary", pool)) return;
  std::vector<double> want(n * heads * d);
  std::vector<float> got_in(n * heads * d);
  std::vector<double> want_in(n * heads * d);
  for (int64_t tok = 0; tok < n; ++tok) {
    const double pos = static_cast<double>(tok / b);
    for (int64_t hd = 0; hd < heads; ++hd) {
      for (int64_t j = 0; j < d / 2; ++j) {
        const double a = pos * std::pow(base, -2.0 * j / d);
        const float* src = &in[tok * stride + 4 + hd * d];
        const int64_t o = (tok * heads + hd) * d;
        want[o + j] = src[j] * std::cos(a) - src[j + d / 2] * std::sin(a);
        want[o + j + d / 2] = src[j + d / 2] * std::cos(a) + src[j] * std::sin(a);
      }
      for (int64_t j = 0; j < d; ++j) {
        got_in[(tok * heads + hd) * d + j] = got_back[tok * stride + 4 + hd * d + j];
        want_in[(tok * heads + hd) * d + j] = in[tok * stride + 4 + hd * d + j];
      }
    }
  }
  t.Expect("rotary_fwd", MaxError(got, want), 1e-5);
  t.Expect("rotary_bwd (inverts the forward)", MaxError(got_in, want_in), 1e-5);
}

void CheckSwiglu(SelfTest& t) {
  const int64_t rows = 13, f = 50;
  const std::vector<float> in = Random(rows * 2 * f, 5, 0, 3);
  const std::vector<float> dy = Random(rows * f, 6);
  Pool pool;
  float* din = pool.Upload(in);
  float* ddy = pool.Upload(dy);
  float* out = pool.Zeros<float>(rows * f);
  float* dgrad = pool.Zeros<float>(rows * 2 * f);
  if (!t.Note("swiglu", pool)) return;
  swiglu_fwd_kernel<float><<<4, 128>>>(din, out, rows, f);
  swiglu_bwd_kernel<float><<<4, 128>>>(ddy, din, dgrad, rows, f);
  pool.Note(cudaGetLastError());
  const std::vector<float> got = pool.Download(out, rows * f);
  const std::vector<float> got_d = pool.Download(dgrad, rows * 2 * f);
  if (!t.Note("swiglu", pool)) return;
  std::vector<double> want(rows * f), want_d(rows * 2 * f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < f; ++c) {
      const double g = in[r * 2 * f + c], u = in[r * 2 * f + f + c], sg = 1 / (1 + std::exp(-g));
      want[r * f + c] = g * sg * u;
      // d/dg of g * sigmoid(g) * u, and d/du.
      want_d[r * 2 * f + c] = dy[r * f + c] * u * (sg + g * sg * (1 - sg));
      want_d[r * 2 * f + f + c] = dy[r * f + c] * g * sg;
    }
  }
  t.Expect("swiglu_fwd", MaxError(got, want), 1e-5);
  t.Expect("swiglu_bwd", MaxError(got_d, want_d), 1e-5);
}

// --- Attention ---------------------------------------------------------------------

struct AttentionCase {
  int64_t s = 80, b = 2, heads = 4, kv = 2, d = 64;
  int64_t n() const { return s * b; }
  int64_t qw() const { return heads * d; }
  int64_t kw() const { return kv * d; }
};

// Naive causal attention in double: O, lse and, for dO, dQ dK dV.
struct AttentionReference {
  std::vector<double> o, lse, dq, dk, dv;
};

AttentionReference NaiveAttention(const AttentionCase& c, const std::vector<float>& q,
                                  const std::vector<float>& k, const std::vector<float>& v,
                                  const std::vector<float>& dout) {
  AttentionReference r;
  r.o.assign(c.n() * c.qw(), 0);
  r.lse.assign(c.n() * c.heads, 0);
  r.dq.assign(c.n() * c.qw(), 0);
  r.dk.assign(c.n() * c.kw(), 0);
  r.dv.assign(c.n() * c.kw(), 0);
  const double scale = 1 / std::sqrt(static_cast<double>(c.d));
  std::vector<double> p(c.s), dp(c.s);
  for (int64_t bi = 0; bi < c.b; ++bi) {
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t g = h / (c.heads / c.kv);
      for (int64_t i = 0; i < c.s; ++i) {
        const int64_t qi = (i * c.b + bi) * c.qw() + h * c.d;
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t kj = (j * c.b + bi) * c.kw() + g * c.d;
          double x = 0;
          for (int64_t e = 0; e < c.d; ++e) x += double(q[qi + e]) * k[kj + e];
          p[j] = x * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t j = 0; j <= i; ++j) p[j] /= sum;
        r.lse[(bi * c.heads + h) * c.s + i] = mx + std::log(sum);
        double delta = 0;
        for (int64_t e = 0; e < c.d; ++e) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += p[j] * v[(j * c.b + bi) * c.kw() + g * c.d + e];
          r.o[qi + e] = o;
          delta += o * dout[qi + e];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t kj = (j * c.b + bi) * c.kw() + g * c.d;
          double x = 0;
          for (int64_t e = 0; e < c.d; ++e) x += double(dout[qi + e]) * v[kj + e];
          const double ds = p[j] * (x - delta);
          for (int64_t e = 0; e < c.d; ++e) {
            r.dv[kj + e] += p[j] * dout[qi + e];
            r.dq[qi + e] += scale * ds * k[kj + e];
            r.dk[kj + e] += scale * ds * q[qi + e];
          }
        }
      }
    }
  }
  return r;
}

void CheckAttention(SelfTest& t) {
  const AttentionCase c;
  const std::vector<float> q = Random(c.n() * c.qw(), 7), k = Random(c.n() * c.kw(), 8);
  const std::vector<float> v = Random(c.n() * c.kw(), 9), dout = Random(c.n() * c.qw(), 10);
  const AttentionReference want = NaiveAttention(c, q, k, v, dout);
  Pool pool;
  FlashArgs<float> p;
  p.q = pool.Upload(q);
  p.k = pool.Upload(k);
  p.v = pool.Upload(v);
  p.q_stride = p.o_stride = c.qw();
  p.k_stride = p.v_stride = p.dk_stride = p.dv_stride = c.kw();
  float* o = pool.Zeros<float>(c.n() * c.qw());
  p.o = o;
  p.lse = pool.Zeros<float>(c.n() * c.heads);
  p.d_o = pool.Upload(dout);
  float* delta = pool.Zeros<float>(c.n() * c.heads);
  p.delta = delta;
  p.dq_accum = pool.Zeros<float>(c.n() * c.qw());
  p.dk = pool.Zeros<float>(c.n() * c.kw());
  p.dv = pool.Zeros<float>(c.n() * c.kw());
  p.s = c.s;
  p.b = c.b;
  p.heads = c.heads;
  p.kv_heads = c.kv;
  p.d = c.d;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  const size_t fwd = FlashFwdSharedBytes(c.d, sizeof(float));
  const size_t bwd = FlashBwdSharedBytes(c.d, sizeof(float));
  pool.Note(cudaFuncSetAttribute(flash_attention_fwd_kernel<float>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fwd));
  pool.Note(cudaFuncSetAttribute(flash_attention_bwd_kernel<float>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bwd));
  if (!t.Note("flash_attention", pool)) return;
  const unsigned tiles = static_cast<unsigned>(CeilDiv(c.s, kFlashTile));
  flash_attention_fwd_kernel<float><<<dim3(tiles, c.b * c.heads), kFlashThreads, fwd>>>(p);
  flash_attention_bwd_preprocess_kernel<float><<<8, kThreads>>>(p, delta);
  flash_attention_bwd_kernel<float><<<dim3(tiles, c.b * c.kv), kFlashThreads, bwd>>>(p);
  pool.Note(cudaGetLastError());
  const std::vector<float> got_o = pool.Download(o, c.n() * c.qw());
  const std::vector<float> got_lse = pool.Download(p.lse, c.n() * c.heads);
  const std::vector<float> got_dq = pool.Download(p.dq_accum, c.n() * c.qw());
  const std::vector<float> got_dk = pool.Download(p.dk, c.n() * c.kw());
  const std::vector<float> got_dv = pool.Download(p.dv, c.n() * c.kw());
  if (!t.Note("flash_attention", pool)) return;
  t.Expect("flash_attention_fwd O", MaxError(got_o, want.o), 1e-4);
  t.Expect("flash_attention_fwd lse", MaxError(got_lse, want.lse), 1e-4);
  t.Expect("flash_attention_bwd dQ", MaxError(got_dq, want.dq), 1e-3);
  t.Expect("flash_attention_bwd dK", MaxError(got_dk, want.dk), 1e-3);
  t.Expect("flash_attention_bwd dV", MaxError(got_dv, want.dv), 1e-3);
}

// --- fp8 ---------------------------------------------------------------------------

void CheckCastTranspose(SelfTest& t) {
  const int64_t rows = 48, cols = 70;
  const std::vector<float> x = Random(rows * cols, 11, 0, 600);  // past E4M3's 448: saturates
  const float sc = 0.9f;
  Pool pool;
  float* dx = pool.Upload(x);
  float* scale = pool.Upload(std::vector<float>{sc});
  float* amax = pool.Zeros<float>(1);
  auto* out = pool.Zeros<__nv_fp8_e4m3>(rows * cols);
  auto* out_t = pool.Zeros<__nv_fp8_e4m3>(rows * cols);
  if (!t.Note("fp8_cast_transpose", pool)) return;
  const dim3 grid(CeilDiv(cols, kCastTile), CeilDiv(rows, kCastTile));
  fp8_cast_transpose_kernel<float, __nv_fp8_e4m3>
      <<<grid, dim3(kCastTile, kCastRows)>>>(dx, scale, out, out_t, amax, rows, cols);
  pool.Note(cudaGetLastError());
  const std::vector<__nv_fp8_e4m3> got = pool.Download(out, rows * cols);
  const std::vector<__nv_fp8_e4m3> got_t = pool.Download(out_t, rows * cols);
  const std::vector<float> got_amax = pool.Download(amax, 1);
  if (!t.Note("fp8_cast_transpose", pool)) return;
  int64_t wrong = 0;
  double max_abs = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const __nv_fp8_e4m3 want(x[r * cols + c] * sc);
      wrong += got[r * cols + c].__x != want.__x;
      wrong += got_t[c * rows + r].__x != want.__x;
      max_abs = std::max(max_abs, std::fabs(double(x[r * cols + c])));
    }
  }
  t.Expect("fp8_cast_transpose (wrong bytes)", static_cast<double>(wrong), 0);
  t.Expect("fp8_cast_transpose amax", std::fabs(got_amax[0] - max_abs) / max_abs, 1e-7);
}

void CheckScaleUpdate(SelfTest& t) {
  // 2 history rows x 6 tensors: the newest row 0, an older row 1.
  std::vector<float> history = {1, 2, 3, 4, 0, 8, 10, 1, 1, 1, 0, 0};
  Pool pool;
  float* h = pool.Upload(history);
  float* scale = pool.Upload(std::vector<float>(6, 1));
  float* inv = pool.Upload(std::vector<float>(6, 1));
  if (!t.Note("fp8_amax_scale_update", pool)) return;
  fp8_amax_scale_update_kernel<<<1, 32>>>(h, scale, inv, 0, 6, 6, 2);
  pool.Note(cudaGetLastError());
  const std::vector<float> got_scale = pool.Download(scale, 6);
  const std::vector<float> got_h = pool.Download(h, 12);
  if (!t.Note("fp8_amax_scale_update", pool)) return;
  // amax per tensor {10, 2, 3, 4, 0, 8}; tensors 2 and 5 are E5M2; tensor 4
  // has no amax and keeps scale 1.
  const std::vector<double> want = {448 / 10.0, 448 / 2.0, 57344 / 3.0, 448 / 4.0, 1, 57344 / 8.0};
  t.Expect("fp8_amax_scale_update scales", MaxError(got_scale, want), 1e-6);
  const std::vector<double> want_h = {0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 8};
  t.Expect("fp8_amax_scale_update history", MaxError(got_h, want_h), 0);
}

// C[m, n] = A[m, k] B[n, k]^T in fp8 (E4M3 x E4M3, then E5M2 x E4M3) with
// dequantisation scales, into bf16.
void CheckFp8Gemm(SelfTest& t) {
  int device = 0, major = 0, minor = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (major * 10 + minor < 89) {
    t.out() << "selftest fp8_gemm: skipped (sm_" << major << minor << " has no fp8 GEMMs)\n";
    return;
  }
  const int64_t m = 48, n = 32, k = 64;
  const std::vector<float> a = Random(m * k, 12, 0, 4), b = Random(n * k, 13, 0, 4);
  for (int pass = 0; pass < 2; ++pass) {
    const bool e5m2 = pass == 1;
    std::vector<uint8_t> qa(m * k), qb(n * k);
    std::vector<double> fa(m * k), fb(n * k);
    for (size_t i = 0; i < qa.size(); ++i) {
      const __nv_fp8_e4m3 x4(a[i]);
      const __nv_fp8_e5m2 x5(a[i]);
      qa[i] = e5m2 ? x5.__x : x4.__x;
      fa[i] = e5m2 ? static_cast<float>(x5) : static_cast<float>(x4);
    }
    for (size_t i = 0; i < qb.size(); ++i) {
      const __nv_fp8_e4m3 x(b[i]);
      qb[i] = x.__x;
      fb[i] = static_cast<float>(x);
    }
    Pool pool;
    const uint8_t* da = pool.Upload(qa);
    const uint8_t* db = pool.Upload(qb);
    const float* sa = pool.Upload(std::vector<float>{0.5f});
    const float* sb = pool.Upload(std::vector<float>{2.0f});
    __nv_bfloat16* c = pool.Zeros<__nv_bfloat16>(m * n);
    void* ws = pool.Zeros<uint8_t>(internal::kWorkspaceBytes);
    if (!t.Note("fp8_gemm", pool)) return;
    internal::GemmSpec g;
    g.name = "selftest_fp8_gemm";
    g.m = m;
    g.n = n;
    g.k = k;
    g.trans_b = true;
    g.a = da;
    g.lda = k;
    g.b = db;
    g.ldb = k;
    g.c = c;
    g.ldc = n;
    internal::GemmTypes types;
    types.a = e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    types.b = CUDA_R_8F_E4M3;
    types.d = CUDA_R_16BF;
    types.a_bytes = types.b_bytes = 1;
    types.a_scale = sa;
    types.b_scale = sb;
    cublasLtHandle_t lt = nullptr;
    std::string e = internal::CheckCublas("cublasLtCreate", cublasLtCreate(&lt));
    {
      internal::Gemm gemm;
      if (e.empty()) e = gemm.Plan(lt, g, types);
      if (e.empty()) e = gemm.Run(lt, nullptr, ws);
      pool.Note(cudaDeviceSynchronize());
    }
    if (lt != nullptr) (void)cublasLtDestroy(lt);
    const std::string name = e5m2 ? "fp8_gemm e5m2 x e4m3" : "fp8_gemm e4m3 x e4m3";
    if (!e.empty()) return t.Fail(name, e);
    const std::vector<__nv_bfloat16> got16 = pool.Download(c, m * n);
    if (!t.Note(name, pool)) return;
    std::vector<float> got(m * n);
    std::vector<double> want(m * n, 0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t l = 0; l < k; ++l) want[i * n + j] += fa[i * k + l] * fb[j * k + l];
        want[i * n + j] *= 0.5 * 2.0;
        got[i * n + j] = __bfloat162float(got16[i * n + j]);
      }
    }
    t.Expect(name, MaxError(got, want), 1e-2);  // bf16 output: 8 bits of mantissa
  }
}

// A small Llama layer built and run whole (every operator twice, the first
// time inside Create), in bf16 and, where the GPU has fp8, in fp8.
void CheckWorkloads(SelfTest& t) {
  int device = 0, major = 0, minor = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  // (llama, fp8): Llama in bf16 and fp8, GPT in fp8 (GPT in 16 bits is
  // tests/gpu/run.sh's `profile --check`).
  const std::pair<bool, bool> modes[] = {{true, false}, {true, true}, {false, true}};
  for (const auto& [llama, fp8] : modes) {
    const std::string name =
        std::string(llama ? "llama" : "gpt") + " workload " + (fp8 ? "fp8" : "bf16");
    if (fp8 && major * 10 + minor < 89) {
      t.out() << "selftest " << name << ": skipped (no fp8 on sm_" << major << minor << ")\n";
      continue;
    }
    LayerShape s = SmallBf16Shape();
    s.kv_heads = llama ? 2 : 0;
    s.ffn = 1408;
    s.llama = llama;
    s.fp8 = fp8;
    s.adam_params = 100000;
    RunWorkloadWhole(t, name, s);
  }
}

}  // namespace

std::string RunKernelSelfTest(std::ostream& out) {
  int devices = 0;
  if (std::string e = CheckCuda("cudaGetDeviceCount", cudaGetDeviceCount(&devices)); !e.empty()) {
    return e;
  }
  if (devices == 0) return "no CUDA device";
  SelfTest t(out);
  CheckRmsNorm(t);
  CheckRotary(t);
  CheckSwiglu(t);
  CheckAttention(t);
  CheckCastTranspose(t);
  CheckScaleUpdate(t);
  CheckFp8Gemm(t);
  CheckMoeKernels(t);
  CheckWorkloads(t);
  CheckMoeWorkload(t);
  if (t.failed().empty()) return std::string();
  return "failed: " + t.failed();
}

}  // namespace vtrain::gpu
