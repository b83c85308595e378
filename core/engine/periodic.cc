#include "core/engine/periodic.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace vtrain {
namespace {

using Walker = IterationWalker<TimelineSink>;

struct Step {
  int64_t stage = 0;
  bool forward = true;
};

// One steady phase: `steps` repeated `periods` times.
struct Phase {
  std::vector<Step> steps;
  int64_t periods = 0;
};

// A period's state relative to its first touched stream's clock (see
// periodic.h), with what a jump needs.
struct Key {
  std::vector<int64_t> values;
  uint64_t hash = 0;
  int64_t ref = 0;
  bool positive = false;  // every clock and transfer finish > 0
};

// Totals a jump multiplies: accumulators of the touched streams, the
// walker's counters, the transfers pushed and the tasks run.
struct Totals {
  std::vector<StreamStats> stats;
  std::vector<int64_t> counters;
};

class PeriodicRunner {
 public:
  PeriodicRunner(Walker& walker, TimelineSink& sink)
      : walker_(walker),
        sink_(sink),
        ps_(walker.pipeline_state()),
        timeline_(sink.mutable_timeline()),
        p_(walker.plan().pipeline_parallel) {}

  // Runs `phase` (after its prefix), jumping once over repeats; false when a
  // step did not fit the schedule (the walker then finishes by itself).
  bool Run(const Phase& phase);
  PeriodicStats& stats() { return stats_; }

 private:
  bool StepPeriod(const Phase& phase) {
    for (const Step& st : phase.steps) {
      if (!walker_.Step(st.stage, st.forward)) return false;
    }
    stats_.actions_stepped += static_cast<int64_t>(phase.steps.size());
    return true;
  }
  void MakeKey(Key& key) const;
  Totals Capture() const;
  void Jump(int64_t n, int64_t shift, const Totals& a, const Totals& b);

  Walker& walker_;
  TimelineSink& sink_;
  internal::PipelineState<Completion>& ps_;
  Timeline& timeline_;
  const int64_t p_;
  std::vector<StreamId> touched_;
  PeriodicStats stats_;
};

void PeriodicRunner::MakeKey(Key& key) const {
  std::vector<int64_t>& v = key.values;
  v.clear();
  key.ref = timeline_.stream_state(touched_[0]).free_ns;
  const int64_t ref = key.ref;
  bool positive = true;
  for (const StreamId id : touched_) {
    const Timeline::StreamState& s = timeline_.stream_state(id);
    positive &= s.free_ns > 0;
    const bool live = Timeline::IsCommunication(s.last_kind);
    v.insert(v.end(), {s.free_ns - ref, s.last_gap_ns, static_cast<int64_t>(s.last_kind),
                       live ? s.comm_run_start_ns - ref : 0, s.stats.last_finish_ns - ref});
  }
  for (auto* queues : {&ps_.forward_sends, &ps_.backward_sends}) {
    for (internal::SendQueue<Completion>& q : *queues) {
      v.push_back(static_cast<int64_t>(q.size()));
      for (size_t i = 0; i < q.size(); ++i) {
        const Completion& c = q.at(i);
        positive &= c.finish_ns > 0;
        v.insert(v.end(), {c.finish_ns - ref, c.run_start_ns - ref, static_cast<int64_t>(c.kind)});
      }
    }
  }
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (const int64_t x : v) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001B3ull + (h >> 29);
  key.hash = h;
  key.positive = positive;
}

Totals PeriodicRunner::Capture() const {
  Totals t;
  for (int32_t id = 0; id < timeline_.num_streams(); ++id) {
    t.stats.push_back(timeline_.stream_state(id).stats);
  }
  std::vector<int64_t>& c = t.counters;
  c.insert(c.end(), ps_.forwards.begin(), ps_.forwards.end());
  c.insert(c.end(), ps_.backwards.begin(), ps_.backwards.end());
  for (auto* queues : {&ps_.forward_sends, &ps_.backward_sends}) {
    for (const internal::SendQueue<Completion>& q : *queues) c.push_back(q.pushed());
  }
  c.push_back(sink_.num_tasks());
  return t;
}

// Advances the state by n repeats of the C periods between `a` and `b`,
// which moved every touched time by `shift` (see periodic.h).
void PeriodicRunner::Jump(int64_t n, int64_t shift, const Totals& a, const Totals& b) {
  const int64_t dt = n * shift;
  for (const StreamId id : touched_) {
    Timeline::StreamState& s = timeline_.stream_state(id);
    s.free_ns += dt;
    if (Timeline::IsCommunication(s.last_kind)) s.comm_run_start_ns += dt;
    StreamStats& st = s.stats;
    const StreamStats &sa = a.stats[id], &sb = b.stats[id];
    for (int k = 0; k < kNumTaskKinds; ++k) {
      st.busy_ns[k] += n * (sb.busy_ns[k] - sa.busy_ns[k]);
      st.exposed_wait_ns[k] += n * (sb.exposed_wait_ns[k] - sa.exposed_wait_ns[k]);
    }
    st.gap_ns += n * (sb.gap_ns - sa.gap_ns);
    st.idle_ns += n * (sb.idle_ns - sa.idle_ns);
    st.num_tasks += n * (sb.num_tasks - sa.num_tasks);
    st.last_finish_ns += dt;
  }
  size_t i = 0;
  int64_t actions = 0;
  for (std::vector<int64_t>* counts : {&ps_.forwards, &ps_.backwards}) {
    for (int64_t& c : *counts) {
      const int64_t d = n * (b.counters[i] - a.counters[i]);
      c += d;
      actions += d;
      ++i;
    }
  }
  ps_.remaining -= actions;
  for (auto* queues : {&ps_.forward_sends, &ps_.backward_sends}) {
    for (internal::SendQueue<Completion>& q : *queues) {
      q.Skip(n * (b.counters[i] - a.counters[i]));
      ++i;
      for (size_t e = 0; e < q.size(); ++e) {
        q.at(e).finish_ns += dt;
        q.at(e).run_start_ns += dt;
      }
    }
  }
  const int64_t tasks = n * (b.counters[i] - a.counters[i]);
  sink_.SkipTasks(tasks);
  stats_.tasks_skipped += tasks;
  stats_.actions_skipped += actions;
}

bool PeriodicRunner::Run(const Phase& phase) {
  if (phase.periods <= 0) return true;
  // The streams a period touches (the same in every period).
  std::vector<int64_t> before(timeline_.num_streams());
  for (int32_t id = 0; id < timeline_.num_streams(); ++id) {
    before[id] = timeline_.stream_state(id).stats.num_tasks;
  }
  if (!StepPeriod(phase)) return false;
  touched_.clear();
  for (int32_t id = 0; id < timeline_.num_streams(); ++id) {
    if (timeline_.stream_state(id).stats.num_tasks != before[id]) touched_.push_back(id);
  }
  if (touched_.empty()) return true;
  std::vector<Key> ring(kMaxCycle);
  Key key;
  int64_t done = 1;
  bool jumped = false;
  for (; done < phase.periods; ++done) {
    if (!StepPeriod(phase)) return false;
    if (jumped || sink_.Stopped()) continue;
    MakeKey(key);
    int cycle = 0;
    for (int c = 1; c <= kMaxCycle && c <= done - 1 && cycle == 0; ++c) {
      const Key& old = ring[(done - c) % kMaxCycle];
      if (old.hash == key.hash && old.positive && key.ref > old.ref && old.values == key.values) {
        cycle = c;
      }
    }
    if (cycle > 0 && done + 1 + 2 * cycle <= phase.periods) {
      // Step one more repeat to measure the growth of the totals, and
      // check that it repeated.
      const Totals a = Capture();
      const int64_t shift = key.ref - ring[(done - cycle) % kMaxCycle].ref;
      const Key at_a = key;
      for (int c = 0; c < cycle; ++c) {
        if (!StepPeriod(phase)) return false;
      }
      done += cycle;
      MakeKey(key);
      if (key.values == at_a.values && key.ref - at_a.ref == shift) {
        const Totals b = Capture();
        bool untouched_same = true;
        for (int32_t id = 0, t = 0; id < timeline_.num_streams(); ++id) {
          if (t < static_cast<int32_t>(touched_.size()) && touched_[t] == id) {
            ++t;
          } else {
            untouched_same &= a.stats[id].num_tasks == b.stats[id].num_tasks;
          }
        }
        const int64_t n = (phase.periods - (done + 1)) / cycle;
        if (untouched_same && n > 0) {
          Jump(n, shift, a, b);
          done += n * cycle;
          stats_.periods_skipped += n * cycle;
          stats_.cycle = cycle;
        }
      }
      jumped = true;
      continue;
    }
    std::swap(ring[done % kMaxCycle], key);
  }
  return true;
}

}  // namespace

PeriodicStats AdvancePeriodically(Walker& walker, TimelineSink& sink) {
  PeriodicRunner runner(walker, sink);
  const ParallelPlan& plan = walker.plan();
  const int64_t p = plan.pipeline_parallel, m = plan.num_micro_batches();
  Phase forwards, backwards;
  for (int64_t s = 0; s < p; ++s) forwards.steps.push_back({.stage = s, .forward = true});
  for (int64_t s = p - 1; s >= 0; --s) backwards.steps.push_back({.stage = s, .forward = false});
  if (plan.schedule == PipelineSchedule::kGpipe) {
    // Forwards flow down the stages, then backwards up; the last backward
    // is left to the walker.
    forwards.periods = m;
    backwards.periods = m - 1;
    if (runner.Run(forwards)) runner.Run(backwards);
  } else if (plan.schedule == PipelineSchedule::k1F1B && m >= p) {
    // Warm-up: stage s runs p - s - 1 forwards; then period k is stage s's
    // (k + p - s - 1)-th forward, down the stages, and the k-th backward of
    // each, up the stages (m - p + 1 periods; with one stage the last is
    // the last backward, left to the walker).
    for (int64_t s = 0; s < p; ++s) {
      for (int64_t i = 0; i < p - s - 1; ++i) {
        if (!walker.Step(s, true)) return runner.stats();
        ++runner.stats().actions_stepped;
      }
    }
    Phase steady;
    steady.steps = forwards.steps;
    steady.steps.insert(steady.steps.end(), backwards.steps.begin(), backwards.steps.end());
    steady.periods = p == 1 ? m - 1 : m - p + 1;
    runner.Run(steady);
  }
  return runner.stats();
}

}  // namespace vtrain
