// The streaming simulator's sink for the iteration walker (graph/walker.h):
// runs each task on a Timeline as soon as it is generated. Shared by the
// streaming simulator (streaming.h) and its periodic fast path (periodic.h).
#ifndef VTRAIN_CORE_ENGINE_TIMELINE_SINK_H_
#define VTRAIN_CORE_ENGINE_TIMELINE_SINK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/types/span.h"
#include "core/engine/timeline.h"
#include "core/graph/task_graph.h"

namespace vtrain {

class TimelineSink {
 public:
  using Handle = Completion;
  // A pass and the pipeline send after it become one task (see
  // IterationWalker::MergePasses).
  static constexpr bool kMergesSends = true;
  explicit TimelineSink(const std::function<bool()>& cancelled) : cancelled_(cancelled) {}
  static Handle None() { return Completion{}; }
  static bool IsSet(const Handle& h) { return h.finish_ns >= 0; }
  StreamId AddStream(const std::string&) { return timeline_.AddStream(); }
  int32_t Label(const std::string&) { return 0; }
  void Reserve(int64_t, int64_t) {}
  Handle Add(StreamId stream, int64_t duration_ns, int64_t gap_ns, TaskKind kind, int32_t,
             absl::Span<const Handle> parents) {
    Poll();
    return timeline_.Run(stream, duration_ns, gap_ns, kind, parents);
  }
  // Add with no gap and at most one parent (the fast path's merged passes).
  Handle AddOne(StreamId stream, int64_t duration_ns, TaskKind kind, const Handle* parent,
                int64_t tail_ns) {
    Poll();
    const bool binds = parent != nullptr && parent->finish_ns > 0;
    return timeline_.RunAfter(stream, duration_ns, 0, kind, binds ? parent->finish_ns : 0,
                              binds ? parent : nullptr, tail_ns);
  }
  bool Stopped() const { return stopped_; }
  int64_t num_tasks() const { return num_tasks_; }
  const Timeline& timeline() const { return timeline_; }
  Timeline& mutable_timeline() { return timeline_; }
  // Counts `n` tasks that the periodic fast path accounted for without
  // running them, and polls the cancellation once for them.
  void SkipTasks(int64_t n) {
    const int64_t before = num_tasks_;
    num_tasks_ += n;
    // As Poll: once every 65,536 tasks, skipped or run. (Polling on every
    // jump cost a server, whose poll asks gRPC, more than the simulation.)
    if ((before >> 16) != (num_tasks_ >> 16) && cancelled_ && cancelled_()) stopped_ = true;
  }

 private:
  void Poll() {
    if ((++num_tasks_ & 0xFFFF) == 0 && cancelled_ && cancelled_()) stopped_ = true;
  }

  const std::function<bool()>& cancelled_;
  Timeline timeline_;
  int64_t num_tasks_ = 0;
  bool stopped_ = false;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_ENGINE_TIMELINE_SINK_H_
