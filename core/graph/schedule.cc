// The per-stage pass lists of the schedules that split the backward pass
// (schedule.h).
#include "core/graph/schedule.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "core/spec/job.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

// Appends passes, numbering each chunk's forwards and backwards in order and
// running deferred weight gradients first in first out.
class PassList {
 public:
  void F(int16_t chunk, bool paired = false) {
    out_.push_back({PassKind::kForward, paired, chunk, next_forward_[chunk]++});
  }
  // A backward; `split`: its W waits for a later W().
  void B(int16_t chunk, bool split, bool paired = false) {
    const int32_t mb = next_backward_[chunk]++;
    out_.push_back({split ? PassKind::kInputGrad : PassKind::kBackward, paired, chunk, mb});
    if (split) waiting_.push_back(out_.back());
  }
  void W() {
    VTRAIN_CHECK(!waiting_.empty());
    ScheduledPass w = waiting_.front();
    waiting_.pop_front();
    w.kind = PassKind::kWeightGrad;
    out_.push_back(w);
  }
  // DualPipe's overlapped pair: forward of chunk `f`, backward of chunk `b`.
  void FB(int16_t f, int16_t b) {
    F(f, /*paired=*/true);
    B(b, /*split=*/false, /*paired=*/true);
  }
  size_t waiting() const { return waiting_.size(); }
  std::vector<ScheduledPass> Take() && { return std::move(out_); }

 private:
  int32_t next_forward_[2] = {0, 0}, next_backward_[2] = {0, 0};
  std::deque<ScheduledPass> waiting_;
  std::vector<ScheduledPass> out_;
};

std::vector<ScheduledPass> ZbH1(int64_t stage, int64_t p, int64_t m) {
  PassList l;
  const int64_t warmup = std::min(p - stage - 1, m);
  // Each backward defers its W; once `stage` are waiting, the oldest runs.
  auto backward = [&] {
    l.B(0, /*split=*/true);
    if (static_cast<int64_t>(l.waiting()) > stage) l.W();
  };
  for (int64_t i = 0; i < warmup; ++i) l.F(0);
  for (int64_t i = warmup; i < m; ++i) {
    l.F(0);
    backward();
  }
  for (int64_t i = 0; i < warmup; ++i) backward();
  while (l.waiting() > 0) l.W();
  return std::move(l).Take();
}

// DualPipe's eight steps for a rank `rank` of `ranks` with `chunks`
// micro-batches per direction (DualPipeV: the whole batch, both chunks of
// every micro-batch). `middle`: the rank whose first main-step pair is not
// overlapped (DualPipe's two middle ranks, DualPipeV's last).
void DualPipeSteps(PassList& l, int64_t rank, int64_t ranks, int64_t chunks, bool middle) {
  for (int64_t i = 0; i < (ranks - rank - 1) * 2; ++i) l.F(0);  // 1: nF0
  for (int64_t i = 0; i < rank + 1; ++i) {                      // 2: nF0F1
    l.F(0);
    l.F(1);
  }
  for (int64_t i = 0; i < ranks - rank - 1; ++i) {  // 3: nB1W1F1, zero bubble
    l.B(1, /*split=*/true);
    l.W();
    l.F(1);
  }
  for (int64_t i = 0; i < chunks - 2 * ranks + rank + 1; ++i) {  // 4: nF0B1F1B0
    if (i == 0 && middle) {
      l.F(0);
      l.B(1, /*split=*/false);
    } else {
      l.FB(0, 1);
    }
    l.FB(1, 0);
  }
  for (int64_t i = 0; i < ranks - rank - 1; ++i) {  // 5: nB1F1B0
    l.B(1, /*split=*/false);
    l.FB(1, 0);
  }
  const int64_t step6 = rank + 1;  // 6: nB1B0, the second half zero bubble
  bool split = false;
  for (int64_t i = 0; i < step6; ++i) {
    if (i == step6 / 2 && rank % 2 == 1) split = true;
    l.B(1, split);
    if (i == step6 / 2 && rank % 2 == 0) split = true;
    l.B(0, split);
  }
  for (int64_t i = 0; i < ranks - rank - 1; ++i) {  // 7: nWB0, zero bubble
    l.W();
    l.B(0, /*split=*/true);
  }
  while (l.waiting() > 0) l.W();  // 8: nW
}

}  // namespace

std::vector<ScheduledPass> ScheduledPasses(const ParallelPlan& plan, int64_t stage) {
  const int64_t p = plan.pipeline_parallel, m = plan.num_micro_batches();
  switch (plan.schedule) {
    case PipelineSchedule::kDualPipeV: {
      PassList l;
      DualPipeSteps(l, stage, p, m, /*middle=*/stage == p - 1);
      return std::move(l).Take();
    }
    case PipelineSchedule::kDualPipe: {
      // Ranks in the second half run the mirror image: their chunk 0 is the
      // reverse direction. Here chunk 0 is always the downward direction.
      const int64_t half = p / 2;
      const bool second = stage >= half;
      const int64_t half_rank = second ? p - 1 - stage : stage;
      PassList l;
      DualPipeSteps(l, half_rank, half, m / 2,
                    /*middle=*/half_rank == half - 1);
      std::vector<ScheduledPass> passes = std::move(l).Take();
      for (ScheduledPass& pass : passes) {
        if (second) pass.chunk = 1 - pass.chunk;
        if (pass.chunk == 1) pass.micro_batch += static_cast<int32_t>(m / 2);
      }
      return passes;
    }
    default:
      return ZbH1(stage, p, m);
  }
}

}  // namespace vtrain
