// A flat, id-indexed task graph: the input of the simulation engine. Tasks
// run on streams (a GPU's compute stream, its communication streams); a
// stream runs its tasks in the order they were added.
#ifndef VTRAIN_CORE_GRAPH_TASK_GRAPH_H_
#define VTRAIN_CORE_GRAPH_TASK_GRAPH_H_

#include <cstdint>
#include <string>
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

// 32 bytes: the graph costs ~36 bytes per task with its parent index.
struct Task {
  int64_t duration_ns = 0;
  int64_t gap_ns = 0;  // the stream stays busy this long after the task ends
  StreamId stream = 0;
  int32_t label = 0;  // index into TaskGraph::labels()
  TaskKind kind = TaskKind::kCompute;
};

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

  void Reserve(int64_t tasks, int64_t edges);

  int64_t num_tasks() const { return static_cast<int64_t>(tasks_.size()); }
  int32_t num_streams() const { return static_cast<int32_t>(stream_names_.size()); }
  const Task& task(TaskId id) const { return tasks_[id]; }
  const std::vector<Task>& tasks() const { return tasks_; }
  absl::Span<const TaskId> parents(TaskId id) const {
    return absl::MakeConstSpan(parents_.data() + parent_begin_[id],
                               parent_begin_[id + 1] - parent_begin_[id]);
  }
  const std::string& stream_name(StreamId s) const { return stream_names_[s]; }
  const std::vector<std::string>& labels() const { return labels_; }
  // Bytes held by the task and edge arrays.
  int64_t MemoryBytes() const;

 private:
  std::vector<Task> tasks_;
  std::vector<uint32_t> parent_begin_;  // CSR: parents of i are [begin[i], begin[i+1])
  std::vector<TaskId> parents_;
  std::vector<std::string> stream_names_;
  std::vector<std::string> labels_;
  absl::flat_hash_map<std::string, int32_t> label_index_;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_TASK_GRAPH_H_
