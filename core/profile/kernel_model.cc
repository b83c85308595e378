#include "core/profile/kernel_model.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace vtrain {

void KernelSequence::Gemm(const char* name, double m, double n, double k, double batch) {
  const double flops = 2 * m * n * k * batch;
  const double bytes = 2 * (m * k + k * n + m * n) * batch;
  (void)flops;
  // Output tiles of 128x128 run in waves over the SMs, each SM computing a
  // tile's 2 * 128 * 128 * k FLOPs at its share of the peak. A partial tile
  // or a partial last wave costs a whole one (tile and wave quantisation),
  // so the time never decreases when a dimension grows.
  const double tiles = std::ceil(m / 128) * std::ceil(n / 128) * batch;
  const double waves = std::ceil(tiles / gpu_.num_sms);
  double sm_flops_per_s = peak_flops_ / gpu_.num_sms * params_.gemm_max_efficiency;
  if (!Aligned(m) || !Aligned(n) || !Aligned(k)) sm_flops_per_s *= params_.gemm_misaligned_factor;
  const double compute_ns =
      waves * (2 * 128 * 128 * k) / sm_flops_per_s * 1e9 + params_.gemm_overhead_ns;
  const double memory_ns = MemoryNs(bytes);
  Add(name, std::max(compute_ns, memory_ns));
}

void KernelSequence::Memory(const char* name, double bytes) { Add(name, MemoryNs(bytes)); }

void KernelSequence::GemmFp8(const char* name, double m, double n, double k) {
  const double peak = peak_flops_;
  peak_flops_ = gpu_.peak_fp8_flops_per_s;
  Gemm(name, m, n, k);
  peak_flops_ = peak;
}

void KernelSequence::FusedTensorCore(const char* name, double flops, double bytes,
                                     double efficiency) {
  const double compute_ns = flops / (peak_flops_ * efficiency) * 1e9 + params_.gemm_overhead_ns;
  Add(name, std::max(compute_ns, MemoryNs(bytes)));
}

std::vector<KernelRecord> KernelSequence::Finish() && {
  const double dispatch = params_.host_dispatch_ns;
  double finish = 0;
  for (size_t i = 0; i < kernels_.size(); ++i) {
    const double start = std::max(finish, static_cast<double>(i) * dispatch);
    if (i > 0) kernels_[i - 1].gap_ns = std::llround(start - finish);
    finish = start + static_cast<double>(kernels_[i].duration_ns);
  }
  if (!kernels_.empty()) {
    const double next =
        static_cast<double>(kernels_.size()) * dispatch + params_.operator_overhead_ns;
    kernels_.back().gap_ns = std::llround(std::max(0.0, next - finish));
    for (KernelRecord& k : kernels_) k.host_ns = std::llround(dispatch);
    kernels_.front().host_ns += std::llround(params_.operator_overhead_ns);
  }
  return std::move(kernels_);
}

bool KernelSequence::Aligned(double dim) { return std::fmod(dim, 8.0) == 0; }

double KernelSequence::MemoryNs(double bytes) const {
  return bytes / (gpu_.hbm_bandwidth_bytes_per_s * params_.memory_efficiency) * 1e9;
}

void KernelSequence::Add(const char* name, double gpu_ns) {
  KernelRecord k;
  k.name = name;
  k.duration_ns = std::llround(std::max(gpu_ns, params_.kernel_min_ns));
  kernels_.push_back(std::move(k));
}

}  // namespace vtrain
