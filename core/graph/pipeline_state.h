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
// whose storage is reused once drained holds only those in flight. After
// them may come a run: transfers a fixed time apart, pushed at once by the
// periodic fast path (only for handles with Shifted(ns), engine/timeline.h).
template <typename Handle>
class SendQueue {
 public:
  static constexpr bool kRuns = requires(const Handle& h) { h.Shifted(int64_t{0}); };

  bool empty() const { return size_ == 0 && run_count_ == 0; }
  size_t size() const { return size_ + static_cast<size_t>(run_count_); }
  void Push(int64_t micro_batch, const Handle& h) {
    VTRAIN_CHECK(micro_batch == pushed_++);
    if (run_count_ > 0) MaterialiseRun();
    Append(h);
  }
  Handle Pop(int64_t micro_batch) {
    VTRAIN_CHECK(!empty() && micro_batch == popped_++);
    if constexpr (kRuns) {
      if (size_ == 0) {
        const Handle h = run_first_;
        run_first_ = run_first_.Shifted(run_step_);
        --run_count_;
        return h;
      }
    }
    const Handle h = ring_[head_];
    if (++head_ == ring_.size()) head_ = 0;
    --size_;
    return h;
  }
  // The i-th transfer in flight (0: the oldest).
  Handle at(size_t i) const {
    if constexpr (kRuns) {
      if (i >= size_) return run_first_.Shifted(static_cast<int64_t>(i - size_) * run_step_);
    }
    return ring_[Index(i)];
  }
  int64_t pushed() const { return pushed_; }
  int64_t popped() const { return popped_; }

  // The periodic fast path's jumps (kRuns only): pushes `count` transfers,
  // first, first + step, ...; pops `n`; counts `n` more as pushed and popped
  // (whole periods, which leave as many in flight); moves every transfer in
  // flight `d` later; and whether the `n` transfers from the i-th on are
  // first, first + step, ...
  void PushRun(const Handle& first, int64_t step, int64_t count) {
    if (count <= 0) return;
    if (run_count_ > 0) MaterialiseRun();
    run_first_ = first;
    run_step_ = step;
    run_count_ = count;
    pushed_ += count;
  }
  void PopN(int64_t n) {
    for (; n > 0 && size_ > 0; --n) Pop(popped_);
    VTRAIN_CHECK(n <= run_count_);
    run_first_ = run_first_.Shifted(n * run_step_);
    run_count_ -= n;
    popped_ += n;
  }
  void Skip(int64_t n) {
    pushed_ += n;
    popped_ += n;
  }
  void ShiftAll(int64_t d) {
    for (size_t i = 0; i < size_; ++i) ring_[Index(i)] = ring_[Index(i)].Shifted(d);
    run_first_ = run_first_.Shifted(d);
  }
  bool IsRun(size_t i, int64_t n, const Handle& first, int64_t step) const {
    if (i + static_cast<size_t>(n) > size()) return false;
    int64_t k = 0;
    for (; k < n && i + static_cast<size_t>(k) < size_; ++k) {
      if (!(ring_[Index(i + static_cast<size_t>(k))] == first.Shifted(k * step))) return false;
    }
    // The rest lies in the run, itself evenly spaced.
    return k == n || ((n - k == 1 || run_step_ == step) &&
                      at(i + static_cast<size_t>(k)) == first.Shifted(k * step));
  }

 private:
  size_t Index(size_t i) const {
    size_t k = head_ + i;
    if (k >= ring_.size()) k -= ring_.size();
    return k;
  }
  void Append(const Handle& h) {
    if (size_ == ring_.size()) Grow();
    ring_[Index(size_)] = h;
    ++size_;
  }
  void MaterialiseRun() {
    if constexpr (kRuns) {
      for (; run_count_ > 0; --run_count_) {
        Append(run_first_);
        run_first_ = run_first_.Shifted(run_step_);
      }
    }
  }
  // A ring buffer that doubles when full; 1F1B keeps at most p in flight.
  void Grow() {
    std::vector<Handle> bigger(std::max<size_t>(8, 2 * ring_.size()));
    for (size_t i = 0; i < size_; ++i) bigger[i] = ring_[Index(i)];
    ring_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<Handle> ring_;
  size_t head_ = 0, size_ = 0;
  int64_t pushed_ = 0, popped_ = 0;
  Handle run_first_{};
  int64_t run_step_ = 0, run_count_ = 0;
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
