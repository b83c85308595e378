#include "core/profile/analytical_params.h"

namespace vtrain {
namespace {

// Bounds keep the fit physical: efficiencies in (0, 1.5] (NVSwitch all-reduce
// bus bandwidth exceeds the nominal 150 GB/s), the intra-node one up to
// kMaxIntraNodeEfficiency (NVLink SHARP reduces in the switch, so H100
// all-reduce bus bandwidth, 479 GB/s, passes the nominal 225), times
// non-negative.
constexpr ParamInfo kParams[] = {
    {"gemm_max_efficiency", &AnalyticalParams::gemm_max_efficiency, 0.05, 1.0, 0.8},
    {"gemm_overhead_ns", &AnalyticalParams::gemm_overhead_ns, 0, 1e6, 5000},
    {"gemm_misaligned_factor", &AnalyticalParams::gemm_misaligned_factor, 0.05, 1.0, 0.5},
    {"gemm_k_overhead", &AnalyticalParams::gemm_k_overhead, 0, 4096, 64},
    {"gemm_wave_quantization", &AnalyticalParams::gemm_wave_quantization, 0, 1.0, 1.0},
    {"gemm_small_tile_efficiency", &AnalyticalParams::gemm_small_tile_efficiency, 0.1, 1.0, 0.8},
    {"memory_efficiency", &AnalyticalParams::memory_efficiency, 0.05, 1.0, 0.7},
    {"memory_overhead_ns", &AnalyticalParams::memory_overhead_ns, 0, 1e5, 2000},
    {"kernel_min_ns", &AnalyticalParams::kernel_min_ns, 0, 1e5, 2000},
    {"host_dispatch_ns", &AnalyticalParams::host_dispatch_ns, 0, 1e6, 20000},
    {"operator_overhead_ns", &AnalyticalParams::operator_overhead_ns, 0, 1e7, 10000},
    {"intra_node_latency_ns", &AnalyticalParams::intra_node_latency_ns, 0, 1e6, 20000},
    {"intra_node_latency_per_rank_ns", &AnalyticalParams::intra_node_latency_per_rank_ns, 0, 1e5,
     5000},
    {"inter_node_latency_ns", &AnalyticalParams::inter_node_latency_ns, 0, 1e6, 20000},
    {"intra_node_efficiency", &AnalyticalParams::intra_node_efficiency, 0.05,
     kMaxIntraNodeEfficiency, 0.8},
    {"inter_node_efficiency", &AnalyticalParams::inter_node_efficiency, 0.05, 1.5, 0.8},
    {"tp_collective_overhead_ns", &AnalyticalParams::tp_collective_overhead_ns, 0, 1e7, 50000},
    {"tp_collective_overhead_per_rank_ns", &AnalyticalParams::tp_collective_overhead_per_rank_ns, 0,
     1e6, 20000},
    {"tp_bandwidth_factor", &AnalyticalParams::tp_bandwidth_factor, 0.05, 2.0, 1.0},
    {"dp_bandwidth_factor", &AnalyticalParams::dp_bandwidth_factor, 0.05, 2.0, 1.0},
    {"tp_host_sync_ns", &AnalyticalParams::tp_host_sync_ns, 0, 1e6, 20000},
    {"tp_host_sync_per_rank_ns", &AnalyticalParams::tp_host_sync_per_rank_ns, 0, 1e5, 10000},
    {"tp_host_sync_exponent", &AnalyticalParams::tp_host_sync_exponent, 0.5, 4, 1},
    {"tp_host_blocking", &AnalyticalParams::tp_host_blocking, 0, 1, 0.5},
    {"pipeline_p2p_latency_ns", &AnalyticalParams::pipeline_p2p_latency_ns, 0, 1e6, 50000},
    {"fp8_gemm_factor", &AnalyticalParams::fp8_gemm_factor, 0.2, 1.5, 1.0},
};

}  // namespace

absl::Span<const ParamInfo> AnalyticalParamInfos() { return kParams; }

}  // namespace vtrain
