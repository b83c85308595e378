// The study's windows of a job trace: the jobs as a window holds them before
// they become training jobs, the load a window offers a cluster, and the
// reshaping (arrival compression, deadline slack) the study applies to it.
#ifndef VTRAIN_CORE_CLUSTER_WINDOW_H_
#define VTRAIN_CORE_CLUSTER_WINDOW_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"

namespace vtrain {

// A trace job as the study's window holds it, before it becomes a training
// job: when it arrived, its deadline, how long it ran on the GPUs it asked
// for.
struct WindowJob {
  double submit_s = 0;
  double deadline_s = 0;
  double duration_s = 0;
  int64_t gpus = 0;
};

// The load a window offers a cluster of `total_gpus`: its jobs' GPU-seconds
// at their requested sizes over the cluster's GPU-seconds from the first
// arrival to the last; 0 when they all arrive at once.
double OfferedLoad(const std::vector<WindowJob>& jobs, int64_t total_gpus);

// The most GPUs the window's jobs ask for at once, each running at the GPUs
// it asked for from its submission for its duration (a job ending at t does
// not overlap one starting at t). A cluster larger than this is never full
// at the requested sizes: only the jobs' growth, not their arrivals, can
// make deadlines compete for GPUs.
int64_t PeakRequestedGpus(const std::vector<WindowJob>& jobs);

// Reshapes a window in place, in the spirit of ElasticFlow's evaluation:
//  - `target_load`: every arrival moves towards (or away from) the first, by
//    one factor, until OfferedLoad is target_load; each deadline keeps its
//    slack over its submission;
//  - `deadline_slack` λ: every deadline becomes submit + λ × duration (the
//    job's runtime at the GPUs it asked for).
// INVALID_ARGUMENT, naming the field, for a target load of a window whose
// jobs all arrive at once, or values out of range (target_load in (0, 100],
// deadline_slack in (0, 1000]).
absl::Status ShapeWindow(std::vector<WindowJob>& jobs, int64_t total_gpus,
                         std::optional<double> target_load, std::optional<double> deadline_slack);

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_WINDOW_H_
