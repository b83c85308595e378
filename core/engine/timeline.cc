#include "core/engine/timeline.h"

#include <algorithm>

namespace vtrain {
// vTrain §4.3, Algorithm 1 (Timeline::RunAfter, inline in the header): a task
// starts when its stream is free and all its parents are done, and advances
// its stream by duration + gap.
SimulationResult Timeline::Finish() const {
  SimulationResult result;
  result.streams.reserve(streams_.size());
  for (const StreamState& s : streams_) {
    result.makespan_ns = std::max(result.makespan_ns, s.stats.last_finish_ns);
  }
  // The gap after a stream's last task lies beyond its work: count the time
  // from its last finish to the makespan as idle instead.
  for (const StreamState& s : streams_) {
    StreamStats stats = s.stats;
    stats.gap_ns -= s.last_gap_ns;
    stats.idle_ns += result.makespan_ns - stats.last_finish_ns;
    result.streams.push_back(stats);
  }
  return result;
}

}  // namespace vtrain
