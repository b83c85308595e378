#include "core/graph/builder.h"

#include <functional>
#include <string>
#include <utility>

#include "absl/types/span.h"
#include "core/graph/walker.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

// Stores every task in a graph: one per kernel, collective or merged pass.
class GraphSink {
 public:
  using Handle = TaskId;
  static constexpr bool kMergesSends = false;
  GraphSink(TaskGraph& graph, const std::function<bool()>& cancelled, std::vector<TaskNote>* notes)
      : graph_(graph), cancelled_(cancelled), notes_(notes) {}
  // The note of the tasks added from now on (kept when notes_ is set).
  void SetNote(const TaskNote& note) { note_ = note; }
  static Handle None() { return -1; }
  static bool IsSet(Handle h) { return h >= 0; }
  StreamId AddStream(std::string name) { return graph_.AddStream(std::move(name)); }
  int32_t Label(const std::string& name) { return graph_.AddLabel(name); }
  void Reserve(int64_t tasks, int64_t edges) { graph_.Reserve(tasks, edges); }
  Handle Add(StreamId stream, int64_t duration_ns, int64_t gap_ns, TaskKind kind, int32_t label,
             absl::Span<const Handle> parents) {
    if ((graph_.num_tasks() & 0xFFFF) == 0xFFFF && cancelled_ && cancelled_()) stopped_ = true;
    if (notes_ != nullptr) notes_->push_back(note_);
    return graph_.AddTask(stream, duration_ns, gap_ns, kind, label, parents);
  }
  bool Stopped() const { return stopped_; }
  int64_t num_tasks() const { return graph_.num_tasks(); }

 private:
  TaskGraph& graph_;
  const std::function<bool()>& cancelled_;
  std::vector<TaskNote>* notes_;  // null: notes not kept
  TaskNote note_;
  bool stopped_ = false;
};

}  // namespace

absl::StatusOr<IterationGraph> BuildIterationGraph(const Job& job, ProfileLookup& lookup,
                                                   const BuildOptions& options) {
  VTRAIN_RETURN_IF_ERROR(ValidateJob(job));
  IterationGraph out;
  GraphSink sink(out.graph, options.cancelled, options.keep_notes ? &out.notes : nullptr);
  IterationWalker<GraphSink> walker(job, lookup, options, sink);
  VTRAIN_RETURN_IF_ERROR(walker.Walk());
  out.stages = std::move(walker.stages());
  out.num_micro_batches = walker.num_micro_batches();
  return out;
}

}  // namespace vtrain
