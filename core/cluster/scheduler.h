// A multi-tenant GPU cluster under an elastic, deadline-aware scheduler (the
// vTrain paper's second case study; the scheduling idea of ElasticFlow,
// ASPLOS '23, written from its published description): jobs arrive with a
// deadline, are admitted only if they can meet it with GPUs nobody else was
// promised (and not too large for the cluster's usual deadlines, nor turning
// away more later arrivals than the one deadline kept:
// ClusterSimOptions::promise_limit, displacement_limit), get their minimum
// satisfactory share,
// and spare GPUs go where they speed a job up the most; the plan is redone at
// every arrival and completion, and every change of a running job's GPUs
// costs a restart. The only input that differs between policies is each
// job's throughput table.
#ifndef VTRAIN_CORE_CLUSTER_SCHEDULER_H_
#define VTRAIN_CORE_CLUSTER_SCHEDULER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vtrain {

// Iterations per second by GPU count (counts ascending; 0: no plan fits).
struct ThroughputTable {
  std::vector<int64_t> gpus;
  std::vector<double> iterations_per_s;
  // The throughput with `g` GPUs: of the largest count <= g that has a plan.
  double At(int64_t g) const;
};

// One job shape's throughput wherever the scheduler may place it: packed on
// as few leaves as its nodes need, spread over more (its collectives then
// cross the spine), and both again with a leaf's uplinks full of other jobs'
// traffic. On a flat fabric only `packed` is read.
struct PlacementTables {
  PlacementTables() = default;
  // A flat fabric's: the packed table alone.
  PlacementTables(ThroughputTable packed_table)  // NOLINT(google-explicit-constructor)
      : packed(std::move(packed_table)) {}
  ThroughputTable packed;
  // With ClusterSimOptions::nodes_per_leaf; unset: `packed` wherever it lands.
  std::optional<ThroughputTable> spread;
  // With ClusterSimOptions::contended_background > 0; unset: other jobs'
  // traffic costs it nothing.
  std::optional<ThroughputTable> packed_contended, spread_contended;
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
  // Nodes under each leaf switch of a leaf/spine fabric (0: one flat
  // fabric). Jobs of a node or more are placed on leaves, packed as tightly
  // as the free nodes allow, and run at their spread table's throughput
  // when they span more leaves than they need. Needs gpus_per_node > 0.
  int64_t nodes_per_leaf = 0;
  // The other jobs' traffic, in nodes' worth per leaf, at which the
  // contended tables were drawn (ContendedBackground: K / R). > 0: jobs on
  // more than one leaf share their leaves' uplinks (SharedSpineTimes,
  // core/cluster/spine_share.h); 0: each job has the spine to itself.
  double contended_background = 0;
  // Admission also refuses a promise that reserves more GPU-time (the job's
  // minimum share x the time left to its deadline) than promise_limit x the
  // cluster's GPUs over the median deadline window (deadline - submission)
  // of the jobs arrived so far: one long, wide promise would otherwise hold
  // the GPUs that many later, shorter ones need. Refused jobs still run
  // best-effort. 0: no limit (ElasticFlow's admission).
  double promise_limit = 2;
  // Admission also refuses a promise expected to turn away more than this
  // many later arrivals: those arriving before its deadline (at the rate
  // seen so far) whose own minimum share (as the shares seen so far) would
  // fit beside the promises already made but not beside this one
  // (Displacement, core/cluster/promise_limit.h). Deadlines count one per
  // job, so 1: a promise may cost at most the one deadline it keeps. 0: no
  // limit.
  double displacement_limit = 1;
};

struct JobOutcome {
  std::string id;
  bool admitted = false;  // promised its deadline at arrival
  bool finished = false;  // false: no count of the cluster ever had a plan for it
  bool met_deadline = false;
  double finish_s = 0;
  double jct_s = 0;                   // finish - submit
  int64_t reallocations = 0;          // changes of GPUs while running
  int64_t fragmented_placements = 0;  // placements on more leaves than needed
};

struct ClusterOutcome {
  std::vector<JobOutcome> jobs;
  double deadline_satisfaction = 0;     // met / jobs
  double avg_jct_s = 0, p95_jct_s = 0;  // over finished jobs
  double makespan_s = 0;                // first arrival to last completion
  double gpu_utilization = 0;           // allocated GPU-time / (GPUs x makespan)
  double useful_utilization = 0;        // the same without restart pauses
  int64_t reallocations = 0;
  int64_t fragmented_placements = 0;  // summed over jobs
  // GPU-time lost to other jobs' traffic on shared uplinks: running GPU-time
  // times the share of throughput each job lost to it.
  double spine_shared_gpu_s = 0;
  // GPUs allocated over time: (time, GPUs) at every re-plan.
  std::vector<std::pair<double, int64_t>> allocated;
};

// Runs the cluster; deterministic. INVALID_ARGUMENT for a job naming a table
// that does not exist, a non-positive iteration count or a deadline before
// the submission, a non-positive GPU count, or a negative promise_limit or
// displacement_limit.
absl::StatusOr<ClusterOutcome> SimulateCluster(const std::vector<ClusterJob>& jobs,
                                               const std::vector<PlacementTables>& tables,
                                               const ClusterSimOptions& options);

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_SCHEDULER_H_
