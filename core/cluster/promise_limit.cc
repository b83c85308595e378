#include "core/cluster/promise_limit.h"

namespace vtrain {

// Two heaps keep the median in O(log n) an arrival: `upper_` holds the
// larger ceil(n / 2) windows, so its least is the upper median (index n / 2
// of the sorted windows; two windows give the longer one).
void PromiseLimit::Saw(double window_s) {
  if (upper_.empty() || window_s >= upper_.top()) {
    upper_.push(window_s);
  } else {
    lower_.push(window_s);
  }
  while (upper_.size() > lower_.size() + 1) {
    lower_.push(upper_.top());
    upper_.pop();
  }
  while (upper_.size() < lower_.size()) {
    upper_.push(lower_.top());
    lower_.pop();
  }
}

bool PromiseLimit::Allows(int64_t gpus, double time_left_s) const {
  if (!(limit_ > 0) || upper_.empty()) return true;
  const double budget_gpu_s = limit_ * static_cast<double>(total_gpus_) * upper_.top();
  return static_cast<double>(gpus) * time_left_s <= budget_gpu_s;
}

}  // namespace vtrain
