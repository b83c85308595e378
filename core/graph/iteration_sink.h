// What the iteration walker (walker.h) needs of a sink, and the FIFO of
// pipeline transfers between neighbouring stages it keeps while walking.
#ifndef VTRAIN_CORE_GRAPH_ITERATION_SINK_H_
#define VTRAIN_CORE_GRAPH_ITERATION_SINK_H_

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "core/graph/task_graph.h"
#include "core/util/status_macros.h"

namespace vtrain {

// Where the walker puts tasks. Add returns a Handle that the task's children
// receive as parents; None() is the handle of no task (IsSet is false). The
// sink decides what Stopped() means (the caller's cancellation).
// A sink with kMergesSends also takes, through AddOne, a pass that was
// merged into one task together with the pipeline send after it (no gap, at
// most one parent; `tail_ns`: the send's part of the duration).
// (clang-format 14 mangles requires-expressions.)
// clang-format off
template <typename S>
concept IterationSink =
    requires(S& sink, const S& const_sink, const std::string& name, StreamId stream, int64_t ns,
             TaskKind kind, int32_t label, absl::Span<const typename S::Handle> parents) {
      { S::None() } -> std::same_as<typename S::Handle>;
      { S::IsSet(S::None()) } -> std::same_as<bool>;
      { S::kMergesSends } -> std::convertible_to<bool>;
      { sink.AddStream(name) } -> std::same_as<StreamId>;
      { sink.Label(name) } -> std::same_as<int32_t>;
      sink.Reserve(ns, ns);
      { sink.Add(stream, ns, ns, kind, label, parents) } -> std::same_as<typename S::Handle>;
      { const_sink.Stopped() } -> std::same_as<bool>;
      { const_sink.num_tasks() } -> std::same_as<int64_t>;
    } &&
    (!S::kMergesSends ||
     requires(S& sink, StreamId stream, int64_t ns, TaskKind kind,
              const typename S::Handle* parent) {
       { sink.AddOne(stream, ns, kind, parent, ns) } -> std::same_as<typename S::Handle>;
     });
// clang-format on

namespace internal {

// Point-to-point transfers from one stage to its neighbour, in micro-batch
// order. Both schedules produce and consume them in that order, so a FIFO
// whose storage is reused once drained holds only those in flight.
template <typename Handle>
class SendQueue {
 public:
  bool empty() const { return size_ == 0; }
  void Push(int64_t micro_batch, const Handle& h) {
    VTRAIN_CHECK(micro_batch == pushed_++);
    if (size_ == ring_.size()) Grow();
    size_t tail = head_ + size_;
    if (tail >= ring_.size()) tail -= ring_.size();
    ring_[tail] = h;
    ++size_;
  }
  Handle Pop(int64_t micro_batch) {
    VTRAIN_CHECK(size_ > 0 && micro_batch == popped_++);
    const Handle h = ring_[head_];
    if (++head_ == ring_.size()) head_ = 0;
    --size_;
    return h;
  }

 private:
  // A ring buffer that doubles when full; 1F1B keeps at most p in flight.
  void Grow() {
    std::vector<Handle> bigger(std::max<size_t>(8, 2 * ring_.size()));
    for (size_t i = 0; i < size_; ++i) bigger[i] = ring_[(head_ + i) % ring_.size()];
    ring_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<Handle> ring_;
  size_t head_ = 0, size_ = 0;
  int64_t pushed_ = 0, popped_ = 0;
};

}  // namespace internal

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_ITERATION_SINK_H_
