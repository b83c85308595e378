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

// One steady phase: `steps` repeated `periods` times. `ramp`: the 1F1B
// steady state, after which stage s keeps its steady pattern for s more
// periods (see RampJump).
struct Phase {
  std::vector<Step> steps;
  int64_t periods = 0;
  bool ramp = false;
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
  // Runs `count` actions of stage `s`, all forwards or all backwards,
  // jumping once its state repeats; false as Run.
  bool Chain(int64_t s, bool forward, int64_t count);
  bool ramp_jumped() const { return ramp_jumped_; }
  PeriodicStats& stats() { return stats_; }

 private:
  // Steps one period; with `record`, keeps each stage's backward transfer
  // (RampJump needs them).
  bool StepPeriod(const Phase& phase, bool record = false) {
    if (sink_.Stopped()) return false;  // the walker reports the cancellation
    for (const Step& st : phase.steps) {
      if (!walker_.Step(st.stage, st.forward)) return false;
      if (record && !st.forward && st.stage > 0) {
        internal::SendQueue<Completion>& q = ps_.backward_sends[st.stage];
        backward_sent_[st.stage] = q.at(q.size() - 1);
      }
    }
    stats_.actions_stepped += static_cast<int64_t>(phase.steps.size());
    return true;
  }
  void MakeKey(Key& key) const;
  Totals Capture() const;
  void Jump(int64_t n, int64_t shift, const Totals& a, const Totals& b);
  bool RampJump(int64_t period, int64_t periods, int64_t shift, const Totals& a, const Totals& b);
  void ShiftStream(StreamId id, int64_t n, int64_t shift, const StreamStats& a,
                   const StreamStats& b);

  Walker& walker_;
  TimelineSink& sink_;
  internal::PipelineState<Completion>& ps_;
  Timeline& timeline_;
  const int64_t p_;
  std::vector<StreamId> touched_;
  std::vector<Completion> backward_sent_ = std::vector<Completion>(p_);
  bool ramp_jumped_ = false;
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
        const Completion c = q.at(i);
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

// Moves stream `id` n periods on: its times by n * shift, its accumulators
// by n times their growth from `a` to `b`.
void PeriodicRunner::ShiftStream(StreamId id, int64_t n, int64_t shift, const StreamStats& a,
                                 const StreamStats& b) {
  const int64_t dt = n * shift;
  Timeline::StreamState& s = timeline_.stream_state(id);
  s.free_ns += dt;
  if (Timeline::IsCommunication(s.last_kind)) s.comm_run_start_ns += dt;
  StreamStats& st = s.stats;
  for (int k = 0; k < kNumTaskKinds; ++k) {
    st.busy_ns[k] += n * (b.busy_ns[k] - a.busy_ns[k]);
    st.exposed_wait_ns[k] += n * (b.exposed_wait_ns[k] - a.exposed_wait_ns[k]);
  }
  st.gap_ns += n * (b.gap_ns - a.gap_ns);
  st.idle_ns += n * (b.idle_ns - a.idle_ns);
  st.num_tasks += n * (b.num_tasks - a.num_tasks);
  st.last_finish_ns += dt;
}

// Advances the state by n repeats of the C periods between `a` and `b`,
// which moved every touched time by `shift` (see periodic.h).
void PeriodicRunner::Jump(int64_t n, int64_t shift, const Totals& a, const Totals& b) {
  const int64_t dt = n * shift;
  for (const StreamId id : touched_) ShiftStream(id, n, shift, a.stats[id], b.stats[id]);
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
      q.ShiftAll(dt);
    }
  }
  const int64_t tasks = n * (b.counters[i] - a.counters[i]);
  sink_.SkipTasks(tasks);
  stats_.tasks_skipped += tasks;
  stats_.actions_skipped += actions;
}

// The 1F1B ramp. Period k of stage s (its (k + p - s - 1)-th forward and
// k-th backward) exists for k < m - p + 1 + s, so after the last period
// common to all stages (K - 1, K = m - p + 1) stage s keeps the steady
// pattern for s more periods (stage p - 1 one fewer: its last backward is
// special). These cells (s, k) depend only on cells of the same region:
// the forward of (s - 1, k - 1) and the backward of (s + 1, k), and stage
// s's own stream. So they take exactly the values the steady state would
// take if it went on for ever, which after a repeat with cycle 1 and shift D
// at period i are those of period i plus (k - i) * D (periodic.h). Each
// stage s therefore jumps n_s = e_s - i periods to its own last steady
// period e_s; the transfers then in flight are stage s's backward of
// period e_s (for stage s - 1's first cool-down backward), recorded at
// period i and shifted, and stage p - 2's forward of period m - 2 (for
// stage p - 1's last forward). The cool-down is stepped by the walker.
bool PeriodicRunner::RampJump(int64_t i, int64_t periods, int64_t shift, const Totals& a,
                              const Totals& b) {
  const int64_t m = walker_.num_micro_batches();
  const std::vector<StageInfo>& stages = walker_.stages();
  if (static_cast<int64_t>(touched_.size()) != p_) return false;
  std::vector<int64_t> n(p_);
  int64_t tasks_per_period = 0;
  for (int64_t s = 0; s < p_; ++s) {
    const StreamId cs = stages[s].compute_stream;
    if (touched_[s] != cs) return false;
    // One forward and one backward a period; the transfers between periods
    // are the forwards in flight down the pipeline.
    if (b.counters[s] - a.counters[s] != 1 || b.counters[p_ + s] - a.counters[p_ + s] != 1 ||
        ps_.forward_sends[s].size() != (s + 1 < p_ ? 1u : 0u) || !ps_.backward_sends[s].empty()) {
      return false;
    }
    tasks_per_period += b.stats[cs].num_tasks - a.stats[cs].num_tasks;
    n[s] = (s + 1 < p_ ? periods + s - 1 : m - 2) - i;
    if (n[s] < (s > 0 ? 1 : 0)) return false;
  }
  if (b.counters.back() - a.counters.back() != tasks_per_period) return false;
  int64_t actions = 0, tasks = 0;
  for (int64_t s = 0; s < p_; ++s) {
    const StreamId cs = stages[s].compute_stream;
    ShiftStream(cs, n[s], shift, a.stats[cs], b.stats[cs]);
    ps_.forwards[s] += n[s];
    ps_.backwards[s] += n[s];
    actions += 2 * n[s];
    tasks += n[s] * (b.stats[cs].num_tasks - a.stats[cs].num_tasks);
    if (s + 1 < p_) {
      internal::SendQueue<Completion>& q = ps_.forward_sends[s];
      q.Skip(n[s]);
      if (n[s + 1] == n[s] + 1) {
        q.Pop(q.popped());
      } else {
        q.ShiftAll(n[s] * shift);
      }
    }
    if (s > 0) {
      internal::SendQueue<Completion>& q = ps_.backward_sends[s];
      if (n[s - 1] == n[s] - 1) {
        q.Skip(n[s] - 1);
        q.Push(q.pushed(), backward_sent_[s].Shifted(n[s] * shift));
      } else {
        q.Skip(n[s]);
      }
    }
  }
  ps_.remaining -= actions;
  sink_.SkipTasks(tasks);
  stats_.actions_skipped += actions;
  stats_.tasks_skipped += tasks;
  stats_.periods_skipped += n[0];
  stats_.cycle = 1;
  ramp_jumped_ = true;
  return true;
}

// Whether `now` is `before` shifted by `d` in every time the rest of a
// simulation reads (periodic.h).
bool ShiftedBy(const Timeline::StreamState& now, const Timeline::StreamState& before, int64_t d) {
  return now.free_ns == before.free_ns + d && now.last_gap_ns == before.last_gap_ns &&
         now.last_kind == before.last_kind &&
         (!Timeline::IsCommunication(now.last_kind) ||
          now.comm_run_start_ns == before.comm_run_start_ns + d) &&
         now.stats.last_finish_ns == before.stats.last_finish_ns + d;
}
bool ShiftedBy(const Completion& now, const Completion& before, int64_t d) {
  return now.finish_ns == before.finish_ns + d && now.run_start_ns == before.run_start_ns + d &&
         now.kind == before.kind;
}

// A chain: one stage's run of identical actions, each taking the next
// transfer from one neighbour (none for stage 0's forwards and the last
// stage's backwards) and sending one to the other. With S_j the stage's
// stream after action j and in_j the transfer it took, action j + 1 is a
// fixed map (S_j, in_{j+1}) -> (S_{j+1}, out_{j+1}) that commutes with
// shifts (periodic.h). So if S_j = S_{j-1} + D (D > 0, times positive) and
// the transfers still to come keep arriving D apart, every later action
// repeats the last one D later: the stage jumps to the end of the chain,
// taking the transfers and sending out_j + k * D. The 1F1B warm-up (stage s
// runs p - s - 1 forwards) and cool-down are such chains.
bool PeriodicRunner::Chain(int64_t s, bool forward, int64_t count) {
  const StreamId cs = walker_.stages()[s].compute_stream;
  internal::SendQueue<Completion>* in = forward
                                            ? (s > 0 ? &ps_.forward_sends[s - 1] : nullptr)
                                            : (s + 1 < p_ ? &ps_.backward_sends[s + 1] : nullptr);
  internal::SendQueue<Completion>* out = forward ? (s + 1 < p_ ? &ps_.forward_sends[s] : nullptr)
                                                 : (s > 0 ? &ps_.backward_sends[s] : nullptr);
  Timeline::StreamState& stream = timeline_.stream_state(cs);
  Completion last_in, last_out;
  for (int64_t j = 0; j < count; ++j) {
    if (sink_.Stopped()) return false;
    const Timeline::StreamState before = stream;
    const Completion in_j = in != nullptr && in->size() > 0 ? in->at(0) : Completion{};
    const int64_t tasks_before = sink_.num_tasks();
    if (!walker_.Step(s, forward)) return false;
    ++stats_.actions_stepped;
    const Completion out_j = out != nullptr ? out->at(out->size() - 1) : Completion{};
    const int64_t d = stream.free_ns - before.free_ns;
    const int64_t n = count - 1 - j;
    bool repeats =
        j > 0 && n > 0 && d > 0 && before.free_ns > 0 && ShiftedBy(stream, before, d) &&
        sink_.num_tasks() - tasks_before == stream.stats.num_tasks - before.stats.num_tasks;
    if (repeats && in != nullptr) {
      repeats = last_in.finish_ns > 0 && ShiftedBy(in_j, last_in, d) &&
                in->IsRun(0, n, in_j.Shifted(d), d);
    }
    if (repeats && out != nullptr) repeats = ShiftedBy(out_j, last_out, d);
    last_in = in_j;
    last_out = out_j;
    if (!repeats) continue;
    const StreamStats after = stream.stats;
    const int64_t tasks = n * (after.num_tasks - before.stats.num_tasks);
    ShiftStream(cs, n, d, before.stats, after);
    if (in != nullptr) in->PopN(n);
    if (out != nullptr) out->PushRun(out_j.Shifted(d), d, n);
    (forward ? ps_.forwards[s] : ps_.backwards[s]) += n;
    ps_.remaining -= n;
    sink_.SkipTasks(tasks);
    stats_.actions_skipped += n;
    stats_.tasks_skipped += tasks;
    return true;
  }
  return true;
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
    if (jumped) continue;
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
      const bool ramp = phase.ramp && cycle == 1;
      for (int c = 0; c < cycle; ++c) {
        if (!StepPeriod(phase, ramp)) return false;
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
        // The ramp jump covers the rest of the phase and more.
        if (untouched_same && ramp && RampJump(done, phase.periods, shift, a, b)) return true;
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
  // Interleaved 1F1B (virtual stages) is stepped: its chunks make the
  // periods this file recognises longer and uneven; so are the schedules
  // that split the backward (their passes come from a list).
  if (plan.virtual_stages > 1 || SplitsBackward(plan.schedule)) return runner.stats();
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
    for (int64_t s = 0; s + 1 < p; ++s) {
      if (!runner.Chain(s, true, p - s - 1)) return runner.stats();
    }
    Phase steady;
    steady.steps = forwards.steps;
    steady.steps.insert(steady.steps.end(), backwards.steps.begin(), backwards.steps.end());
    steady.periods = p == 1 ? m - 1 : m - p + 1;
    steady.ramp = true;
    if (!runner.Run(steady) || !runner.ramp_jumped()) return runner.stats();
    // Cool-down: the last stage's last forward and backward, then stage s's
    // p - s - 1 backwards, the last of them apart (it may differ) and after
    // stage s - 1 has taken the others (so a run is never copied out).
    if (!walker.Step(p - 1, true) || !walker.Step(p - 1, false)) return runner.stats();
    runner.stats().actions_stepped += 2;
    for (int64_t s = p - 2; s >= 0; --s) {
      if (!runner.Chain(s, false, p - s - 2)) return runner.stats();
    }
    for (int64_t s = p - 2; s >= 0; --s) {
      if (!walker.Step(s, false)) return runner.stats();
      ++runner.stats().actions_stepped;
    }
  }
  return runner.stats();
}

}  // namespace vtrain
