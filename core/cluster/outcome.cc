#include "core/cluster/outcome.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace vtrain {

void SummariseJobs(double start, ClusterOutcome& out) {
  std::vector<double> jcts;
  double last = start;
  int64_t met = 0;
  for (const JobOutcome& j : out.jobs) {
    out.reallocations += j.reallocations;
    out.fragmented_placements += j.fragmented_placements;
    if (j.finished) {
      jcts.push_back(j.jct_s);
      last = std::max(last, j.finish_s);
    }
    met += j.met_deadline ? 1 : 0;
  }
  out.deadline_satisfaction =
      out.jobs.empty() ? 0 : static_cast<double>(met) / static_cast<double>(out.jobs.size());
  if (!jcts.empty()) {
    double sum = 0;
    for (double j : jcts) sum += j;
    out.avg_jct_s = sum / static_cast<double>(jcts.size());
    std::sort(jcts.begin(), jcts.end());
    out.p95_jct_s =
        jcts[std::min(jcts.size() - 1, static_cast<size_t>(std::ceil(0.95 * jcts.size())) - 1)];
  }
  out.makespan_s = last - start;
}

}  // namespace vtrain
