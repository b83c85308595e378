// Builds the task graph of one training iteration of one data-parallel replica
// (docs/architecture.md#the-method, steps 2-3): pipeline stages, micro-batches under
// a schedule, recomputation, TP/PP/DP communication, optimizer step.
#ifndef VTRAIN_CORE_GRAPH_BUILDER_H_
#define VTRAIN_CORE_GRAPH_BUILDER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/graph/iteration.h"
#include "core/graph/task_graph.h"
#include "core/profile/lookup.h"
#include "core/spec/job.h"

namespace vtrain {

struct IterationGraph {
  TaskGraph graph;
  std::vector<StageInfo> stages;
  int64_t num_micro_batches = 0;
  std::vector<TaskNote> notes;  // per task id, with BuildOptions::keep_notes; else empty
};

// Builds the graph for `job` (validated here), resolving every operator and
// collective through `lookup` (which records their fidelity). Returns
// RESOURCE_EXHAUSTED, naming the limit, when the graph would exceed
// options.max_tasks, and CANCELLED when options.cancelled says so.
// engine/streaming.h simulates the same tasks without storing them.
absl::StatusOr<IterationGraph> BuildIterationGraph(const Job& job, ProfileLookup& lookup,
                                                   const BuildOptions& options);

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_BUILDER_H_
