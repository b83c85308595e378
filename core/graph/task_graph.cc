#include "core/graph/task_graph.h"

#include <cstdint>

#include "core/util/status_macros.h"

namespace vtrain {

StreamId TaskGraph::AddStream(std::string name) {
  stream_names_.push_back(std::move(name));
  return static_cast<StreamId>(stream_names_.size() - 1);
}

int32_t TaskGraph::AddLabel(const std::string& label) {
  auto [it, inserted] = label_index_.try_emplace(label, static_cast<int32_t>(labels_.size()));
  if (inserted) labels_.push_back(label);
  return it->second;
}

TaskId TaskGraph::AddTask(StreamId stream, int64_t duration_ns, int64_t gap_ns, TaskKind kind,
                          int32_t label, absl::Span<const TaskId> parents) {
  const auto id = static_cast<TaskId>(tasks_.size());
  VTRAIN_CHECK(tasks_.size() < static_cast<size_t>(INT32_MAX));
  VTRAIN_CHECK(stream >= 0 && stream < num_streams());
  VTRAIN_CHECK(duration_ns >= 0 && gap_ns >= 0);
  for (TaskId p : parents) VTRAIN_CHECK(p >= 0 && p < id);
  tasks_.push_back(Task{duration_ns, gap_ns, stream, label, kind});
  VTRAIN_CHECK(parents_.size() + parents.size() < UINT32_MAX);
  parents_.insert(parents_.end(), parents.begin(), parents.end());
  parent_begin_.push_back(static_cast<uint32_t>(parents_.size()));
  return id;
}

void TaskGraph::Reserve(int64_t tasks, int64_t edges) {
  tasks_.reserve(tasks);
  parent_begin_.reserve(tasks + 1);
  parents_.reserve(edges);
}

int64_t TaskGraph::MemoryBytes() const {
  return static_cast<int64_t>(tasks_.capacity() * sizeof(Task) +
                              parent_begin_.capacity() * sizeof(uint32_t) +
                              parents_.capacity() * sizeof(TaskId));
}

}  // namespace vtrain
