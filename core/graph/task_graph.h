// A flat, id-indexed task graph: the input of the simulation engine. Tasks
// run on streams (a GPU's compute stream, its communication streams); a
// stream runs its tasks in the order they were added.
#ifndef VTRAIN_CORE_GRAPH_TASK_GRAPH_H_
#define VTRAIN_CORE_GRAPH_TASK_GRAPH_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace vtrain {

using TaskId = int32_t;
using StreamId = int32_t;

// What a task does, for the breakdown of waiting time.
enum class TaskKind : uint8_t {
  kCompute = 0,
  kTensorParallel = 1,  // TP collective, blocking the compute stream
  kPipeline = 2,        // point-to-point transfer between pipeline stages
  kDataParallel = 3,    // gradient all-reduce across replicas
  kOptimizer = 4,
};
inline constexpr int kNumTaskKinds = 5;

// Everything about a task but its place in the graph. A kernel graph repeats
// the same few thousand of these millions of times (one pass's kernels on
// one stage, once per micro-batch), so the graph stores each distinct one
// once and a 4-byte index per task.
struct Task {
  int64_t duration_ns = 0;
  int64_t gap_ns = 0;  // the stream stays busy this long after the task ends
  StreamId stream = 0;
  int32_t label = 0;  // index into TaskGraph::labels()
  TaskKind kind = TaskKind::kCompute;

  bool operator==(const Task&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const Task& t) {
    return H::combine(std::move(h), t.duration_ns, t.gap_ns, t.stream, t.label, t.kind);
  }
};

// Memory per task (TaskGraph::MemoryBytes): a 4-byte index into the distinct
// Task records, one bit saying whether any task waits for it, and, for the
// few tasks with parents (a pass's first kernel, a transfer), its id, an
// offset and the parent ids. A stream's order needs no edge: the engine runs
// a stream's tasks in id order.
class TaskGraph {
 public:
  TaskGraph() { parent_begin_.push_back(0); }

  StreamId AddStream(std::string name);
  // Interns a label and returns its index.
  int32_t AddLabel(const std::string& label);

  // Adds a task after every task already on `stream`. Parents must already
  // exist (so ids are a topological order). Returns the new task's id.
  TaskId AddTask(StreamId stream, int64_t duration_ns, int64_t gap_ns, TaskKind kind, int32_t label,
                 absl::Span<const TaskId> parents);

  // Sizes the per-task arrays for `tasks` tasks and `edges` parent ids.
  void Reserve(int64_t tasks, int64_t edges);

  int64_t num_tasks() const { return static_cast<int64_t>(record_of_.size()); }
  int32_t num_streams() const { return static_cast<int32_t>(stream_names_.size()); }
  const Task& task(TaskId id) const { return records_[record_of_[id]]; }
  // Every task in id order, materialised (tests and tools; the engine reads
  // the compact arrays below).
  std::vector<Task> tasks() const;
  // The parents of `id` (O(log tasks with parents)).
  absl::Span<const TaskId> parents(TaskId id) const;
  const std::string& stream_name(StreamId s) const { return stream_names_[s]; }
  const std::vector<std::string>& labels() const { return labels_; }
  // Bytes held by the graph's arrays and the index of distinct records.
  int64_t MemoryBytes() const;

  // The compact layout, for the engine (engine/engine.cc), in id order.
  // Task `id` is records()[record_of()[id]].
  absl::Span<const Task> records() const { return records_; }
  absl::Span<const int32_t> record_of() const { return record_of_; }
  // Bit id%64 of word id/64: some task has `id` as a parent.
  absl::Span<const uint64_t> is_parent_bits() const { return is_parent_; }
  int64_t num_parent_tasks() const { return num_parent_tasks_; }
  // The tasks that have parents, ascending; the parents of with_parents()[k]
  // are parent_ids()[parent_begin()[k] .. parent_begin()[k+1]).
  absl::Span<const TaskId> with_parents() const { return with_parents_; }
  absl::Span<const uint32_t> parent_begin() const { return parent_begin_; }
  absl::Span<const TaskId> parent_ids() const { return parents_; }

 private:
  // The index of the record equal to `t`, adding it if new.
  int32_t Intern(const Task& t);

  std::vector<int32_t> record_of_;  // per task
  std::vector<uint64_t> is_parent_;
  int64_t num_parent_tasks_ = 0;
  std::vector<TaskId> with_parents_;
  std::vector<uint32_t> parent_begin_;  // CSR over with_parents_
  std::vector<TaskId> parents_;

  std::vector<Task> records_;  // distinct
  absl::flat_hash_map<Task, int32_t> record_index_;
  // A stream runs a kernel (a label) with one of a few durations, gaps and
  // kinds (a TP all-reduce's gap depends on the kernel after it): the last
  // four records it ran on the stream under that label are the guesses that
  // spare the hash lookup.
  using Guesses = std::array<int32_t, 4>;      // records, newest first; -1: none
  std::vector<std::vector<Guesses>> guesses_;  // [stream][label]

  std::vector<std::string> stream_names_;
  std::vector<std::string> labels_;
  absl::flat_hash_map<std::string, int32_t> label_index_;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_TASK_GRAPH_H_
