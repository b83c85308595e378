// The size limit on a deadline promise in the cluster study's admission
// (ClusterSimOptions::promise_limit, core/cluster/scheduler.h). Admission
// counts deadlines met, one per job, so a promise that holds a wide share for
// a long time costs the promises of the many shorter jobs arriving under it.
// A promise may reserve at most `limit` x the cluster's GPUs over the median
// deadline window of the jobs seen so far: measured in the cluster's own
// currency, and known online (nothing about later arrivals is used).
#ifndef VTRAIN_CORE_CLUSTER_PROMISE_LIMIT_H_
#define VTRAIN_CORE_CLUSTER_PROMISE_LIMIT_H_

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace vtrain {

class PromiseLimit {
 public:
  // limit <= 0: every promise is allowed.
  PromiseLimit(double limit, int64_t total_gpus) : limit_(limit), total_gpus_(total_gpus) {}

  // A job arrived with this deadline window (deadline - submission).
  void Saw(double window_s);

  // Whether a promise of `gpus` until `time_left_s` from now is within the
  // limit, given the windows seen so far (none seen: allowed).
  bool Allows(int64_t gpus, double time_left_s) const;

 private:
  double limit_;
  int64_t total_gpus_;
  // The windows seen: the smaller half (largest on top) and the larger half
  // (smallest on top, one more when their count is odd).
  std::priority_queue<double> lower_;
  std::priority_queue<double, std::vector<double>, std::greater<double>> upper_;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_PROMISE_LIMIT_H_
