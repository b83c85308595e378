// A multi-tenant GPU cluster under an elastic, deadline-aware scheduler (the
// vTrain paper's second case study; the scheduling idea of ElasticFlow,
// ASPLOS '23, written from its published description): jobs arrive with a
// deadline, are admitted only if they can meet it with GPUs nobody else was
// promised, get their minimum satisfactory share, and spare GPUs go where they
// speed a job up the most; the plan is redone at every arrival and
// completion, and every change of a running job's GPUs costs a restart. The
// only input that differs between policies is each job's throughput table.
#ifndef VTRAIN_CORE_PLAN_CLUSTER_SIM_H_
#define VTRAIN_CORE_PLAN_CLUSTER_SIM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vtrain {

// Iterations per second by GPU count (counts ascending; 0: no plan fits).
struct ThroughputTable {
  std::vector<int64_t> gpus;
  std::vector<double> iterations_per_s;
  // The throughput with `g` GPUs: of the largest count <= g that has a plan.
  double At(int64_t g) const;
};

struct ClusterJob {
  std::string id;
  double submit_s = 0;
  double iterations = 0;
  double deadline_s = 0;  // absolute, same clock as submit_s
  int table = 0;          // index into the tables given to SimulateCluster
};

struct ClusterSimOptions {
  int64_t total_gpus = 1024;
  double rescale_overhead_s = 30;  // a checkpoint and restart per change of a running job's GPUs
  // Node-aligned placement: an allocation of a node or more takes whole
  // nodes, smaller ones share nodes (0: GPUs are interchangeable).
  int64_t gpus_per_node = 8;
};

struct JobOutcome {
  std::string id;
  bool admitted = false;  // promised its deadline at arrival
  bool finished = false;  // false: no count of the cluster ever had a plan for it
  bool met_deadline = false;
  double finish_s = 0;
  double jct_s = 0;           // finish - submit
  int64_t reallocations = 0;  // changes of GPUs while running
};

struct ClusterOutcome {
  std::vector<JobOutcome> jobs;
  double deadline_satisfaction = 0;     // met / jobs
  double avg_jct_s = 0, p95_jct_s = 0;  // over finished jobs
  double makespan_s = 0;                // first arrival to last completion
  double gpu_utilization = 0;           // allocated GPU-time / (GPUs x makespan)
  double useful_utilization = 0;        // the same without restart pauses
  int64_t reallocations = 0;
  // GPUs allocated over time: (time, GPUs) at every re-plan.
  std::vector<std::pair<double, int64_t>> allocated;
};

// Runs the cluster; deterministic. INVALID_ARGUMENT for a job naming a table
// that does not exist, a non-positive iteration count or a deadline before
// the submission, or a non-positive GPU count.
absl::StatusOr<ClusterOutcome> SimulateCluster(const std::vector<ClusterJob>& jobs,
                                               const std::vector<ThroughputTable>& tables,
                                               const ClusterSimOptions& options);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PLAN_CLUSTER_SIM_H_
