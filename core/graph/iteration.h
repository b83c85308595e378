// The vocabulary of one training iteration's tasks, shared by the graph
// builder (graph/builder.h) and the streaming simulator (engine/streaming.h):
// task granularity, what each pipeline stage holds, and the build options.
#ifndef VTRAIN_CORE_GRAPH_ITERATION_H_
#define VTRAIN_CORE_GRAPH_ITERATION_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/graph/task_graph.h"

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
  // TP collective time hidden behind GEMMs (tp_comm_overlap).
  int64_t tensor_parallel_hidden_ns = 0;
  // Of tensor_parallel_ns: context-parallel and expert-parallel exchanges.
  int64_t context_parallel_ns = 0, expert_parallel_ns = 0;
  // The distributed optimizer's parameter all-gather on the compute stream,
  // and the part of it hidden under the next forward (param_gather_overlap).
  int64_t param_gather_ns = 0;
  int64_t param_gather_hidden_ns = 0;
  // Time the compute stream spends sending to the neighbouring stages.
  int64_t pipeline_send_ns = 0;
  double parameters_per_gpu = 0;
};

// The longest iteration vtrain simulates, in task time: 2^61 ns (73 years),
// far from int64 overflow whatever order tasks are added in.
inline constexpr double kMaxIterationNs = 2305843009213693952.0;

// What a stored graph and its simulation cost per task, rounded up: a
// 4-byte record index, the is-parent bit, the few edges, the engine's
// completions of parent tasks (TaskGraph::MemoryBytes plus
// SimulationMemoryBytes measure it: 4.4 to 5.3 bytes on GPT-3 13B to MT-NLG
// 530B plans with hundreds of micro-batches). Each distinct record (about one
// per kernel of one micro-batch on each stage: 4,226 for MT-NLG 530B on 105
// stages) adds ~150 bytes, which this leaves out: it passes 8 bytes a task
// only for graphs of a few hundred thousand tasks or fewer, far below any
// limit worth setting.
inline constexpr int64_t kGraphBytesPerTask = 8;

struct BuildOptions {
  Granularity granularity = Granularity::kOperator;
  // Larger graphs are refused with RESOURCE_EXHAUSTED before allocation.
  int64_t max_tasks = 100'000'000;
  // At kernel granularity the graph is stored: refused, before allocation,
  // when its estimated size (kGraphBytesPerTask a task) is above this.
  int64_t max_graph_bytes = int64_t{16} << 30;
  // BuildIterationGraph and SimulateIteration poll it every 65,536 tasks and
  // return CANCELLED when it says so (may be empty).
  std::function<bool()> cancelled;
  // The streaming simulator jumps over repeating periods of the schedule
  // (engine/periodic.h); false steps every action (same result, for tests
  // and benchmarks that compare the two).
  bool periodic = true;
  // BuildIterationGraph: keep a TaskNote per task (IterationGraph::notes), for
  // traces. Costs memory; predictions leave it off.
  bool keep_notes = false;
};

// Where a task comes from, for people reading a trace (kept only with
// BuildOptions::keep_notes). -1 / 0: not applicable.
struct TaskNote {
  int32_t micro_batch = -1;  // the pass's micro-batch
  int32_t chunk = -1;        // the model chunk (interleaving; 0 without)
  int32_t first_layer = -1;  // the layers of that chunk
  int32_t num_layers = 0;
  double bytes = 0;  // a transfer's or collective's message size
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_ITERATION_H_
