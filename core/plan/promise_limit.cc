#include "core/plan/promise_limit.h"

#include <algorithm>

namespace vtrain {

bool PromiseLimit::Allows(int64_t gpus, double time_left_s) const {
  if (!(limit_ > 0) || windows_.empty()) return true;
  // The upper median, so that two windows give the longer one.
  std::vector<double> w = windows_;
  const auto mid = w.begin() + static_cast<std::ptrdiff_t>(w.size() / 2);
  std::nth_element(w.begin(), mid, w.end());
  const double budget_gpu_s = limit_ * static_cast<double>(total_gpus_) * *mid;
  return static_cast<double>(gpus) * time_left_s <= budget_gpu_s;
}

}  // namespace vtrain
