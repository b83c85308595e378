#include "core/profile/kernel_model.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace vtrain {
namespace {

// Output tiles the GEMM model chooses between, as a library's heuristic does:
// large tiles at full efficiency, small ones (more parallelism for small
// outputs) at gemm_small_tile_efficiency.
struct Tile {
  double m, n;
  bool small;
};
constexpr Tile kTiles[] = {{256, 128, false}, {128, 128, false}, {64, 64, true}};

}  // namespace

double KernelSequence::GemmComputeNs(double m, double n, double k, double batch) const {
  double sm_flops_per_s = peak_flops_ / gpu_.num_sms * params_.gemm_max_efficiency;
  if (!Aligned(m) || !Aligned(n) || !Aligned(k)) sm_flops_per_s *= params_.gemm_misaligned_factor;
  // Output tiles run in waves over the SMs, each SM computing one tile's
  // 2 * tile_m * tile_n * k FLOPs at its share of the peak, plus a fixed
  // prologue/epilogue worth gemm_k_overhead elements of k (small-k loss).
  // A partial tile costs a whole one; a partial last wave costs a whole one to
  // the extent gemm_wave_quantization (stream-K / split-K scheduling smooths
  // it). Every term is non-decreasing in m, n, k and batch, and so is the
  // minimum over tiles.
  const double q = params_.gemm_wave_quantization;
  double best = 0;
  bool first = true;
  for (const Tile& tile : kTiles) {
    const double tiles = std::ceil(m / tile.m) * std::ceil(n / tile.n) * batch;
    const double exact = tiles / gpu_.num_sms;
    const double waves = (1 - q) * exact + q * std::ceil(exact);
    const double rate = sm_flops_per_s * (tile.small ? params_.gemm_small_tile_efficiency : 1.0);
    const double ns = waves * 2 * tile.m * tile.n * (k + params_.gemm_k_overhead) / rate * 1e9;
    if (first || ns < best) best = ns;
    first = false;
  }
  return best + params_.gemm_overhead_ns;
}

void KernelSequence::Gemm(const char* name, double m, double n, double k, double batch) {
  const double bytes = 2 * (m * k + k * n + m * n) * batch;
  // The GPU-bound roofline: the slower of the tiles' compute and the operands'
  // HBM traffic. The host-bound floor (dispatch) is applied by Finish.
  Add(name, std::max(GemmComputeNs(m, n, k, batch), MemoryNs(bytes)));
}

void KernelSequence::Memory(const char* name, double bytes) { Add(name, MemoryNs(bytes)); }

void KernelSequence::GemmFp8(const char* name, double m, double n, double k, double batch,
                             double rate) {
  const double peak = peak_flops_;
  peak_flops_ = gpu_.peak_fp8_flops_per_s * rate * params_.fp8_gemm_factor;
  Gemm(name, m, n, k, batch);
  peak_flops_ = peak;
}

void KernelSequence::GemmsOnStreams(const char* name, double m, double n, double k, double count,
                                    double streams, double fp8_rate) {
  const double peak = peak_flops_;
  if (fp8_rate > 0) peak_flops_ = gpu_.peak_fp8_flops_per_s * fp8_rate * params_.fp8_gemm_factor;
  const double bytes = 2 * (m * k + k * n + m * n);
  const double at_once = std::max(1.0, std::floor(streams));
  for (double left = std::floor(count); left > 0; left -= at_once) {
    const double batch = std::min(left, at_once);
    const double round = std::max(GemmComputeNs(m, n, k, batch), MemoryNs(bytes * batch));
    for (double i = 0; i < batch; ++i) Add(name, round / batch);
  }
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

// Streaming at memory_efficiency of the HBM bandwidth after a fixed
// memory_overhead_ns (launch ramp and tail), so small kernels reach a lower
// effective bandwidth than large ones.
double KernelSequence::MemoryNs(double bytes) const {
  return bytes / (gpu_.hbm_bandwidth_bytes_per_s * params_.memory_efficiency) * 1e9 +
         params_.memory_overhead_ns;
}

void KernelSequence::Add(const char* name, double gpu_ns) {
  KernelRecord k;
  k.name = name;
  k.duration_ns = std::llround(std::max(gpu_ns, params_.kernel_min_ns));
  kernels_.push_back(std::move(k));
}

}  // namespace vtrain
