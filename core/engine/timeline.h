// The step of vTrain's Algorithm 1, shared by the graph engine and by the
// streaming fast path: stream timelines that run one task at a time, given
// the completions of its parents, and account where each stream's time went.
#ifndef VTRAIN_CORE_ENGINE_TIMELINE_H_
#define VTRAIN_CORE_ENGINE_TIMELINE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "core/graph/task_graph.h"

namespace vtrain {

// Where one stream's time went, from 0 to the makespan. The parts add up:
// sum(busy_ns) + gap_ns + sum(exposed_wait_ns) + idle_ns == makespan.
struct StreamStats {
  std::array<int64_t, kNumTaskKinds> busy_ns{};  // task durations by kind
  int64_t gap_ns = 0;                            // gaps between its tasks
  // Waiting for a communication parent, attributed to that parent's kind for
  // the part of the wait its stream was communicating without a break up to
  // the parent's end (the exposed communication); the rest is idle.
  std::array<int64_t, kNumTaskKinds> exposed_wait_ns{};
  int64_t idle_ns = 0;  // the rest of the waiting, and the tail to the makespan
  int64_t last_finish_ns = 0;
  int64_t num_tasks = 0;
};

// What a finished task tells its children.
struct Completion {
  int64_t finish_ns = -1;  // -1: not run yet
  // For a communication task, when the unbroken run of communication on its
  // stream that it ends began; for others, its own start.
  int64_t run_start_ns = 0;
  TaskKind kind = TaskKind::kCompute;

  // The same completion `d` later (the periodic fast path's jumps).
  Completion Shifted(int64_t d) const { return {finish_ns + d, run_start_ns + d, kind}; }
  bool operator==(const Completion&) const = default;
};

struct SimulationResult {
  int64_t makespan_ns = 0;  // the latest finish over all streams
  std::vector<StreamStats> streams;
  std::vector<int64_t> finish_ns;  // per task; empty unless asked for
};

// Not thread-safe. Streams run their tasks in the order Run is called.
class Timeline {
 public:
  explicit Timeline(int32_t num_streams = 0) : streams_(num_streams) {}

  StreamId AddStream() {
    streams_.emplace_back();
    return static_cast<StreamId>(streams_.size() - 1);
  }
  int32_t num_streams() const { return static_cast<int32_t>(streams_.size()); }

  // Runs a task on `stream` once its parents (which must all have run) are
  // done: it starts at max(stream free, latest parent finish) and holds the
  // stream for duration + gap. `binding` is the parent that finished last
  // (nullptr when there are none or all finished at 0).
  // Inline: this is the innermost loop of every simulation.
  static bool IsCommunication(TaskKind kind) {
    return kind != TaskKind::kCompute && kind != TaskKind::kOptimizer;
  }
  //
  // `tail_ns` > 0 marks a merged task whose last `tail_ns` are a transfer of
  // `kind` (the operator path folds a pipeline send into the pass before it):
  // its children see a transfer that started tail_ns before the end.
  Completion RunAfter(StreamId stream, int64_t duration_ns, int64_t gap_ns, TaskKind kind,
                      int64_t ready_ns, const Completion* binding, int64_t tail_ns = 0) {
    StreamState& s = streams_[stream];
    const int64_t free = s.free_ns;
    const int64_t start = free > ready_ns ? free : ready_ns;
    if (start > free) {
      int64_t exposed = 0;
      if (binding != nullptr && IsCommunication(binding->kind)) {
        // The wait is exposed communication for as long as the transfer's
        // stream was busy communicating without a break.
        exposed = start - (free > binding->run_start_ns ? free : binding->run_start_ns);
        s.stats.exposed_wait_ns[static_cast<int>(binding->kind)] += exposed;
      }
      s.stats.idle_ns += start - free - exposed;
    }
    const bool communication = IsCommunication(kind);
    // A run of communication continues only through tasks of the same kind
    // that follow each other without a break.
    if (communication && (start > free || s.last_kind != kind)) s.comm_run_start_ns = start;
    s.last_kind = kind;
    const int64_t finish = start + duration_ns;
    if (tail_ns > 0) s.comm_run_start_ns = finish - tail_ns;
    s.free_ns = finish + gap_ns;
    s.last_gap_ns = gap_ns;
    s.stats.busy_ns[static_cast<int>(kind)] += duration_ns;
    s.stats.gap_ns += gap_ns;
    s.stats.last_finish_ns = finish;
    ++s.stats.num_tasks;
    return Completion{finish, communication ? s.comm_run_start_ns : start, kind};
  }

  Completion Run(StreamId stream, int64_t duration_ns, int64_t gap_ns, TaskKind kind,
                 absl::Span<const Completion> parents) {
    int64_t ready = 0;
    const Completion* binding = nullptr;
    for (const Completion& p : parents) {
      if (p.finish_ns > ready) {
        ready = p.finish_ns;
        binding = &p;
      }
    }
    return RunAfter(stream, duration_ns, gap_ns, kind, ready, binding);
  }

  // The makespan and the per-stream accounting so far.
  SimulationResult Finish() const;

  // A stream's clock and accounting: the periodic fast path (periodic.h)
  // compares them and advances them by whole periods.
  struct StreamState {
    int64_t free_ns = 0;
    int64_t last_gap_ns = 0;
    int64_t comm_run_start_ns = 0;  // start of the current run of communication tasks
    TaskKind last_kind = TaskKind::kCompute;
    StreamStats stats;
  };
  StreamState& stream_state(StreamId stream) { return streams_[stream]; }

 private:
  std::vector<StreamState> streams_;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_ENGINE_TIMELINE_H_
