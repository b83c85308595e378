// The simulation engine: vTrain's Algorithm 1 over a materialised TaskGraph.
// Each stream has a timeline; a task starts at max(its stream is free, all
// its parents are done) and holds its stream for duration + gap.
// Deterministic.
#ifndef VTRAIN_CORE_ENGINE_ENGINE_H_
#define VTRAIN_CORE_ENGINE_ENGINE_H_

#include <functional>

#include "absl/status/statusor.h"
#include "core/engine/timeline.h"
#include "core/graph/task_graph.h"

namespace vtrain {

struct SimulationOptions {
  bool keep_task_times = false;  // fill SimulationResult::finish_ns
  // Polled every 65,536 tasks; returning true stops with CANCELLED.
  std::function<bool()> cancelled;
};

// Simulates `graph`. Tasks are processed in id order, which AddTask makes a
// topological order consistent with every stream's order, so one pass is
// exact. Returns CANCELLED when options.cancelled says so.
absl::StatusOr<SimulationResult> Simulate(const TaskGraph& graph,
                                          const SimulationOptions& options = {});

// Bytes Simulate allocates beside the graph: a completion for each task that
// is some task's parent, and a rank table over the graph's is-parent bits
// (finish_ns, when asked for, adds 8 bytes a task).
int64_t SimulationMemoryBytes(const TaskGraph& graph);

}  // namespace vtrain

#endif  // VTRAIN_CORE_ENGINE_ENGINE_H_
