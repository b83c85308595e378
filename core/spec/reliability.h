// What a long training run meets besides its iterations: node failures,
// checkpoint writes and restarts. The figures a goodput estimate
// (core/predict/goodput.h) is computed from; part of a ClusterSpec.
#ifndef VTRAIN_CORE_SPEC_RELIABILITY_H_
#define VTRAIN_CORE_SPEC_RELIABILITY_H_

#include <string>
#include <vector>

namespace vtrain {

// Node failures (any interruption that stops the job: GPU, HBM, NIC, switch,
// host, software) per 1,000 node-days: 6.50, the rate Kokolis et al. measured
// on Meta's RSC-1 (A100) research cluster over 11 months ("Revisiting
// Reliability in Large-Scale Machine Learning Research Clusters", HPCA 2025,
// arXiv 2410.21680; RSC-2: 2.34).
inline constexpr double kDefaultNodeFailuresPer1000NodeDays = 6.50;
// Checkpoint write bandwidth per writing node, Gb/s: 16 (2 GB/s), the
// "enhanced" storage tier of NVIDIA's DGX SuperPOD reference architecture
// (62 GB/s of writes for a 32-node scalable unit, about 1.9 GB/s a node).
inline constexpr double kDefaultCheckpointGbps = 16;
// From a failure to training again, before the checkpoint is read: detecting
// it, replacing the node and restarting every process. An assumption (the
// studies above report no single figure); the read is added on top.
inline constexpr double kDefaultRestartMinutes = 10;
// Device-to-host copy of a GPU's shard when checkpointing asynchronously:
// PCIe Gen4 x16's practical 25 GB/s (Gen5 doubles it).
inline constexpr double kCheckpointSnapshotBytesPerS = 25e9;

struct ReliabilitySpec {
  double node_failures_per_1000_node_days = kDefaultNodeFailuresPer1000NodeDays;  // 0: none
  double checkpoint_gbps = kDefaultCheckpointGbps;  // per writing node, gigabits/s
  // Asynchronous checkpointing (Megatron-Core's async save): training stops
  // only for the device-to-host snapshot; the write runs behind it.
  bool async_checkpoint = false;
  double restart_minutes = kDefaultRestartMinutes;
  double checkpoint_interval_s = 0;  // 0: the interval that maximises goodput
};

// Appends one message per value out of range, each naming the field
// ("cluster.reliability.checkpoint_gbps") and its flag.
void CheckReliability(const ReliabilitySpec& r, std::vector<std::string>& problems);

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_RELIABILITY_H_
