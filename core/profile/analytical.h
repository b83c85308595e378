// The analytical profile generator: the kernels a Megatron-style GPT layer
// launches, timed by a roofline model, and an alpha-beta collective model.
#ifndef VTRAIN_CORE_PROFILE_ANALYTICAL_H_
#define VTRAIN_CORE_PROFILE_ANALYTICAL_H_

#include <cstdint>
#include <vector>

#include "core/profile/analytical_params.h"
#include "core/profile/profile.h"
#include "core/spec/gpu.h"

namespace vtrain {

// The kernel sequence `key` launches on `gpu`, with durations from the
// roofline model and gaps from the host-dispatch model in `params`.
std::vector<KernelRecord> GenerateOperatorKernels(const GpuSpec& gpu, const OperatorKey& key,
                                                  const AnalyticalParams& params);

// What a collective is for: tensor- and data-parallel collectives inside
// training get their own bandwidth factors (AnalyticalParams).
// Pipeline transfers pay a fixed pipeline_p2p_latency_ns on top.
enum class CommUse { kOther, kTensorParallel, kDataParallel, kPipeline };

// Where the ranks of one collective sit.
struct CommGroup {
  int64_t ranks = 1;
  int64_t ranks_per_node = 1;  // ranks of this group on one node
  // Fraction of the node's NIC bandwidth this group gets while every group on
  // the node communicates at once (ranks_per_node / GPUs per node for
  // symmetric collectives).
  double nic_fraction = 1.0;
  CommUse use = CommUse::kOther;
  // How much longer the cross-node part takes because the group's hops, and
  // those of the groups that run with it, share oversubscribed leaf uplinks
  // (core/spec/fabric.h SpineLoad); 1 on a flat fabric.
  double spine_slowdown = 1;
  int64_t nodes() const { return (ranks + ranks_per_node - 1) / ranks_per_node; }
};

// Bandwidths the collective model uses.
struct LinkBandwidths {
  double intra_node_bytes_per_s = 0;  // per GPU, one direction
  double inter_node_bytes_per_s = 0;  // per node
};

// Latency in ns of `collective` over `bytes` (the buffer size nccl-tests
// reports; for send_recv the message) in `group`: ring algorithm,
// t = latency + factor * bytes / (bandwidth * efficiency) with factor
// 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter, 1 for
// send/recv; across nodes the slower of the NVLink and NIC terms (vTrain's
// inter-node model t = S/B * 2(n-1)/n * alpha). The bandwidths of TP and DP
// groups are scaled by tp_bandwidth_factor and dp_bandwidth_factor; the
// NIC term is multiplied by group.spine_slowdown.
double AnalyticalCollectiveNs(Collective collective, double bytes, const CommGroup& group,
                              const LinkBandwidths& links, const AnalyticalParams& params);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PROFILE_ANALYTICAL_H_
