#include "core/cluster/promise_limit.h"

#include <algorithm>

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

Displacement::Displacement(double limit, int64_t total_gpus)
    : limit_(limit),
      total_gpus_(total_gpus),
      tree_(limit > 0 ? static_cast<size_t>(total_gpus) + 1 : 0, 0) {}

void Displacement::Saw(double now, int64_t need) {
  if (!(limit_ > 0)) return;
  if (seen_++ == 0) first_s_ = now;
  last_s_ = now;
  if (need <= 0 || need > total_gpus_) return;  // needs no share: displaces nothing
  for (int64_t i = need; i <= total_gpus_; i += i & -i) ++tree_[static_cast<size_t>(i)];
}

int64_t Displacement::CountUpTo(int64_t gpus) const {
  int64_t n = 0;
  for (int64_t i = std::min(gpus, total_gpus_); i > 0; i -= i & -i) {
    n += tree_[static_cast<size_t>(i)];
  }
  return n;
}

bool Displacement::Allows(int64_t need, int64_t promised, double time_left_s) const {
  if (!(limit_ > 0) || seen_ < 2 || !(last_s_ > first_s_)) return true;
  const double rate_per_s = static_cast<double>(seen_ - 1) / (last_s_ - first_s_);
  // Arrivals whose share fits beside `promised` but not beside it plus
  // this promise: needs in (total - promised - need, total - promised].
  const int64_t room = total_gpus_ - promised;
  const int64_t turned_away = CountUpTo(room) - CountUpTo(room - need);
  const double expected =
      rate_per_s * time_left_s * static_cast<double>(turned_away) / static_cast<double>(seen_);
  return expected <= limit_;
}

}  // namespace vtrain
