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

// The later arrivals a promise is expected to turn away (admission's second
// test, ClusterSimOptions::displacement_limit). Deadlines count one per job:
// promising `need` GPUs until a deadline `time_left_s` away keeps one
// deadline, and turns away every arrival before then whose own minimum
// share would have fitted beside the promises already made but no longer
// fits beside this one. Estimated online from the arrivals seen so far:
// their rate, and the shares they needed (a histogram over GPU counts).
class Displacement {
 public:
  // limit <= 0: every promise is allowed.
  Displacement(double limit, int64_t total_gpus);

  // A job arrived at `now` whose deadline needs `need` GPUs (0: none can).
  void Saw(double now, int64_t need);

  // Whether promising `need` more GPUs, `promised` being promised already,
  // until `time_left_s` from now turns away at most `limit` arrivals.
  bool Allows(int64_t need, int64_t promised, double time_left_s) const;

 private:
  int64_t CountUpTo(int64_t gpus) const;  // arrivals seen needing 1..gpus

  double limit_;
  int64_t total_gpus_;
  std::vector<int64_t> tree_;  // Fenwick tree of the needs seen, 1..total_gpus
  int64_t seen_ = 0;           // arrivals
  double first_s_ = 0, last_s_ = 0;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_PROMISE_LIMIT_H_
