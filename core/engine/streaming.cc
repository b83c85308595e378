#include "core/engine/streaming.h"

#include <functional>
#include <string>
#include <utility>

#include "absl/types/span.h"
#include "core/graph/walker.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

// Runs each task on a timeline as soon as the walker generates it.
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
    if ((++num_tasks_ & 0xFFFF) == 0 && cancelled_ && cancelled_()) stopped_ = true;
    return timeline_.Run(stream, duration_ns, gap_ns, kind, parents);
  }
  // Add with no gap and at most one parent (the fast path's merged passes).
  Handle AddOne(StreamId stream, int64_t duration_ns, TaskKind kind, const Handle* parent,
                int64_t tail_ns) {
    if ((++num_tasks_ & 0xFFFF) == 0 && cancelled_ && cancelled_()) stopped_ = true;
    const bool binds = parent != nullptr && parent->finish_ns > 0;
    return timeline_.RunAfter(stream, duration_ns, 0, kind, binds ? parent->finish_ns : 0,
                              binds ? parent : nullptr, tail_ns);
  }
  bool Stopped() const { return stopped_; }
  int64_t num_tasks() const { return num_tasks_; }
  const Timeline& timeline() const { return timeline_; }

 private:
  const std::function<bool()>& cancelled_;
  Timeline timeline_;
  int64_t num_tasks_ = 0;
  bool stopped_ = false;
};

}  // namespace

absl::StatusOr<IterationSimulation> SimulateIteration(const Job& job, ProfileLookup& lookup,
                                                      const BuildOptions& options) {
  VTRAIN_RETURN_IF_ERROR(ValidateJob(job));
  TimelineSink sink(options.cancelled);
  IterationWalker<TimelineSink> walker(job, lookup, options, sink);
  VTRAIN_RETURN_IF_ERROR(walker.Walk());
  IterationSimulation out;
  out.result = sink.timeline().Finish();
  out.stages = std::move(walker.stages());
  out.num_micro_batches = walker.num_micro_batches();
  out.num_tasks = sink.num_tasks();
  return out;
}

}  // namespace vtrain
