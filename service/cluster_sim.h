// The scheduling case study as a service call: the request -> response of
// Simulator.ClusterSim and vtrainctl cluster-sim (service/service.h for the
// conventions: Prepare* checks and finds tables, Run* computes).
#ifndef VTRAIN_SERVICE_CLUSTER_SIM_H_
#define VTRAIN_SERVICE_CLUSTER_SIM_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/cluster_sim.h"
#include "service/service.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::service {

inline constexpr int64_t kMaxClusterJobs = 100'000;
inline constexpr int64_t kMaxClusterGpus = 65'536;

// The GPT job a trace job becomes by the GPUs it used: 1: gpt3-350m, 2:
// gpt3-1.3b, 4: gpt3-2.7b, 8: gpt3-6.7b, 16-32: gpt3-13b, more: gpt3-175b;
// global batch 16 x its GPUs rounded up to a power of two in [32, 1536].
std::pair<std::string, int64_t> LlmShape(int64_t gpus);

struct PreparedClusterSim {
  v1::ClusterSimRequest request;
  std::vector<std::string> policies;  // "elasticflow" / "vtrain", in order
  std::vector<int> shape_of;          // per job: index into the tables
  std::vector<std::string> shape_names;
  // Per distinct shape: the data-parallel and the best-plan curves.
  std::vector<PreparedCurves> data_parallel, best;
  ClusterSimOptions options;
  // The window's offered load as traced and as simulated (request's jobs are
  // already shaped by target_load and deadline_slack).
  double trace_load = 0, offered_load = 0;
  int64_t peak_requested_gpus = 0;  // PeakRequestedGpus of the shaped window
};

// INVALID_ARGUMENT naming the field (jobs[3].duration_s, gpus, policies[0],
// rescale_overhead_s, target_load, deadline_slack, cluster.gpu) for a request
// that is not a study. Applies target_load and deadline_slack (ShapeWindow).
absl::StatusOr<PreparedClusterSim> PrepareClusterSim(const v1::ClusterSimRequest& request,
                                                     const ProfileSource& source);
// Draws the tables (through `store` when given), then runs the cluster once
// per policy. CANCELLED.
absl::StatusOr<v1::ClusterSimResponse> RunClusterSim(const PreparedClusterSim& prepared,
                                                     const CallOptions& options,
                                                     CurveStore* store = nullptr);
absl::StatusOr<v1::ClusterSimResponse> ClusterSim(const v1::ClusterSimRequest& request,
                                                  const ProfileSource& source,
                                                  const CallOptions& options = {});

}  // namespace vtrain::service

#endif  // VTRAIN_SERVICE_CLUSTER_SIM_H_
