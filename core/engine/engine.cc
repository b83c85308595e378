#include "core/engine/engine.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/status/status.h"

namespace vtrain {

absl::StatusOr<SimulationResult> Simulate(const TaskGraph& graph,
                                          const SimulationOptions& options) {
  const int64_t n = graph.num_tasks();
  const int32_t num_streams = graph.num_streams();
  SimulationResult result;
  result.streams.resize(num_streams);
  std::vector<int64_t> finish(n);
  std::vector<int64_t> stream_free(num_streams, 0);
  std::vector<int64_t> last_gap(num_streams, 0);
  // Communication streams remember, for each task, when the contiguous busy
  // run it ends began, so that a wait on a chain of transfers (a gradient
  // all-reduce, then the embedding all-reduce) is attributed in full.
  std::vector<int64_t> run_start(num_streams, 0);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> comm_runs(num_streams);
  const std::vector<Task>& tasks = graph.tasks();

  // vTrain §4.3, Algorithm 1. Ids are topological and each stream's tasks are
  // in id order, so a task's parents and its stream predecessor are final
  // when it is reached.
  for (int64_t id = 0; id < n; ++id) {
    if ((id & 0xFFFF) == 0 && options.cancelled && options.cancelled()) {
      return absl::CancelledError("simulation cancelled by the caller");
    }
    const Task& task = tasks[id];
    int64_t ready = 0;
    TaskId binding = -1;
    for (TaskId p : graph.parents(static_cast<TaskId>(id))) {
      if (finish[p] > ready) {
        ready = finish[p];
        binding = p;
      }
    }
    StreamStats& stats = result.streams[task.stream];
    const int64_t free = stream_free[task.stream];
    const int64_t start = std::max(free, ready);
    if (start > free) {
      const int64_t wait = start - free;
      int64_t exposed = 0;
      const Task& parent = tasks[binding];
      if (parent.kind != TaskKind::kCompute && parent.kind != TaskKind::kOptimizer) {
        const auto& runs = comm_runs[parent.stream];
        auto it = std::lower_bound(runs.begin(), runs.end(), std::make_pair(ready, INT64_MIN));
        const int64_t began = it != runs.end() && it->first == ready ? it->second : ready - parent.duration_ns;
        exposed = start - std::max(free, began);
        stats.exposed_wait_ns[static_cast<int>(parent.kind)] += exposed;
      }
      stats.idle_ns += wait - exposed;
    }
    finish[id] = start + task.duration_ns;
    if (task.kind != TaskKind::kCompute && task.kind != TaskKind::kOptimizer) {
      if (start > free || comm_runs[task.stream].empty()) run_start[task.stream] = start;
      comm_runs[task.stream].emplace_back(finish[id], run_start[task.stream]);
    }
    stream_free[task.stream] = finish[id] + task.gap_ns;
    stats.busy_ns[static_cast<int>(task.kind)] += task.duration_ns;
    stats.gap_ns += task.gap_ns;
    last_gap[task.stream] = task.gap_ns;
    stats.last_finish_ns = finish[id];
    ++stats.num_tasks;
  }

  for (const StreamStats& s : result.streams) {
    result.makespan_ns = std::max(result.makespan_ns, s.last_finish_ns);
  }
  // The gap after a stream's last task lies beyond its work: count the time
  // from its last finish to the makespan as idle instead.
  for (int32_t s = 0; s < num_streams; ++s) {
    StreamStats& stats = result.streams[s];
    stats.gap_ns -= last_gap[s];
    stats.idle_ns += result.makespan_ns - stats.last_finish_ns;
  }
  if (options.keep_task_times) result.finish_ns = std::move(finish);
  return result;
}

}  // namespace vtrain
