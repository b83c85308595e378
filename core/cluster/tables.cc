#include "core/cluster/tables.h"

namespace vtrain {

double ThroughputTable::At(int64_t g) const {
  double best = 0;
  for (size_t i = 0; i < gpus.size() && gpus[i] <= g; ++i) {
    if (iterations_per_s[i] > 0) best = iterations_per_s[i];
  }
  return best;
}

// The step up a table's curve from `current` GPUs: of the larger counts up
// to `total_gpus` that add throughput, the one that adds the most per added
// GPU (0: none).
int64_t SteepestStep(const ThroughputTable& t, int64_t current, int64_t total_gpus) {
  const double now_tput = t.At(current);
  int64_t best = 0;
  double best_slope = 0;
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    const int64_t g = t.gpus[i];
    if (g <= current || g > total_gpus) continue;
    const double slope = (t.iterations_per_s[i] - now_tput) / static_cast<double>(g - current);
    if (slope > best_slope) {
      best_slope = slope;
      best = g;
    }
  }
  return best;
}

// SteepestStep from 0 GPUs and from each count of `t`, computed once per
// table: the re-plan asks it for every job at every step.
std::vector<int64_t> SteepestSteps(const ThroughputTable& t, int64_t total_gpus) {
  std::vector<int64_t> steps = {SteepestStep(t, 0, total_gpus)};
  for (int64_t g : t.gpus) steps.push_back(SteepestStep(t, g, total_gpus));
  return steps;
}

// Only the counts that beat every smaller count: a job given 24 GPUs whose
// 24-GPU plan is slower than its 16-GPU one runs on 16, so the scheduler
// never plans 24 (nor counts a shrink from 32 to 24 as a loss to 24's
// throughput).
ThroughputTable Frontier(const ThroughputTable& t) {
  ThroughputTable out = t;
  double best = 0;
  for (size_t i = 0; i < out.gpus.size(); ++i) {
    if (out.iterations_per_s[i] <= best) {
      out.iterations_per_s[i] = 0;
    } else {
      best = out.iterations_per_s[i];
    }
  }
  return out;
}

int64_t SmallestCount(const ThroughputTable& t) {
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    if (t.iterations_per_s[i] > 0) return t.gpus[i];
  }
  return 0;
}

int64_t PreviousCount(const ThroughputTable& t, int64_t current) {
  int64_t best = 0;
  for (size_t i = 0; i < t.gpus.size() && t.gpus[i] < current; ++i) {
    if (t.iterations_per_s[i] > 0) best = t.gpus[i];
  }
  return best;
}

}  // namespace vtrain
