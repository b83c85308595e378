// The cluster study as a service call: the request -> response of
// Simulator.ClusterSim and vtrainctl cluster-sim (service/service.h for the
// conventions: Prepare* checks and finds tables, Run* computes). The
// request becomes a core study in proto/cluster_convert.h; here each job
// shape's throughput tables are drawn (through the curve cache when there
// is one) and the scheduler (core/cluster/scheduler.h) runs every window
// once per policy.
#ifndef VTRAIN_SERVICE_CLUSTER_SIM_H_
#define VTRAIN_SERVICE_CLUSTER_SIM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cluster/study.h"
#include "proto/cluster_convert.h"
#include "service/service.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::service {

// At most this many jobs over all of a study's windows (each replayed once
// per policy): past it, RESOURCE_EXHAUSTED.
inline constexpr int64_t kMaxStudyJobs = 20'000'000;

// A job shape: the LLM job on a cluster of a size; one pair of tables each.
struct ClusterShape {
  std::string name;  // "preset/global batch", as ClusterJobOutcome.shape shows it
  PreparedCurves data_parallel, best;
};

struct PreparedClusterSim {
  proto::ClusterSimCall call;
  std::vector<StudyWindow> windows;        // one per cell, in order
  std::vector<std::vector<int>> shape_of;  // per window, per job: index into shapes
  std::vector<ClusterShape> shapes;
};

// INVALID_ARGUMENT naming the field (jobs[3].duration_s, gpus, policies[0],
// rescale_overhead_s, target_load, deadline_slack, cluster.gpu,
// study.windows[1]) for a request that is not a study; RESOURCE_EXHAUSTED
// for one too large. Builds every window (job mix, load, slack).
absl::StatusOr<PreparedClusterSim> PrepareClusterSim(const v1::ClusterSimRequest& request,
                                                     const ProfileSource& source);
// Draws the tables (through `store` when given), then runs each window once
// per policy. CANCELLED.
absl::StatusOr<v1::ClusterSimResponse> RunClusterSim(const PreparedClusterSim& prepared,
                                                     const CallOptions& options,
                                                     CurveStore* store = nullptr);
absl::StatusOr<v1::ClusterSimResponse> ClusterSim(const v1::ClusterSimRequest& request,
                                                  const ProfileSource& source,
                                                  const CallOptions& options = {});

}  // namespace vtrain::service

#endif  // VTRAIN_SERVICE_CLUSTER_SIM_H_
