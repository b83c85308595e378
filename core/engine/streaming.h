// The streaming fast path: simulates one training iteration while its tasks
// are generated (graph/walker.h) instead of storing the graph, so memory does
// not grow with the task count.
#ifndef VTRAIN_CORE_ENGINE_STREAMING_H_
#define VTRAIN_CORE_ENGINE_STREAMING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/timeline.h"
#include "core/graph/iteration.h"
#include "core/profile/lookup.h"
#include "core/spec/job.h"

namespace vtrain {

struct IterationSimulation {
  SimulationResult result;
  std::vector<StageInfo> stages;
  int64_t num_micro_batches = 0;
  int64_t num_tasks = 0;
  // Pipeline actions simulated one by one, and those the periodic fast path
  // (periodic.h) accounted for by jumping over repeating periods.
  int64_t actions_stepped = 0;
  int64_t actions_skipped = 0;
  int64_t periods_skipped = 0;
  int64_t tasks_skipped = 0;  // of num_tasks
};

// Generates the same tasks as BuildIterationGraph (graph/builder.h), in the
// same order, but runs each on a Timeline as it is generated, so the result
// equals Simulate(BuildIterationGraph(...)) (engine/engine.h) with memory
// independent of the task count. `job` is validated here: INVALID_ARGUMENT;
// RESOURCE_EXHAUSTED above options.max_tasks; options.cancelled (may be
// empty) is polled every 65,536 tasks: CANCELLED when it returns true.
absl::StatusOr<IterationSimulation> SimulateIteration(const Job& job, ProfileLookup& lookup,
                                                      const BuildOptions& options);

}  // namespace vtrain

#endif  // VTRAIN_CORE_ENGINE_STREAMING_H_
