#include "core/cluster/spine_share.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace vtrain {

std::vector<double> SharedSpineTimes(const std::vector<SpineJob>& jobs, double background) {
  std::vector<double> times;
  times.reserve(jobs.size());
  for (const SpineJob& j : jobs) times.push_back(j.alone_s);
  if (!(background > 0)) return times;
  auto crosses = [](const SpineJob& j) { return j.slices.size() > 1; };
  int64_t leaves = 0;
  for (const SpineJob& j : jobs) {
    for (const LeafMap::Slice& s : j.slices) leaves = std::max(leaves, s.leaf + 1);
  }
  std::vector<double> on_leaf(static_cast<size_t>(leaves));
  // Rounds until no time moves by more than 1e-12 of itself (a job's time
  // moves by its X / background times the change of the others' X / T, a
  // small fraction of their move when X is small against T), at most 64.
  constexpr int kMaxRounds = 64;
  for (int round = 0; round < kMaxRounds; ++round) {
    // Each crossing job's average demand per node, and every leaf's sum.
    std::vector<double> demand(jobs.size(), 0.0);
    std::fill(on_leaf.begin(), on_leaf.end(), 0.0);
    for (size_t i = 0; i < jobs.size(); ++i) {
      const SpineJob& j = jobs[i];
      if (!crosses(j) || !(times[i] > 0)) continue;
      demand[i] = std::min(1.0, std::max(0.0, j.contended_s - j.alone_s) / times[i]);
      for (const LeafMap::Slice& s : j.slices) {
        on_leaf[static_cast<size_t>(s.leaf)] += demand[i] * static_cast<double>(s.nodes);
      }
    }
    std::vector<double> next = times;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const SpineJob& j = jobs[i];
      if (!crosses(j)) continue;
      double others = 0;
      for (const LeafMap::Slice& s : j.slices) {
        others = std::max(others, on_leaf[static_cast<size_t>(s.leaf)] -
                                      demand[i] * static_cast<double>(s.nodes));
      }
      next[i] = j.alone_s + std::max(0.0, j.contended_s - j.alone_s) * others / background;
    }
    double moved = 0;
    for (size_t i = 0; i < times.size(); ++i) {
      moved = std::max(moved, std::abs(next[i] - times[i]) / times[i]);
    }
    times = std::move(next);
    if (moved < 1e-12) break;
  }
  return times;
}

}  // namespace vtrain
