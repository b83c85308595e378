// Pipeline schedules: the order in which one pipeline stage runs the
// forward and backward passes of the micro-batches.
#ifndef VTRAIN_CORE_GRAPH_SCHEDULE_H_
#define VTRAIN_CORE_GRAPH_SCHEDULE_H_

#include <algorithm>
#include <cstdint>

#include "core/spec/job.h"

namespace vtrain {

struct PipelineAction {
  bool forward = true;
  int64_t micro_batch = 0;
};

// The i-th action (0 <= i < 2m) of `stage` (0-based) out of `stages` with
// `m` micro-batches.
//  - GPipe (Huang et al. 2019): all forwards, then all backwards.
//  - 1F1B (Narayanan et al. 2019, PipeDream-Flush; Megatron's default):
//    min(stages - stage - 1, m) warm-up forwards, then alternate one forward
//    and one backward, then the remaining backwards.
// With one stage, 1F1B is plain gradient accumulation: F0 B0 F1 B1 ...
inline PipelineAction ScheduleAction(PipelineSchedule schedule, int64_t stage, int64_t stages,
                                     int64_t m, int64_t i) {
  if (schedule == PipelineSchedule::kGpipe) {
    return i < m ? PipelineAction{.forward = true, .micro_batch = i}
                 : PipelineAction{.forward = false, .micro_batch = i - m};
  }
  const int64_t warmup = std::min(stages - stage - 1, m);
  if (i < warmup) return {.forward = true, .micro_batch = i};
  const int64_t steady = m - warmup;  // forward/backward pairs
  if (i < warmup + 2 * steady) {
    const int64_t k = (i - warmup) / 2;
    return (i - warmup) % 2 == 0 ? PipelineAction{.forward = true, .micro_batch = warmup + k}
                                 : PipelineAction{.forward = false, .micro_batch = k};
  }
  return {.forward = false, .micro_batch = steady + (i - warmup - 2 * steady)};
}

// The same order, incrementally: whether `stage`'s next action is a forward,
// after it ran `forwards` forwards and `backwards` backwards (< 2m in all).
// Both schedules run the forwards, and the backwards, in micro-batch order.
inline bool NextIsForward(PipelineSchedule schedule, int64_t stage, int64_t stages, int64_t m,
                          int64_t forwards, int64_t backwards) {
  if (forwards == m) return false;
  if (schedule == PipelineSchedule::kGpipe) return true;
  const int64_t warmup = std::min(stages - stage - 1, m);
  return forwards < warmup || forwards - warmup == backwards;
}

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_SCHEDULE_H_
