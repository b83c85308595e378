#include "core/engine/engine.h"

#include <memory>

#include "absl/status/status.h"

namespace vtrain {

absl::StatusOr<SimulationResult> Simulate(const TaskGraph& graph,
                                          const SimulationOptions& options) {
  const int64_t n = graph.num_tasks();
  Timeline timeline(graph.num_streams());
  // Uninitialised on purpose: every entry is written before it is read,
  // because parents have smaller ids.
  std::unique_ptr<Completion[]> done(new Completion[n]);
  const std::vector<Task>& tasks = graph.tasks();
  for (int64_t id = 0; id < n; ++id) {
    if ((id & 0xFFFF) == 0 && options.cancelled && options.cancelled()) {
      return absl::CancelledError("simulation cancelled by the caller");
    }
    int64_t ready = 0;
    const Completion* binding = nullptr;
    for (TaskId p : graph.parents(static_cast<TaskId>(id))) {
      if (done[p].finish_ns > ready) {
        ready = done[p].finish_ns;
        binding = &done[p];
      }
    }
    const Task& t = tasks[id];
    done[id] = timeline.RunAfter(t.stream, t.duration_ns, t.gap_ns, t.kind, ready, binding);
  }
  SimulationResult result = timeline.Finish();
  if (options.keep_task_times) {
    result.finish_ns.resize(n);
    for (int64_t id = 0; id < n; ++id) result.finish_ns[id] = done[id].finish_ns;
  }
  return result;
}

}  // namespace vtrain
