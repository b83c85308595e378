// The progress of the iteration walker (walker.h) through the pipeline
// actions: how many forwards and backwards each stage has run, and the
// transfers in flight between stages. The periodic fast path
// (engine/periodic.h) reads it to recognise a repeating state and advances
// it by whole periods.
#ifndef VTRAIN_CORE_GRAPH_PIPELINE_STATE_H_
#define VTRAIN_CORE_GRAPH_PIPELINE_STATE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/util/status_macros.h"

namespace vtrain::internal {

// Point-to-point transfers from one stage to its neighbour, in micro-batch
// order. Both schedules produce and consume them in that order, so a FIFO
// whose storage is reused once drained holds only those in flight.
template <typename Handle>
class SendQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
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
  // The i-th transfer in flight (0: the oldest), for the periodic fast path.
  Handle& at(size_t i) {
    size_t k = head_ + i;
    if (k >= ring_.size()) k -= ring_.size();
    return ring_[k];
  }
  int64_t pushed() const { return pushed_; }
  int64_t popped() const { return popped_; }
  // Counts `n` more transfers as pushed and popped (the periodic fast path's
  // jump over whole periods, which leave as many in flight as before).
  void Skip(int64_t n) {
    pushed_ += n;
    popped_ += n;
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

// What the walker has emitted of the pipeline actions.
template <typename Handle>
struct PipelineState {
  // forward_sends[s]: stage s to s+1; backward_sends[s]: stage s to s-1.
  std::vector<SendQueue<Handle>> forward_sends, backward_sends;
  // Actions each stage has emitted, and those left over all stages.
  std::vector<int64_t> forwards, backwards;
  int64_t remaining = 0;
};

}  // namespace vtrain::internal

#endif  // VTRAIN_CORE_GRAPH_PIPELINE_STATE_H_
