// The simulation engine: vTrain's Algorithm 1 over a TaskGraph. Each stream
// has a timeline; a task starts at max(its stream is free, all its parents
// are done) and holds its stream for duration + gap. Deterministic.
#ifndef VTRAIN_CORE_ENGINE_ENGINE_H_
#define VTRAIN_CORE_ENGINE_ENGINE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/graph/task_graph.h"

namespace vtrain {

// Where one stream's time went, from 0 to the makespan. The parts add up:
// sum(busy_ns) + gap_ns + sum(exposed_wait_ns) + idle_ns == makespan.
struct StreamStats {
  std::array<int64_t, kNumTaskKinds> busy_ns{};  // task durations by kind
  int64_t gap_ns = 0;                            // gaps between its tasks
  // Waiting for a communication parent, attributed to that parent's kind for
  // the part of the wait its stream was busy without a break up to the
  // parent's end (the exposed communication); the rest is idle.
  std::array<int64_t, kNumTaskKinds> exposed_wait_ns{};
  int64_t idle_ns = 0;  // the rest of the waiting, and the tail to the makespan
  int64_t last_finish_ns = 0;
  int64_t num_tasks = 0;
};

struct SimulationResult {
  int64_t makespan_ns = 0;  // the latest finish over all streams
  std::vector<StreamStats> streams;
  std::vector<int64_t> finish_ns;  // per task; empty unless keep_task_times
};

struct SimulationOptions {
  bool keep_task_times = false;
  // Polled every 65,536 tasks; returning true stops with CANCELLED.
  std::function<bool()> cancelled;
};

// Simulates `graph`. Tasks are processed in id order, which AddTask makes a
// topological order consistent with every stream's order, so one pass is
// exact. Returns CANCELLED when options.cancelled says so.
absl::StatusOr<SimulationResult> Simulate(const TaskGraph& graph,
                                          const SimulationOptions& options = {});

}  // namespace vtrain

#endif  // VTRAIN_CORE_ENGINE_ENGINE_H_
