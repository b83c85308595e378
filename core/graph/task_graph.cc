#include "core/graph/task_graph.h"

#include <algorithm>
#include <cstdint>

#include "core/util/status_macros.h"

namespace vtrain {

StreamId TaskGraph::AddStream(std::string name) {
  stream_names_.push_back(std::move(name));
  guesses_.emplace_back();
  return static_cast<StreamId>(stream_names_.size() - 1);
}

int32_t TaskGraph::AddLabel(const std::string& label) {
  auto [it, inserted] = label_index_.try_emplace(label, static_cast<int32_t>(labels_.size()));
  if (inserted) labels_.push_back(label);
  return it->second;
}

int32_t TaskGraph::Intern(const Task& t) {
  auto [it, inserted] = record_index_.try_emplace(t, static_cast<int32_t>(records_.size()));
  if (inserted) {
    VTRAIN_CHECK(records_.size() < static_cast<size_t>(INT32_MAX));
    records_.push_back(t);
  }
  return it->second;
}

TaskId TaskGraph::AddTask(StreamId stream, int64_t duration_ns, int64_t gap_ns, TaskKind kind,
                          int32_t label, absl::Span<const TaskId> parents) {
  const auto id = static_cast<TaskId>(record_of_.size());
  VTRAIN_CHECK(record_of_.size() < static_cast<size_t>(INT32_MAX));
  VTRAIN_CHECK(stream >= 0 && stream < num_streams());
  VTRAIN_CHECK(duration_ns >= 0 && gap_ns >= 0);
  for (TaskId p : parents) VTRAIN_CHECK(p >= 0 && p < id);

  const Task t{duration_ns, gap_ns, stream, label, kind};
  std::vector<Guesses>& by_label = guesses_[stream];
  if (label < 0 || static_cast<size_t>(label) >= by_label.size()) {
    VTRAIN_CHECK(label >= 0 && label <= INT32_MAX - 1);
    by_label.resize(static_cast<size_t>(label) + 1, Guesses{-1, -1, -1, -1});
  }
  Guesses& guesses = by_label[label];
  int32_t record = -1;
  for (int32_t g : guesses) {
    if (g >= 0 && records_[g] == t) {
      record = g;
      break;
    }
  }
  if (record < 0) {
    record = Intern(t);
    // The newest first; the oldest is forgotten.
    for (size_t i = guesses.size() - 1; i > 0; --i) guesses[i] = guesses[i - 1];
    guesses[0] = record;
  }
  record_of_.push_back(record);
  if ((id & 63) == 0) is_parent_.push_back(0);

  if (!parents.empty()) {
    for (TaskId p : parents) {
      uint64_t& word = is_parent_[p >> 6];
      const uint64_t bit = uint64_t{1} << (p & 63);
      num_parent_tasks_ += (word & bit) == 0 ? 1 : 0;
      word |= bit;
    }
    VTRAIN_CHECK(parents_.size() + parents.size() < UINT32_MAX);
    with_parents_.push_back(id);
    parents_.insert(parents_.end(), parents.begin(), parents.end());
    parent_begin_.push_back(static_cast<uint32_t>(parents_.size()));
  }
  return id;
}

absl::Span<const TaskId> TaskGraph::parents(TaskId id) const {
  const auto it = std::lower_bound(with_parents_.begin(), with_parents_.end(), id);
  if (it == with_parents_.end() || *it != id) return {};
  const size_t k = static_cast<size_t>(it - with_parents_.begin());
  return absl::MakeConstSpan(parents_.data() + parent_begin_[k],
                             parent_begin_[k + 1] - parent_begin_[k]);
}

std::vector<Task> TaskGraph::tasks() const {
  std::vector<Task> out;
  out.reserve(record_of_.size());
  for (int32_t r : record_of_) out.push_back(records_[r]);
  return out;
}

void TaskGraph::Reserve(int64_t tasks, int64_t edges) {
  record_of_.reserve(tasks);
  is_parent_.reserve((tasks + 63) / 64);
  parents_.reserve(edges);
  // Every task with parents has at least one edge.
  with_parents_.reserve(edges);
  parent_begin_.reserve(edges + 1);
}

int64_t TaskGraph::MemoryBytes() const {
  // A flat_hash_map slot holds the pair, plus one control byte.
  size_t guess_bytes = 0;
  for (const std::vector<Guesses>& v : guesses_) guess_bytes += v.capacity() * sizeof(Guesses);
  const size_t index_bytes =
      record_index_.capacity() * (sizeof(std::pair<const Task, int32_t>) + 1);
  return static_cast<int64_t>(
      record_of_.capacity() * sizeof(int32_t) + is_parent_.capacity() * sizeof(uint64_t) +
      with_parents_.capacity() * sizeof(TaskId) + parent_begin_.capacity() * sizeof(uint32_t) +
      parents_.capacity() * sizeof(TaskId) + records_.capacity() * sizeof(Task) + index_bytes +
      guesses_.capacity() * sizeof(std::vector<Guesses>) + guess_bytes);
}

}  // namespace vtrain
