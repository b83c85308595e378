// Pipeline schedules: the order in which one pipeline stage runs the
// forward and backward passes of the micro-batches.
#ifndef VTRAIN_CORE_GRAPH_SCHEDULE_H_
#define VTRAIN_CORE_GRAPH_SCHEDULE_H_

#include <algorithm>
#include <cstdint>
#include <vector>

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

// Interleaved 1F1B (Narayanan et al. 2021, §2.2), in the order Megatron-LM
// runs it (megatron/core/pipeline_parallel/schedules.py,
// forward_backward_pipelining_with_interleaving, with its default group of
// p micro-batches per model chunk): each stage holds `chunks` model chunks
// and runs m * chunks chunk forwards and as many chunk backwards.
struct ChunkPass {
  int64_t micro_batch = 0;
  int64_t chunk = 0;
};

// The k-th chunk forward (or backward) of any stage: micro-batches go in
// groups of `stages`, each group through chunk 0, 1, ... (backwards through
// the last chunk first). m must be a multiple of `stages`.
inline ChunkPass InterleavedPass(bool forward, int64_t stages, int64_t chunks, int64_t k) {
  const int64_t group = k / (stages * chunks), r = k % (stages * chunks);
  const int64_t position = r / stages;
  return {.micro_batch = group * stages + r % stages,
          .chunk = forward ? position : chunks - 1 - position};
}

// Megatron's warm-up: 2 * (stages - stage - 1) + (chunks - 1) * stages chunk
// forwards, at most all of them; then one forward and one backward in turn.
inline int64_t InterleavedWarmup(int64_t stage, int64_t stages, int64_t chunks, int64_t m) {
  return std::min(2 * (stages - stage - 1) + (chunks - 1) * stages, m * chunks);
}

// Whether `stage`'s next action is a chunk forward, after `forwards` chunk
// forwards and `backwards` chunk backwards (< 2 * m * chunks in all).
inline bool InterleavedNextIsForward(int64_t stage, int64_t stages, int64_t chunks, int64_t m,
                                     int64_t forwards, int64_t backwards) {
  if (forwards == m * chunks) return false;
  const int64_t warmup = InterleavedWarmup(stage, stages, chunks, m);
  return forwards < warmup || forwards - warmup == backwards;
}

// With interleaving the last stage's chunk v feeds the first stage's chunk
// v + 1 (and backwards the first stage's chunk v + 1 feeds the last stage's
// chunk v). Both ends run those passes in the same order, so one FIFO carries
// them: the index in it of the `k`-th chunk pass of the sender (`sending`)
// or of the receiver. Only passes that cross the wrap have one.
inline int64_t InterleavedWrapIndex(bool sending, int64_t stages, int64_t chunks, int64_t k) {
  const int64_t group = k / (stages * chunks), r = k % (stages * chunks);
  const int64_t position = r / stages - (sending ? 0 : 1);
  return group * stages * (chunks - 1) + position * stages + r % stages;
}

// The schedules that split each backward into B (input gradients, sent on at
// once) and W (weight gradients, run later to fill bubbles): one stage's
// passes in the order it runs them.
enum class PassKind : uint8_t {
  kForward,
  kBackward,    // B and W together
  kInputGrad,   // B: its W comes later, first in first out
  kWeightGrad,  // W of the oldest kInputGrad still waiting
};
struct ScheduledPass {  // 8 bytes: lists hold every pass of an iteration
  PassKind kind = PassKind::kForward;
  // DualPipe's F&B: a forward overlapped with the backward after it (both
  // passes are marked). They start once both inputs have arrived, and each
  // hides the other's MoE token exchange.
  bool paired = false;
  // The stage's chunk (ParallelPlan::chunk_position gives its place in the
  // model) and the micro-batch; under DualPipe chunk 0 runs micro-batches
  // 0 .. m/2 - 1 down the pipeline and chunk 1 the rest up it.
  int16_t chunk = 0;
  int32_t micro_batch = 0;
};

// Every pass of `stage` under plan.schedule (SplitsBackward), in order:
//  - zb-h1 (Qi et al. 2024, §3.1): 1F1B's order with B and W split; stage s
//    keeps s weight-gradient passes waiting, run in the cool-down, so the
//    bubble is (p - 1)(F + B - 2W) with B the whole backward, at 1F1B's peak
//    activation memory (over all stages).
//  - dualpipev and dualpipe: the eight steps of DualPipe's reference
//    schedules (github.com/deepseek-ai/DualPipe, dualpipev.py and
//    dualpipe.py, DualPipeV.step / DualPipe.step).
// `plan` must be valid (ValidateJob).
std::vector<ScheduledPass> ScheduledPasses(const ParallelPlan& plan, int64_t stage);

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_SCHEDULE_H_
