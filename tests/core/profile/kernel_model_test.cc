// Physical properties of the shape-aware kernel-time model: GEMM time never
// falls as a dimension grows, small inner dimensions and partial waves cost
// what the parameters say, memory-bound kernels scale with bytes, and the
// host-dispatch floor separates host-bound from GPU-bound sequences.
#include "core/profile/kernel_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/profile/analytical.h"
#include "core/profile/default_profiles.h"
#include "gtest/gtest.h"

namespace vtrain {
namespace {

const GpuSpec& A100() {
  static const GpuSpec gpu = *GpuByName("a100-sxm4-80gb");
  return gpu;
}

int64_t GemmNs(const AnalyticalParams& params, double m, double n, double k, double batch = 1) {
  KernelSequence seq(A100(), DType::kFp16, params);
  seq.Gemm("g", m, n, k, batch);
  return std::move(seq).Finish().front().duration_ns;
}

int64_t MemoryNs(const AnalyticalParams& params, double bytes) {
  KernelSequence seq(A100(), DType::kFp16, params);
  seq.Memory("m", bytes);
  return std::move(seq).Finish().front().duration_ns;
}

// Parameter sets across the physical ranges: the defaults, the built-in
// calibration and the corners of the GEMM shape terms.
std::vector<AnalyticalParams> ParamSets() {
  std::vector<AnalyticalParams> sets = {AnalyticalParams{}, DefaultAnalyticalParams()};
  for (double q : {0.0, 1.0}) {
    for (double k0 : {0.0, 512.0}) {
      for (double small : {0.3, 1.0}) {
        AnalyticalParams p;
        p.gemm_wave_quantization = q;
        p.gemm_k_overhead = k0;
        p.gemm_small_tile_efficiency = small;
        sets.push_back(p);
      }
    }
  }
  return sets;
}

// Among aligned shapes (multiples of 8), and among misaligned ones (odd
// dimensions, gemm_misaligned_factor applies to all of them). An aligned
// GEMM may be faster than a slightly smaller misaligned one: that is what
// padding a dimension buys.
TEST(KernelModelTest, GemmTimeNeverFallsAsADimensionGrows) {
  for (const AnalyticalParams& params : ParamSets()) {
    for (double base : {64.0, 1000.0, 4096.0, 1001.0}) {
      int64_t prev_m = 0, prev_n = 0, prev_k = 0, prev_b = 0;
      const bool odd = std::fmod(base, 2.0) == 1;
      for (double step = 1; step <= 2500; step = std::ceil(step * 1.13)) {
        const double d = odd ? 8 * step + 1 : 8 * step;
        SCOPED_TRACE(absl::StrCat("base ", base, " dim ", d, " q ", params.gemm_wave_quantization));
        const int64_t m = GemmNs(params, d, base, base);
        const int64_t n = GemmNs(params, base, d, base);
        const int64_t k = GemmNs(params, base, base, d);
        const int64_t b = GemmNs(params, base, base, 64, d);
        EXPECT_GE(m, prev_m);
        EXPECT_GE(n, prev_n);
        EXPECT_GE(k, prev_k);
        EXPECT_GE(b, prev_b);
        prev_m = m, prev_n = n, prev_k = k, prev_b = b;
      }
    }
  }
}

TEST(KernelModelTest, SmallInnerDimensionRunsBelowThePeak) {
  AnalyticalParams p;
  p.gemm_overhead_ns = 0;
  p.gemm_k_overhead = 64;
  // Keep both GEMMs compute-bound (a small k is otherwise bound by writing
  // the output): a slow core against full HBM bandwidth.
  p.gemm_max_efficiency = 0.3;
  p.memory_efficiency = 1;
  // FLOP rate of a large output: k = 256 pays the prologue for a quarter of
  // its k, k = 8192 hardly at all.
  const double m = 8192, n = 8192;
  const double rate256 = 2 * m * n * 256 / static_cast<double>(GemmNs(p, m, n, 256));
  const double rate8k = 2 * m * n * 8192 / static_cast<double>(GemmNs(p, m, n, 8192));
  EXPECT_NEAR(rate256 / rate8k, (256.0 / 320) / (8192.0 / (8192 + 64)), 0.01);
  // Without the prologue term the two run at the same rate.
  p.gemm_k_overhead = 0;
  const double flat256 = 2 * m * n * 256 / static_cast<double>(GemmNs(p, m, n, 256));
  const double flat8k = 2 * m * n * 8192 / static_cast<double>(GemmNs(p, m, n, 8192));
  EXPECT_NEAR(flat256 / flat8k, 1.0, 0.01);
}

TEST(KernelModelTest, WaveQuantizationChargesThePartialLastWave) {
  AnalyticalParams whole, smooth;
  for (AnalyticalParams* p : {&whole, &smooth}) {
    p->gemm_overhead_ns = 0;
    p->gemm_k_overhead = 0;
    p->memory_efficiency = 1;
  }
  whole.gemm_wave_quantization = 1;
  smooth.gemm_wave_quantization = 0;
  // Without quantisation the time is proportional to the tiles: one tile
  // more than a full wave of 256 x 128 tiles costs 1/SMs more.
  const double sms = A100().num_sms;
  const double one_wave_m = 256 * sms;
  const double full = static_cast<double>(GemmNs(smooth, one_wave_m, 128, 8192));
  const double over = static_cast<double>(GemmNs(smooth, one_wave_m + 256, 128, 8192));
  EXPECT_NEAR(over / full, (sms + 1) / sms, 0.002);
  // Whole waves never cost less, and over a range of sizes some cost
  // markedly more (the partial last wave; the tile choice softens it).
  double worst = 1;
  for (double m = 128; m <= 60000; m += 128) {
    const double w = static_cast<double>(GemmNs(whole, m, 128, 8192));
    const double s = static_cast<double>(GemmNs(smooth, m, 128, 8192));
    EXPECT_GE(w, s) << m;
    worst = std::max(worst, w / s);
  }
  EXPECT_GT(worst, 1.2);
}
TEST(KernelModelTest, MemoryKernelsAreAFixedCostPlusBytesOverBandwidth) {
  AnalyticalParams p;
  p.kernel_min_ns = 0;
  p.memory_overhead_ns = 3000;
  p.memory_efficiency = 0.8;
  const double bw = A100().hbm_bandwidth_bytes_per_s * 0.8;
  EXPECT_NEAR(static_cast<double>(MemoryNs(p, 1e9)), 3000 + 1e9 / bw * 1e9, 1);
  EXPECT_NEAR(static_cast<double>(MemoryNs(p, 2e9) - MemoryNs(p, 1e9)), 1e9 / bw * 1e9, 1);
  // Small kernels stream below memory_efficiency, large ones approach it.
  const double small_rate = 1e6 / static_cast<double>(MemoryNs(p, 1e6));
  const double large_rate = 1e10 / static_cast<double>(MemoryNs(p, 1e10));
  EXPECT_LT(small_rate, 0.5 * large_rate);
  EXPECT_LT(large_rate * 1e9, bw);
}

TEST(KernelModelTest, HostFloorForSmallKernelsRooflineForLargeOnes) {
  AnalyticalParams p;
  p.host_dispatch_ns = 50000;
  p.operator_overhead_ns = 0;
  // Ten tiny kernels: the host's dispatch sets the pace.
  KernelSequence small(A100(), DType::kFp16, p);
  for (int i = 0; i < 10; ++i) small.Memory("tiny", 1e3);
  std::vector<KernelRecord> tiny = std::move(small).Finish();
  int64_t span = 0;
  for (const KernelRecord& k : tiny) span += k.duration_ns + k.gap_ns;
  EXPECT_EQ(span, 10 * 50000);
  // Ten large GEMMs: the GPU does, with no gaps between them.
  KernelSequence large(A100(), DType::kFp16, p);
  for (int i = 0; i < 10; ++i) large.Gemm("big", 8192, 8192, 8192);
  std::vector<KernelRecord> big = std::move(large).Finish();
  for (size_t i = 0; i + 1 < big.size(); ++i) EXPECT_EQ(big[i].gap_ns, 0);
}

TEST(KernelModelTest, TensorAndDataParallelBandwidthFactorsAreSeparate) {
  AnalyticalParams p;
  p.tp_bandwidth_factor = 0.5;
  p.dp_bandwidth_factor = 2;
  const LinkBandwidths links{150e9, 100e9};
  const CommGroup other{8, 8, 1.0, CommUse::kOther};
  const CommGroup tp{8, 8, 1.0, CommUse::kTensorParallel};
  const CommGroup dp{8, 8, 1.0, CommUse::kDataParallel};
  const double latency = p.intra_node_latency_ns + 8 * p.intra_node_latency_per_rank_ns;
  const double base =
      AnalyticalCollectiveNs(Collective::kAllReduce, 1e9, other, links, p) - latency;
  EXPECT_NEAR(AnalyticalCollectiveNs(Collective::kAllReduce, 1e9, tp, links, p) - latency, 2 * base,
              1);
  EXPECT_NEAR(AnalyticalCollectiveNs(Collective::kAllReduce, 1e9, dp, links, p) - latency, base / 2,
              1);
}

// tp_bandwidth_factor is fitted on NVLink all-reduces: a TP group across
// nodes that the network bounds takes the network's time, as any group does.
TEST(KernelModelTest, TensorParallelBandwidthFactorLeavesTheNetworkAlone) {
  AnalyticalParams p;
  p.tp_bandwidth_factor = 2;
  const LinkBandwidths links{150e9, 100e9};
  const CommGroup other{16, 8, 1.0, CommUse::kOther};
  const CommGroup tp{16, 8, 1.0, CommUse::kTensorParallel};
  const double network = AnalyticalCollectiveNs(Collective::kAllReduce, 1e9, other, links, p);
  EXPECT_DOUBLE_EQ(AnalyticalCollectiveNs(Collective::kAllReduce, 1e9, tp, links, p), network);
  // Inside a node the factor still speeds the TP all-reduce up.
  const CommGroup other_node{8, 8, 1.0, CommUse::kOther};
  const CommGroup tp_node{8, 8, 1.0, CommUse::kTensorParallel};
  EXPECT_LT(AnalyticalCollectiveNs(Collective::kAllReduce, 1e9, tp_node, links, p),
            AnalyticalCollectiveNs(Collective::kAllReduce, 1e9, other_node, links, p));
}

// Transformer Engine's grouped GEMM: one kernel per GEMM, `streams` at a
// time, each round as long as one batched GEMM of that many.
TEST(KernelModelTest, GemmsOnStreamsRunInRoundsOfTheStreamCount) {
  for (const AnalyticalParams& params : ParamSets()) {
    auto kernels = [&](double count) {
      KernelSequence seq(A100(), DType::kFp16, params);
      seq.GemmsOnStreams("g", 512, 3072, 4096, count, 4);
      return std::move(seq).Finish();
    };
    auto total = [&](double count) {
      int64_t ns = 0;
      for (const KernelRecord& k : kernels(count)) ns += k.duration_ns;
      return ns;
    };
    const int64_t four = GemmNs(params, 512, 3072, 4096, 4);
    const int64_t one = GemmNs(params, 512, 3072, 4096, 1);
    EXPECT_EQ(kernels(16).size(), 16u);
    // Each kernel's share is rounded to the nanosecond.
    EXPECT_NEAR(total(4), four, 4);
    EXPECT_NEAR(total(16), 4 * four, 16);
    EXPECT_NEAR(total(5), four + one, 5);
    for (double c = 1; c < 12; ++c) EXPECT_LE(total(c), total(c + 1)) << c;
  }
  // Small per-expert GEMMs: four at a time leave a partial wave each round,
  // which one grouped kernel of all sixteen would not.
  const AnalyticalParams params = DefaultAnalyticalParams();
  KernelSequence seq(A100(), DType::kFp16, params);
  seq.GemmsOnStreams("g", 512, 3072, 4096, 16, 4);
  int64_t streams = 0;
  for (const KernelRecord& k : std::move(seq).Finish()) streams += k.duration_ns;
  EXPECT_GT(streams, GemmNs(params, 512, 3072, 4096, 16));
}

}  // namespace
}  // namespace vtrain
