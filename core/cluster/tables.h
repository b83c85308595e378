// The throughput tables of the cluster study (core/cluster/scheduler.h) as its
// scheduler reads them: cut to their frontier, the steepest step up each
// curve from every count, and the other walks along a curve it takes.
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
// `current` GPUs, the one that adds the most per added GPU (0: none). With
// `total_gpus` the room left, where a job steps when its best step does not
// fit: a waiting job that held out for its best first step idled where
// data-parallel's narrower first step had started it (cluster02, 2026, 256
// GPUs: Qwen3-235B jobs 7 days later); a running one that held out for its
// best next step stayed on the few GPUs it started on while others took
// every freed GPU in smaller steps (a Llama 3.1 405B job on 168 of 1,024
// GPUs, 280,000 s later than data-parallel's, whose first step waited for a
// lull).
int64_t SteepestStep(const ThroughputTable& t, int64_t current, int64_t total_gpus);

// SteepestStep from 0 GPUs, then from each count of `t`, in order.
std::vector<int64_t> SteepestSteps(const ThroughputTable& t, int64_t total_gpus);

// The fewest GPUs with a plan (0: none).
int64_t SmallestCount(const ThroughputTable& t);

// The largest count below `current` with a plan (0: none).
int64_t PreviousCount(const ThroughputTable& t, int64_t current);

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_TABLES_H_
