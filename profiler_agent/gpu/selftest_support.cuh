// What the self-test's checks share (selftest.cu, moe_selftest.cuh): device
// buffers freed together, deterministic random inputs, the error measure,
// the per-check verdict lines and a workload run whole.
#ifndef VTRAIN_PROFILER_AGENT_GPU_SELFTEST_SUPPORT_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_SELFTEST_SUPPORT_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "profiler_agent/gpu/cuda_util.h"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {
namespace {

using internal::CheckCuda;

// Device buffers freed together; the first CUDA error is kept.
class Pool {
 public:
  Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool() {
    for (void* p : ptrs_) (void)cudaFree(p);
  }
  template <class P>
  P* Upload(const std::vector<P>& host) {
    P* d = Zeros<P>(host.size());
    if (d != nullptr)
      Note(cudaMemcpy(d, host.data(), host.size() * sizeof(P), cudaMemcpyHostToDevice));
    return d;
  }
  template <class P>
  P* Zeros(size_t n) {
    void* d = nullptr;
    if (!error_.empty() || !Note(cudaMalloc(&d, std::max<size_t>(n, 1) * sizeof(P))))
      return nullptr;
    ptrs_.push_back(d);
    Note(cudaMemset(d, 0, std::max<size_t>(n, 1) * sizeof(P)));
    return static_cast<P*>(d);
  }
  template <class P>
  std::vector<P> Download(const P* d, size_t n) {
    std::vector<P> host(n);
    if (d != nullptr && error_.empty()) {
      Note(cudaDeviceSynchronize());
      Note(cudaMemcpy(host.data(), d, n * sizeof(P), cudaMemcpyDeviceToHost));
    }
    return host;
  }
  bool Note(cudaError_t e) {
    if (e != cudaSuccess && error_.empty()) error_ = CheckCuda("selftest", e);
    return e == cudaSuccess;
  }
  const std::string& error() const { return error_; }

 private:
  std::vector<void*> ptrs_;
  std::string error_;
};

std::vector<float> Random(size_t n, uint32_t seed, float offset = 0, float scale = 1) {
  std::vector<float> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = offset + scale * (static_cast<float>(x >> 8) / 8388608.0f - 1.0f);
  }
  return v;
}

// Largest |got - want| / (1 + |want|).
double MaxError(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i];
    e = std::max(e, std::isfinite(g) ? std::fabs(g - want[i]) / (1 + std::fabs(want[i])) : 1e30);
  }
  return e;
}

class SelfTest {
 public:
  explicit SelfTest(std::ostream& out) : out_(out) {}

  void Expect(const std::string& name, double error, double tolerance) {
    const bool ok = error <= tolerance;
    out_ << "selftest " << name << ": max error " << error << " (tolerance " << tolerance << ") "
         << (ok ? "ok" : "FAILED") << "\n";
    if (!ok) failed_ += (failed_.empty() ? "" : ", ") + name;
  }
  void Fail(const std::string& name, const std::string& why) {
    out_ << "selftest " << name << ": FAILED: " << why << "\n";
    failed_ += (failed_.empty() ? "" : ", ") + name;
  }
  bool Note(const std::string& name, const Pool& pool) {
    if (pool.error().empty()) return true;
    Fail(name, pool.error());
    return false;
  }
  std::string failed() const { return failed_; }
  std::ostream& out() { return out_; }

 private:
  std::ostream& out_;
  std::string failed_;
};

// The self-test's small bf16 layer (hidden 512, 8 heads, 96 tokens, 2
// sequences, a 1,024-token vocabulary); each check sets the rest.
LayerShape SmallBf16Shape() {
  LayerShape s;
  s.hidden = 512;
  s.heads = 8;
  s.seq = 96;
  s.micro_batch = 2;
  s.vocab = 1024;
  s.bf16 = true;
  return s;
}

// Builds the workload of `s` and runs each of its operators once: check
// `name` passes when every one ran.
void RunWorkloadWhole(SelfTest& t, const std::string& name, const LayerShape& s) {
  std::string error = ValidateShape(s);
  std::unique_ptr<LayerWorkload> w;
  if (error.empty()) w = LayerWorkload::Create(s, &error);
  for (const std::string& op : w ? w->Operators() : std::vector<std::string>()) {
    if (std::string e = w->Run(op); !e.empty()) {
      error = op + ": " + e;
      break;
    }
  }
  if (error.empty() && w) error = w->Synchronize();
  if (!error.empty()) {
    t.Fail(name, error);
  } else {
    t.out() << "selftest " << name << ": " << w->Operators().size() << " operators ran ok\n";
  }
}

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_SELFTEST_SUPPORT_CUH_
