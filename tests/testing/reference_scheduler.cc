#include "tests/testing/reference_scheduler.h"

#include <algorithm>
#include <deque>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vtrain::testing {

absl::StatusOr<ReferenceSchedule> ReferenceSimulate(const TaskGraph& graph) {
  const int64_t n = graph.num_tasks();
  const int32_t num_streams = graph.num_streams();
  constexpr int64_t kUnscheduled = -1;

  // Each stream's queue, in the order its tasks were added (id order).
  std::vector<std::deque<TaskId>> queues(num_streams);
  for (int64_t id = 0; id < n; ++id) {
    queues[graph.task(static_cast<TaskId>(id)).stream].push_back(static_cast<TaskId>(id));
  }
  std::vector<int64_t> stream_free(num_streams, 0);
  ReferenceSchedule out;
  out.finish_ns.assign(n, kUnscheduled);

  for (int64_t scheduled = 0; scheduled < n; ++scheduled) {
    TaskId best = -1;
    int64_t best_start = std::numeric_limits<int64_t>::max();
    for (int32_t s = 0; s < num_streams; ++s) {
      if (queues[s].empty()) continue;
      const TaskId head = queues[s].front();
      int64_t start = stream_free[s];
      bool ready = true;
      for (TaskId p : graph.parents(head)) {
        if (out.finish_ns[p] == kUnscheduled) {
          ready = false;
          break;
        }
        start = std::max(start, out.finish_ns[p]);
      }
      if (!ready) continue;
      if (start < best_start || (start == best_start && head < best)) {
        best = head;
        best_start = start;
      }
    }
    if (best < 0) {
      return absl::InternalError(
          absl::StrCat("no runnable task after scheduling ", scheduled, " of ", n));
    }
    const Task& task = graph.task(best);
    const int64_t finish = best_start + task.duration_ns;
    out.finish_ns[best] = finish;
    stream_free[task.stream] = finish + task.gap_ns;
    queues[task.stream].pop_front();
    out.makespan_ns = std::max(out.makespan_ns, finish);
  }
  return out;
}

}  // namespace vtrain::testing
