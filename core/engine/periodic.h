// The periodic fast path of the streaming simulator: after warm-up, a GPipe
// or 1F1B schedule on identical micro-batches repeats itself, so the
// simulator steps until the pipeline's state repeats exactly (up to a shift
// in time) and then advances every stream by whole periods at once. The
// result is bit-identical to stepping every action.
//
// Why it is exact. Group the steady-state actions into periods: for 1F1B,
// period k runs on every stage s its (k + warmup_s)-th forward and its k-th
// backward (not the last backward: it may split at gradient buckets and
// starts the all-reduces); for GPipe, period k is the k-th forward on every
// stage, and later the k-th backward. Every period emits the same tasks
// (same durations, gaps, kinds, streams and dependencies, one period back or
// within the period), so one period is one fixed map F from the state x
// before it to the state after it. The state x is what the rest of the
// simulation reads: for each stream the period touches, its clock (free_ns),
// the start of its current run of communication (read only while its last
// task communicates, so compared only then), its last task's kind and gap,
// and its last finish; and each transfer in flight between stages (its
// finish, run start and kind). Streams the period does not touch (the
// data-parallel streams) are neither read nor written by it. The
// accumulators (busy, gap, exposed and idle time, task counts) are only
// added to. Every operation of Timeline::RunAfter on times is a max, a
// comparison of two times, or adding a constant duration; the only
// comparisons with a constant are "finish > 0" of a parent, true for every
// parent once all clocks and transfers are positive. So F commutes with
// adding any c >= 0 to every time in a state with positive times:
// F(x + c) = F(x) + c, and the accumulators grow by the same amounts.
// Hence if the state after period i+C equals the state after period i
// shifted by D > 0 (exact: integer nanoseconds), then by induction the
// state after period i+C+j equals the state after i+j shifted by D for
// every j while the periods stay steady, so n*C further periods add n*D to
// every time and n times the accumulators' growth over C periods, and the
// walker's counters advance by n times theirs. The simulator then steps the
// remaining steady periods and the cool-down as usual.
//
// Detection compares the exact relative state after every period with the
// last kMaxCycle ones (period lengths C > 1 occur when the slowest cycle
// of the pipeline spans several periods); nothing is estimated. When the
// state never repeats (e.g. a GPipe stage slower than those before it drifts
// apart from them), or for a schedule this file does not know, every
// action is stepped.
#ifndef VTRAIN_CORE_ENGINE_PERIODIC_H_
#define VTRAIN_CORE_ENGINE_PERIODIC_H_

#include <cstdint>

#include "core/engine/timeline_sink.h"
#include "core/graph/walker.h"

namespace vtrain {

// How many earlier periods each period's state is compared with.
inline constexpr int kMaxCycle = 16;

struct PeriodicStats {
  int64_t actions_stepped = 0;  // pipeline actions the walker emitted here
  int64_t actions_skipped = 0;  // accounted for by jumps
  int64_t periods_skipped = 0;
  int64_t tasks_skipped = 0;
  int64_t cycle = 0;  // periods per repeat of the last jump (0: none)
};

// Emits, between walker.Begin() and walker.Finish(), the warm-up and steady
// state of a GPipe or 1F1B schedule period by period, jumping over repeats
// as above; leaves the rest (and any schedule it does not recognise) to
// walker.Finish().
PeriodicStats AdvancePeriodically(IterationWalker<TimelineSink>& walker, TimelineSink& sink);

}  // namespace vtrain

#endif  // VTRAIN_CORE_ENGINE_PERIODIC_H_
