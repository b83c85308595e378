// Throughput curves for cluster schedulers: for one job shape (model, global
// batch, GPU type and cluster shape) and a set of GPU counts, the best plan
// that fits at each count and its throughput, under one of two policies:
// `best` (the full 3D plan search) or `data-parallel` (ElasticFlow-style: the
// smallest model-parallel footprint that fits, scaled by data parallelism).
#ifndef VTRAIN_CORE_PLAN_CURVE_H_
#define VTRAIN_CORE_PLAN_CURVE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/search.h"
#include "core/profile/profile.h"
#include "core/spec/job.h"

namespace vtrain {

enum class CurvePolicy {
  kBest,          // the fastest plan over t, d, p, micro-batch (Search)
  kDataParallel,  // a fixed t x p footprint (t inside a node first, then p), scaled by d
};

struct CurveSpec : PlanSpace {
  ModelSpec model;
  ClusterSpec cluster;  // GPU, GPUs per node, bandwidths, price; num_gpus is ignored
  int64_t global_batch = 0;
  DType dtype = DType::kFp16;
  std::vector<int64_t> gpu_counts;  // ascending, distinct, positive
  CurvePolicy policy = CurvePolicy::kBest;
  // The plan space (the base, PlanSpace) is kBest's; kDataParallel takes
  // the first schedule, recomputation, V, SP and sharding, and c = 1.
  // The best achievable at or below each count (3D plans can dip): a count
  // whose own best is slower reuses the plan of a smaller count.
  bool monotone = false;
};

struct CurvePoint {
  int64_t gpus = 0;
  bool fits = false;  // false: no plan of the policy at this count (see no_plan_reason)
  // Why there is no plan, for people: no valid plan (and the first reason),
  // every plan out of memory, the count not a multiple of the data-parallel
  // footprint, the batch not divisible by the data-parallel degree.
  std::string no_plan_reason;
  Job job;  // the plan (job.cluster.num_gpus GPUs busy; <= gpus with monotone)
  double iteration_time_ms = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double peak_memory_bytes = 0;
  double interval_low_ms = 0, interval_high_ms = 0;  // 0 when the set has no band
  // On a leaf/spine fabric (cluster.fabric), the same plan with its nodes
  // spread over the cluster's leaves: what fragmentation costs a scheduler.
  // 0 on a flat fabric.
  double fragmented_iteration_time_ms = 0;
  double fragmented_samples_per_s = 0;
  // On an oversubscribed leaf/spine fabric: both placements again with other
  // jobs' traffic filling one leaf's uplinks (FabricSpec::spine_background =
  // ContendedBackground), what a shared spine costs the plan at most; the
  // cluster study interpolates between these and the figures above. 0 on a
  // flat or non-blocking fabric.
  double contended_iteration_time_ms = 0;
  double fragmented_contended_iteration_time_ms = 0;
  // Computing this point: its wall time and the counts of its predictions.
  SimulationCost simulation;
};

struct CurveOptions {
  int threads = 1;
  std::function<bool()> cancelled;                 // may be empty
  std::function<void(int64_t, int64_t)> progress;  // (counts done, counts); may be empty
};

// The curve. INVALID_ARGUMENT for an empty or unsorted count list or a bad
// shape; CANCELLED; RESOURCE_EXHAUSTED when a count's plan space is too large.
absl::StatusOr<std::vector<CurvePoint>> ThroughputCurve(const CurveSpec& spec,
                                                        const ProfileSet& profiles,
                                                        const CurveOptions& options = {});

}  // namespace vtrain

#endif  // VTRAIN_CORE_PLAN_CURVE_H_
