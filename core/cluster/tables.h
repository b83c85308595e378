// The throughput tables of the cluster study (core/cluster/scheduler.h) as its
// scheduler reads them: cut to their frontier, and the steepest step up each
// curve from every count.
#ifndef VTRAIN_CORE_CLUSTER_TABLES_H_
#define VTRAIN_CORE_CLUSTER_TABLES_H_

#include <cstdint>
#include <vector>

#include "core/cluster/scheduler.h"

namespace vtrain {

// Only the counts that beat every smaller count (the others get 0): a job
// given a count slower than a smaller one would run on the smaller one.
ThroughputTable Frontier(const ThroughputTable& t);

// Of the larger counts up to `total_gpus` that add throughput over
// `current` GPUs, the one that adds the most per added GPU (0: none).
int64_t SteepestStep(const ThroughputTable& t, int64_t current, int64_t total_gpus);

// SteepestStep from 0 GPUs, then from each count of `t`, in order.
std::vector<int64_t> SteepestSteps(const ThroughputTable& t, int64_t total_gpus);

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_TABLES_H_
