// Builds the task graph of one training iteration of one data-parallel
// replica (DESIGN.md §1, steps 2-3): pipeline stages, micro-batches under a
// schedule, recomputation, TP/PP/DP communication, optimizer step.
#ifndef VTRAIN_CORE_GRAPH_BUILDER_H_
#define VTRAIN_CORE_GRAPH_BUILDER_H_

#include <cstdint>
#include "absl/strings/string_view.h"
#include <vector>

#include <functional>

#include "absl/status/statusor.h"
#include "core/engine/timeline.h"
#include "core/graph/task_graph.h"
#include "core/profile/lookup.h"
#include "core/spec/job.h"

namespace vtrain {

enum class Granularity {
  // One task per CUDA kernel and per collective.
  kKernel,
  // The fast path: every run of kernels on one stream that no dependency
  // enters or leaves in the middle becomes one task. Gives exactly the
  // kernel-granularity iteration time.
  kOperator,
};
absl::string_view GranularityName(Granularity g);
absl::StatusOr<Granularity> ParseGranularity(absl::string_view name);

struct StageInfo {
  int64_t first_layer = 0;
  int64_t num_layers = 0;
  bool has_embedding = false;
  bool has_logit = false;
  // Pipeline sends run on the compute stream: Megatron's point-to-point
  // exchanges are synchronous for the sending stage.
  StreamId compute_stream = 0;
  StreamId data_parallel_stream = 0;
  // Time the compute stream spends in TP collectives per iteration; the
  // engine cannot tell it apart once the operator path has merged tasks.
  int64_t tensor_parallel_ns = 0;
  // Time the compute stream spends sending to the neighbouring stages.
  int64_t pipeline_send_ns = 0;
  double parameters_per_gpu = 0;
};

struct IterationGraph {
  TaskGraph graph;
  std::vector<StageInfo> stages;
  int64_t num_micro_batches = 0;
};

struct BuildOptions {
  Granularity granularity = Granularity::kOperator;
  // Larger graphs are refused with RESOURCE_EXHAUSTED before allocation.
  int64_t max_tasks = 100'000'000;
  // BuildIterationGraph polls it every 65,536 tasks and returns CANCELLED
  // when it says so (may be empty).
  std::function<bool()> cancelled;
};

// Builds the graph for `job` (validated here), resolving every operator and
// collective through `lookup` (which records their fidelity). Returns
// RESOURCE_EXHAUSTED, naming the limit, when the graph would exceed
// options.max_tasks.
absl::StatusOr<IterationGraph> BuildIterationGraph(const Job& job, ProfileLookup& lookup,
                                                   const BuildOptions& options);

struct IterationSimulation {
  SimulationResult result;
  std::vector<StageInfo> stages;
  int64_t num_micro_batches = 0;
  int64_t num_tasks = 0;
};

// The streaming path: generates the same tasks as BuildIterationGraph, in the
// same order, but runs each on a Timeline as it is generated instead of
// storing it, so the result equals Simulate(BuildIterationGraph(...)) with
// memory independent of the task count. `cancelled` (may be empty) is polled
// every 65,536 tasks; CANCELLED when it returns true.
absl::StatusOr<IterationSimulation> SimulateIteration(const Job& job, ProfileLookup& lookup,
                                                      const BuildOptions& options,
                                                      const std::function<bool()>& cancelled);

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_BUILDER_H_
