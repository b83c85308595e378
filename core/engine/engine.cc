#include "core/engine/engine.h"

#include <bit>
#include <memory>
#include <vector>

#include "absl/status/status.h"

namespace vtrain {
namespace {

// Where each task that is some task's parent keeps its completion: parents
// are numbered in id order, so task p's slot is the number of parents before
// it (a rank over the graph's is-parent bits).
class ParentSlots {
 public:
  explicit ParentSlots(absl::Span<const uint64_t> bits) : bits_(bits), before_(bits.size()) {
    uint32_t count = 0;
    for (size_t w = 0; w < bits.size(); ++w) {
      before_[w] = count;
      count += static_cast<uint32_t>(std::popcount(bits[w]));
    }
  }
  bool IsParent(int64_t id) const { return (bits_[id >> 6] >> (id & 63)) & 1; }
  uint32_t Slot(TaskId p) const {
    const uint64_t below = bits_[p >> 6] & ((uint64_t{1} << (p & 63)) - 1);
    return before_[p >> 6] + static_cast<uint32_t>(std::popcount(below));
  }

 private:
  absl::Span<const uint64_t> bits_;
  std::vector<uint32_t> before_;  // parents in the words before each word
};

}  // namespace

int64_t SimulationMemoryBytes(const TaskGraph& graph) {
  return static_cast<int64_t>(graph.num_parent_tasks() * sizeof(Completion) +
                              graph.is_parent_bits().size() * sizeof(uint32_t));
}

absl::StatusOr<SimulationResult> Simulate(const TaskGraph& graph,
                                          const SimulationOptions& options) {
  const int64_t n = graph.num_tasks();
  Timeline timeline(graph.num_streams());
  const ParentSlots slots(graph.is_parent_bits());
  // Completions only of the tasks some task waits for; a task's wait for the
  // one before it on its stream is the timeline's. Uninitialised on purpose:
  // every slot is written before it is read, because parents have smaller ids.
  std::unique_ptr<Completion[]> done(new Completion[graph.num_parent_tasks()]);
  uint32_t next_slot = 0;
  const Task* records = graph.records().data();
  const int32_t* record_of = graph.record_of().data();
  const absl::Span<const TaskId> with_parents = graph.with_parents();
  const uint32_t* parent_begin = graph.parent_begin().data();
  const TaskId* parent_ids = graph.parent_ids().data();
  size_t k = 0;  // the next task with parents, in with_parents
  SimulationResult result;
  if (options.keep_task_times) result.finish_ns.resize(n);
  for (int64_t id = 0; id < n; ++id) {
    if ((id & 0xFFFF) == 0 && options.cancelled && options.cancelled()) {
      return absl::CancelledError("simulation cancelled by the caller");
    }
    int64_t ready = 0;
    const Completion* binding = nullptr;
    if (k < with_parents.size() && with_parents[k] == id) {
      for (uint32_t e = parent_begin[k]; e < parent_begin[k + 1]; ++e) {
        const Completion& c = done[slots.Slot(parent_ids[e])];
        if (c.finish_ns > ready) {
          ready = c.finish_ns;
          binding = &c;
        }
      }
      ++k;
    }
    const Task& t = records[record_of[id]];
    const Completion c =
        timeline.RunAfter(t.stream, t.duration_ns, t.gap_ns, t.kind, ready, binding);
    if (slots.IsParent(id)) done[next_slot++] = c;
    if (options.keep_task_times) result.finish_ns[id] = c.finish_ns;
  }
  std::vector<int64_t> finish_ns = std::move(result.finish_ns);
  result = timeline.Finish();
  result.finish_ns = std::move(finish_ns);
  return result;
}

}  // namespace vtrain
