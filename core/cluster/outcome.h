// The whole-cluster figures of a scheduler run (core/cluster/scheduler.h)
// that follow from its jobs' outcomes alone: deadlines met, JCTs, makespan,
// reallocations.
#ifndef VTRAIN_CORE_CLUSTER_OUTCOME_H_
#define VTRAIN_CORE_CLUSTER_OUTCOME_H_

#include "core/cluster/scheduler.h"

namespace vtrain {

// Fills `out`'s deadline_satisfaction, avg_jct_s, p95_jct_s, makespan_s
// (from `start`, the first arrival), reallocations and fragmented_placements
// from out.jobs.
void SummariseJobs(double start, ClusterOutcome& out);

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_OUTCOME_H_
