// The free parameters of the analytical profile generator, in one struct so that
// calibration can fit them (ANALYTICAL fidelity, docs/architecture.md#profiles-and-fidelity).
#ifndef VTRAIN_CORE_PROFILE_ANALYTICAL_PARAMS_H_
#define VTRAIN_CORE_PROFILE_ANALYTICAL_PARAMS_H_

#include "absl/types/span.h"

namespace vtrain {

// The values below are physically plausible starting points (uncalibrated);
// the built-in profiles use the fitted values of core/profile/a100_params.inc.
struct AnalyticalParams {
  // GEMMs: 128x128 output tiles in waves over the SMs, each SM at
  // gemm_max_efficiency of its share of the peak (times gemm_misaligned_factor
  // when a dimension is not a multiple of 8 elements: tensor cores need
  // aligned tiles; the unpadded 50257-word logit GEMM,
  // docs/architecture.md#the-gpt-vocabulary-is-not-padded), plus a fixed
  // gemm_overhead_ns per GEMM (prologue, epilogue, tail).
  double gemm_max_efficiency = 0.85;
  double gemm_overhead_ns = 5000;
  double gemm_misaligned_factor = 0.55;
  // Shape terms of the GEMM model (core/profile/kernel_model.cc): each tile
  // pays a prologue/epilogue worth gemm_k_overhead elements of k, so GEMMs
  // with a small inner dimension (attention's head_dim) run below the peak;
  // a partial last wave costs gemm_wave_quantization of a whole wave (1: none
  // of the wave is reclaimed; 0: perfectly balanced, as stream-K would be);
  // 64x64 tiles, chosen for small outputs, run at gemm_small_tile_efficiency
  // of the large tiles' rate.
  double gemm_k_overhead = 64;
  double gemm_wave_quantization = 0.7;
  double gemm_small_tile_efficiency = 0.7;
  // fp8 GEMMs run at this fraction of the rate gemm_max_efficiency gives
  // bf16 ones, relative to the fp8 peak: Transformer Engine's fp8 GEMMs reach
  // a smaller share of their peak, and its scaling adds work around them.
  // 1 in the built-in sets (the H100 and B200 refit gemm_max_efficiency
  // instead; core/profile/h100_params.inc says why); calibrate can fit it.
  double fp8_gemm_factor = 1.0;
  // Memory-bound kernels reach this fraction of HBM bandwidth.
  double memory_efficiency = 0.75;
  // Fixed GPU time of each memory-bound kernel (ramp-up and tail), so small
  // kernels stream below memory_efficiency.
  double memory_overhead_ns = 2000;
  // No kernel takes less GPU time than this.
  double kernel_min_ns = 2500;
  // Host CPU time to dispatch one kernel (framework + launch). The host runs
  // ahead of the GPU inside an operator; when it cannot keep up, the kernels
  // are separated by gaps (docs/architecture.md#small-shapes-are-host-bound).
  double host_dispatch_ns = 50000;
  // Extra host time at the start of each operator (Python module call).
  double operator_overhead_ns = 0;

  // Collectives: latency + bytes / (bandwidth * efficiency), the latency
  // growing with the number of ranks inside a node (more NVSwitch hops and
  // ring steps: 44 us at 2 ranks, 93 us at 8 for 1 MiB on A100, nccl-tests).
  double intra_node_latency_ns = 20000;
  double intra_node_latency_per_rank_ns = 0;
  double inter_node_latency_ns = 40000;
  double intra_node_efficiency = 0.80;
  double inter_node_efficiency = 0.80;
  // Extra time of each tensor-parallel collective inside training over what
  // it takes in isolation (vTrain saw NCCL ~30% slower;
  // docs/architecture.md#tp-collectives-cost-more-in-training).
  double tp_collective_overhead_ns = 0;
  double tp_collective_overhead_per_rank_ns = 0;  // times the TP degree
  // Bandwidth of tensor- and data-parallel collectives inside training,
  // relative to the collective model (fitted to nccl-tests in isolation):
  // TP all-reduces are small and interleaved with compute, DP ones large.
  double tp_bandwidth_factor = 1.0;
  double dp_bandwidth_factor = 1.0;
  // Host time each TP collective holds its rank (the ranks' hosts meet at
  // it: every rank waits for the slowest one's dispatch), on top of
  // host_dispatch_ns: tp_host_sync_ns + tp_host_sync_per_rank_ns *
  // (t - 1)^tp_host_sync_exponent. It delays host-bound passes and hides
  // behind GPU-bound ones. The wait for the slowest of t ranks need not grow
  // linearly: on the A100 runs, host-bound passes at t = 8 (the whole node)
  // cost ~1.5 ms more per layer and micro-batch than at t = 4, while t = 2
  // and t = 4 cost about the same.
  double tp_host_sync_ns = 0;
  double tp_host_sync_per_rank_ns = 0;
  double tp_host_sync_exponent = 1;
  // The fraction of each TP collective's duration the host waits for before
  // dispatching the next kernel (0: it runs ahead, and a host-bound pass
  // hides the collective in its gaps; 1: the collective completes first).
  double tp_host_blocking = 0;
  // Fixed cost of each pipeline send/receive between stages beyond the
  // collective model's latency (Megatron's blocking p2p exchange: the two
  // stages' hosts and streams meet at it).
  double pipeline_p2p_latency_ns = 0;
};

// One field of AnalyticalParams: its name (as in vtrain.v1.AnalyticalParams),
// the member, the physical range [min, max] a profile set may hold and a
// calibration may fit in, and the scale a fit searches on when it starts from 0.
struct ParamInfo {
  const char* name;
  double AnalyticalParams::*member;
  double min, max;
  double typical;
};
// Every field, in declaration order.
absl::Span<const ParamInfo> AnalyticalParamInfos();

// The upper bound of intra_node_efficiency: NVLink SHARP (NVLS) reduces in
// the NVSwitch, so an H100 node's all-reduce bus bandwidth (479 GB/s,
// data/published/azure-h100-nccl) passes its nominal 225 GB/s per direction.
inline constexpr double kMaxIntraNodeEfficiency = 3.0;

}  // namespace vtrain

#endif  // VTRAIN_CORE_PROFILE_ANALYTICAL_PARAMS_H_
