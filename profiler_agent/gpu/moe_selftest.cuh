// The self-test's MoE checks (selftest.cu): the router's softmax top-k and
// its backward, the permutation of the token copies and the weighted
// unpermutation with their backwards (moe_kernels.cuh), in float against
// CPU references in double precision, on a shape that is not a multiple of
// anything (37 tokens, 24 experts, top-3, width 300); then a small MoE
// workload run whole in bf16.
#ifndef VTRAIN_PROFILER_AGENT_GPU_MOE_SELFTEST_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_MOE_SELFTEST_CUH_

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profiler_agent/gpu/kernel_common.cuh"
#include "profiler_agent/gpu/moe_kernels.cuh"
#include "profiler_agent/gpu/selftest_support.cuh"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {
namespace {

void CheckMoeRouter(SelfTest& t) {
  const int64_t n = 37, experts = 24, k = 3;
  const std::vector<float> logits = Random(n * experts, 41, 0, 2);
  const std::vector<float> d_w = Random(n * k, 42);
  Pool pool;
  const float* dl = pool.Upload(logits);
  float* probs = pool.Zeros<float>(n * experts);
  float* w = pool.Zeros<float>(n * k);
  int* id = pool.Zeros<int>(n * k);
  const float* ddw = pool.Upload(d_w);
  float* d_logits = pool.Zeros<float>(n * experts);
  if (!t.Note("moe router", pool)) return;
  pool.Note(cudaGetLastError());
  router_topk_fwd_kernel<float><<<GridFor(n), kThreads>>>(dl, probs, w, id, n, experts, k);
  router_topk_bwd_kernel<float><<<GridFor(n), kThreads>>>(probs, ddw, id, d_logits, n, experts, k);
  pool.Note(cudaGetLastError());
  const std::vector<float> got_w = pool.Download(w, n * k);
  const std::vector<int> got_id = pool.Download(id, n * k);
  const std::vector<float> got_d = pool.Download(d_logits, n * experts);
  if (!t.Note("moe router", pool)) return;
  std::vector<double> want_w(n * k), want_id(n * k), want_d(n * experts);
  std::vector<float> got_idf(n * k);
  for (int64_t r = 0; r < n; ++r) {
    std::vector<double> p(experts);
    double peak = -1e300, sum = 0;
    for (int64_t e = 0; e < experts; ++e) peak = std::max<double>(peak, logits[r * experts + e]);
    for (int64_t e = 0; e < experts; ++e) sum += p[e] = std::exp(logits[r * experts + e] - peak);
    for (double& x : p) x /= sum;
    std::vector<int64_t> order(experts);
    for (int64_t e = 0; e < experts; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double dot = 0;
    for (int64_t j = 0; j < k; ++j) {
      want_w[r * k + j] = p[order[j]];
      want_id[r * k + j] = static_cast<double>(order[j]);
      got_idf[r * k + j] = static_cast<float>(got_id[r * k + j]);
      dot += p[order[j]] * d_w[r * k + j];
    }
    for (int64_t e = 0; e < experts; ++e) {
      double g = 0;
      for (int64_t j = 0; j < k; ++j) g += order[j] == e ? d_w[r * k + j] : 0.0;
      want_d[r * experts + e] = p[e] * (g - dot);
    }
  }
  t.Expect("moe router_topk_fwd weights", MaxError(got_w, want_w), 1e-5);
  t.Expect("moe router_topk_fwd experts", MaxError(got_idf, want_id), 0);
  t.Expect("moe router_topk_bwd", MaxError(got_d, want_d), 1e-5);
}

void CheckMoePermutation(SelfTest& t) {
  const int64_t n = 37, k = 3, h = 300;
  const std::vector<float> x = Random(n * h, 51);
  const std::vector<float> copies_in = Random(n * k * h, 52);
  const std::vector<float> w = Random(n * k, 53, 0.5f, 0.5f);
  const std::vector<float> dy = Random(n * h, 54);
  Pool pool;
  const float* dx_in = pool.Upload(x);
  const float* dc_in = pool.Upload(copies_in);
  const float* dw = pool.Upload(w);
  const float* ddy = pool.Upload(dy);
  float* copies = pool.Zeros<float>(n * k * h);
  float* back = pool.Zeros<float>(n * h);
  float* y = pool.Zeros<float>(n * h);
  float* d_copies = pool.Zeros<float>(n * k * h);
  float* d_w = pool.Zeros<float>(n * k);
  if (!t.Note("moe permutation", pool)) return;
  moe_permute_fwd_kernel<float><<<GridFor(n * k * h), kThreads>>>(dx_in, copies, n, k, h);
  moe_permute_bwd_kernel<float><<<GridFor(n * h), kThreads>>>(dc_in, back, n, k, h);
  moe_unpermute_fwd_kernel<float><<<GridFor(n * h), kThreads>>>(dc_in, dw, y, n, k, h);
  moe_unpermute_bwd_kernel<float>
      <<<static_cast<unsigned>(n * k), kThreads>>>(ddy, dc_in, dw, d_copies, d_w, n, k, h);
  pool.Note(cudaGetLastError());
  const std::vector<float> got_copies = pool.Download(copies, n * k * h);
  const std::vector<float> got_back = pool.Download(back, n * h);
  const std::vector<float> got_y = pool.Download(y, n * h);
  const std::vector<float> got_dc = pool.Download(d_copies, n * k * h);
  const std::vector<float> got_dw = pool.Download(d_w, n * k);
  if (!t.Note("moe permutation", pool)) return;
  // Copy r = j*n + t is token t's j-th copy.
  std::vector<double> want_copies(n * k * h), want_back(n * h, 0), want_y(n * h, 0);
  std::vector<double> want_dc(n * k * h), want_dw(n * k, 0);
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t tok = 0; tok < n; ++tok) {
      const int64_t r = j * n + tok;
      for (int64_t c = 0; c < h; ++c) {
        want_copies[r * h + c] = x[tok * h + c];
        want_back[tok * h + c] += copies_in[r * h + c];
        want_y[tok * h + c] += static_cast<double>(w[tok * k + j]) * copies_in[r * h + c];
        want_dc[r * h + c] = static_cast<double>(w[tok * k + j]) * dy[tok * h + c];
        want_dw[tok * k + j] += static_cast<double>(dy[tok * h + c]) * copies_in[r * h + c];
      }
    }
  }
  t.Expect("moe_permute_fwd", MaxError(got_copies, want_copies), 0);
  t.Expect("moe_permute_bwd", MaxError(got_back, want_back), 1e-5);
  t.Expect("moe_unpermute_fwd", MaxError(got_y, want_y), 1e-5);
  t.Expect("moe_unpermute_bwd copies", MaxError(got_dc, want_dc), 1e-6);
  t.Expect("moe_unpermute_bwd weights", MaxError(got_dw, want_dw), 1e-4);
}

void CheckMoeKernels(SelfTest& t) {
  CheckMoeRouter(t);
  CheckMoePermutation(t);
}

// A small MoE block (16 experts, top-2, EP 2: 8 local experts on 4
// streams) run whole in bf16.
void CheckMoeWorkload(SelfTest& t) {
  LayerShape s = SmallBf16Shape();
  s.kv_heads = 2;
  s.ffn = 256;
  s.llama = true;
  s.experts = 16;
  s.moe_top_k = 2;
  s.expert_parallel = 2;
  RunWorkloadWhole(t, "moe workload bf16", s);
}

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_MOE_SELFTEST_CUH_
