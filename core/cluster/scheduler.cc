#include "core/cluster/scheduler.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/cluster/leaf_map.h"
#include "core/cluster/outcome.h"
#include "core/cluster/promise_limit.h"
#include "core/cluster/spine_share.h"
#include "core/cluster/tables.h"

namespace vtrain {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Running {
  const ClusterJob* job;
  const ThroughputTable* table;
  const std::vector<int64_t>* steps;            // SteepestSteps of `table`
  const ThroughputTable* fragmented = nullptr;  // on more leaves than needed
  // The same with a leaf's uplinks full of others' traffic (null: none).
  const ThroughputTable *contended = nullptr, *fragmented_contended = nullptr;
  double alone_rate = 0;               // iterations/s where it runs, spine to itself
  double rate = 0;                     // the same with others on its uplinks
  bool fragmented_now = false;         // on more leaves than needed now
  std::vector<LeafMap::Slice> slices;  // its nodes' leaves
  double remaining = 0;                // iterations
  int64_t gpus = 0;                    // allocated now
  double paused_until = 0;             // restarting after a change of GPUs
  bool arrived = false, admitted = false, done = false;
  JobOutcome outcome;
};

class Cluster {
 public:
  Cluster(std::vector<Running> jobs, const ClusterSimOptions& options)
      : jobs_(std::move(jobs)),
        options_(options),
        promise_limit_(options.promise_limit, options.total_gpus),
        displacement_(options.displacement_limit, options.total_gpus) {
    if (options_.nodes_per_leaf > 0 && options_.gpus_per_node > 0) {
      leaves_.emplace(options_.total_gpus / options_.gpus_per_node, options_.nodes_per_leaf);
    }
  }

  ClusterOutcome Run() {
    size_t next_arrival = 0;
    double now = jobs_.empty() ? 0 : jobs_.front().job->submit_s;
    const double start = now;
    while (true) {
      const double arrival = next_arrival < jobs_.size() ? jobs_[next_arrival].job->submit_s : kInf;
      const double completion = NextCompletion(now);
      const double t = std::min(arrival, completion);
      if (t == kInf) break;
      Advance(now, t);
      now = t;
      while (next_arrival < jobs_.size() && jobs_[next_arrival].job->submit_s <= now) {
        Arrive(jobs_[next_arrival], now);
        ++next_arrival;
      }
      Replan(now);
    }
    return Summarise(start);
  }

 private:
  double FinishTime(const Running& r, int64_t gpus, double now) const {
    const double tput = gpus == r.gpus && gpus > 0 ? r.rate : r.table->At(gpus);
    if (tput <= 0) return kInf;
    return std::max(now, r.paused_until) + r.remaining / tput;
  }

  double NextCompletion(double now) const {
    double t = kInf;
    for (const Running& r : jobs_) {
      if (r.arrived && !r.done && r.gpus > 0) t = std::min(t, FinishTime(r, r.gpus, now));
    }
    return t;
  }

  void Advance(double from, double to) {
    for (Running& r : jobs_) {
      if (!r.arrived || r.done || r.gpus == 0) continue;
      // Finishing is decided on the clock, not on the remaining work reaching
      // exactly zero in floating point (which would stall the event loop).
      const double finish = FinishTime(r, r.gpus, from);
      const double end = std::min(to, finish);
      const double run = std::max(0.0, end - std::max(from, r.paused_until));
      r.remaining -= run * r.rate;
      if (r.alone_rate > 0) {
        spine_shared_gpu_s_ += run * static_cast<double>(r.gpus) * (1 - r.rate / r.alone_rate);
      }
      gpu_seconds_ += (end - from) * static_cast<double>(r.gpus);
      useful_gpu_seconds_ += run * static_cast<double>(r.gpus);
      if (finish <= to) {
        r.done = true;
        r.remaining = 0;
        r.outcome.finished = true;
        r.outcome.finish_s = finish;
        r.outcome.jct_s = finish - r.job->submit_s;
        r.outcome.met_deadline = finish <= r.job->deadline_s + 1e-6;
        r.gpus = 0;
      }
    }
  }

  // The fewest GPUs with which `r` still meets its deadline from `now`
  // (counting one restart), or 0 when none does.
  int64_t MinShare(const Running& r, double now) const {
    for (int64_t g : r.table->gpus) {
      if (g > options_.total_gpus) break;
      const double tput = r.table->At(g);
      if (tput <= 0) continue;
      if (now + options_.rescale_overhead_s + r.remaining / tput <= r.job->deadline_s) return g;
    }
    return 0;
  }

  void Arrive(Running& r, double now) {
    r.arrived = true;
    const int64_t need = MinShare(r, now);
    int64_t promised = 0;
    for (const Running& o : jobs_) {
      if (&o != &r && o.arrived && !o.done && o.admitted) {
        promised += Share(o, now);  // spare GPUs handed out are not promised
      }
    }
    // Admission control: only with GPUs not promised to admitted jobs, not
    // a promise too large for the cluster's usual deadlines, and not one
    // expected to turn away more later arrivals than the one it keeps.
    const double time_left = r.job->deadline_s - now;
    promise_limit_.Saw(r.job->deadline_s - r.job->submit_s);
    displacement_.Saw(now, need);
    r.admitted = need > 0 && promised + need <= options_.total_gpus &&
                 promise_limit_.Allows(need, time_left) &&
                 displacement_.Allows(need, promised, time_left);
    r.outcome.admitted = r.admitted;
  }

  // Running jobs keep what they have and admitted jobs get their minimum
  // share; when that does not fit, GPUs come back one step at a time where
  // they are worth least (a change costs a restart, so few jobs change).
  // Then spare GPUs go one step at a time to the job whose completion they
  // speed up most per GPU, admitted or best-effort alike; a running job
  // grows only when the restart is repaid by finishing earlier.
  void Replan(double now) {
    std::vector<int64_t> plan(jobs_.size(), 0);
    NodeBudget placed(options_.total_gpus, options_.gpus_per_node);
    // Start from what runs: every running job keeps its GPUs (admitted ones
    // at least their share), waiting admitted jobs get their share.
    for (size_t i = 0; i < jobs_.size(); ++i) {
      const Running& r = jobs_[i];
      if (!r.arrived || r.done) continue;
      plan[i] = r.admitted ? std::max(Share(r, now), r.gpus) : r.gpus;
      placed.Add(plan[i]);
    }
    // Over capacity: take GPUs back a step at a time where they are worth
    // the least (throughput lost per GPU, relative to the work left), from
    // best-effort jobs first and never below an admitted job's share. Each
    // job changed pays one restart, so changing few is the point.
    for (int admitted_pass = 0; admitted_pass <= 1 && !placed.FitsWith(0, 0); ++admitted_pass) {
      while (!placed.FitsWith(0, 0)) {
        double least = kInf;
        size_t pick = jobs_.size();
        int64_t to = 0;
        for (size_t i = 0; i < jobs_.size(); ++i) {
          const Running& r = jobs_[i];
          if (!r.arrived || r.done || plan[i] == 0 || r.admitted != (admitted_pass == 1)) continue;
          const int64_t floor = r.admitted ? Share(r, now) : 0;
          const int64_t smaller = std::max(floor, PreviousCount(*r.table, plan[i]));
          if (smaller >= plan[i]) continue;
          const double loss = PerGpu(r, smaller, plan[i]);
          if (loss < least) {
            least = loss;
            pick = i;
            to = smaller;
          }
        }
        if (pick == jobs_.size()) break;
        placed.Remove(plan[pick]);
        placed.Add(to);
        plan[pick] = to;
      }
    }
    if (!placed.FitsWith(0, 0)) {
      // Even the shares do not fit (promises made earlier, node rounding):
      // shares in arrival order, admitted jobs first, as far as they go.
      placed = NodeBudget(options_.total_gpus, options_.gpus_per_node);
      for (int admitted_pass = 1; admitted_pass >= 0; --admitted_pass) {
        for (size_t i = 0; i < jobs_.size(); ++i) {
          const Running& r = jobs_[i];
          if (!r.arrived || r.done || r.admitted != (admitted_pass == 1)) continue;
          int64_t share = r.admitted ? Share(r, now) : 0;
          if (!placed.FitsWith(0, share)) share = 0;
          plan[i] = share;
          placed.Add(share);
        }
      }
    }
    GiveSpares(now, plan, placed);
    for (size_t moves = 0; moves < 4 * jobs_.size() + 16 && RebalanceOnce(now, plan, placed);
         ++moves) {
      GiveSpares(now, plan, placed);
    }
    if (leaves_) PlaceOnLeaves(plan);
    int64_t allocated = 0;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      Running& r = jobs_[i];
      if (plan[i] != r.gpus) {
        if (r.gpus > 0 && plan[i] > 0) ++r.outcome.reallocations;
        if (plan[i] > 0) r.paused_until = now + options_.rescale_overhead_s;  // (re)start
        r.gpus = plan[i];
        // A spread placement is never faster than a packed one.
        r.fragmented_now = leaves_ && leaves_->Fragmented(r.slices);
        r.alone_rate = r.fragmented_now && r.fragmented != nullptr
                           ? std::min(r.fragmented->At(r.gpus), r.table->At(r.gpus))
                           : r.table->At(r.gpus);
        if (r.fragmented_now) ++r.outcome.fragmented_placements;
      }
      r.rate = r.alone_rate;
      allocated += r.gpus;
    }
    if (leaves_ && options_.contended_background > 0) ShareSpine();
    allocated_.emplace_back(now, allocated);
  }

  // Spare GPUs, a step at a time, to whichever job they speed up most per
  // GPU, promised or not: serving admitted jobs (whose shares keep their
  // deadlines) first starved best-effort ones (cluster03, 256 GPUs: +24%).
  // A job's candidate step stands until it no longer fits: spares only
  // shrink the room, so a step that still fits is still the steepest.
  void GiveSpares(double now, std::vector<int64_t>& plan, NodeBudget& placed) const {
    std::vector<int64_t> next(jobs_.size(), 0);  // the step that fits (0: none)
    std::vector<double> gain(jobs_.size(), 0);   // per GPU; 0 when it does not repay
    const auto candidate = [&](size_t i) {
      const Running& r = jobs_[i];
      next[i] = NextCount(r, plan[i]);
      if (next[i] > 0 && !placed.FitsWith(plan[i], next[i])) {
        // Its best step does not fit: the steepest that does.
        next[i] = SteepestStep(*r.table, plan[i], placed.Room(plan[i]));
      }
      gain[i] =
          next[i] > 0 && RepaysRestart(r, plan[i], next[i], now) ? PerGpu(r, plan[i], next[i]) : 0;
    };
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (jobs_[i].arrived && !jobs_[i].done) candidate(i);
    }
    while (true) {
      double best_gain = 0;
      size_t best = jobs_.size();
      for (size_t i = 0; i < jobs_.size(); ++i) {
        if (next[i] == 0) continue;
        if (!placed.FitsWith(plan[i], next[i])) candidate(i);
        if (gain[i] > best_gain) {
          best_gain = gain[i];
          best = i;
        }
      }
      if (best == jobs_.size()) break;
      placed.Remove(plan[best]);
      placed.Add(next[best]);
      plan[best] = next[best];
      candidate(best);
    }
  }

  // The running jobs' rates with every job on more than one leaf sharing its
  // leaves' uplinks with the others there.
  void ShareSpine() {
    std::vector<SpineJob> spine;
    std::vector<Running*> who;
    for (Running& r : jobs_) {
      const ThroughputTable* contended = r.fragmented_now ? r.fragmented_contended : r.contended;
      if (r.done || r.gpus == 0 || r.slices.size() < 2 || contended == nullptr ||
          !(r.alone_rate > 0)) {
        continue;
      }
      const double loaded = contended->At(r.gpus);
      const double alone_s = 1 / r.alone_rate;
      spine.push_back({r.slices, alone_s, loaded > 0 ? std::max(alone_s, 1 / loaded) : alone_s});
      who.push_back(&r);
    }
    const std::vector<double> times = SharedSpineTimes(spine, options_.contended_background);
    for (size_t i = 0; i < who.size(); ++i) who[i]->rate = 1 / times[i];
  }

  // Puts the jobs whose GPUs change on leaves: their old nodes go back,
  // then the new allocations of a node or more take nodes, largest first,
  // then the jobs smaller than a node take as many shared nodes as they fill.
  void PlaceOnLeaves(const std::vector<int64_t>& plan) {
    const int64_t node = options_.gpus_per_node;
    leaves_->Give(shared_slices_);
    std::vector<size_t> moving;
    int64_t shared_gpus = 0;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      Running& r = jobs_[i];
      if (plan[i] > 0 && plan[i] < node) shared_gpus += plan[i];
      if (plan[i] == r.gpus && !r.done) continue;
      leaves_->Give(r.slices);
      r.slices.clear();
      if (plan[i] >= node) moving.push_back(i);
    }
    std::stable_sort(moving.begin(), moving.end(),
                     [&](size_t a, size_t b) { return plan[a] > plan[b]; });
    for (size_t i : moving) jobs_[i].slices = leaves_->Take((plan[i] + node - 1) / node);
    shared_slices_ = leaves_->Take((shared_gpus + node - 1) / node);
  }

  // Whether growing `r` from its planned `planned` GPUs to `next` is worth
  // it: a running job's first step restarts it, so it must then finish
  // earlier than it would have.
  bool RepaysRestart(const Running& r, int64_t planned, int64_t next, double now) const {
    return r.gpus == 0 || planned != r.gpus ||
           now + options_.rescale_overhead_s + r.remaining / r.table->At(next) <
               FinishTime(r, r.gpus, now);
  }

  // How much a step from `from` to `to` GPUs speeds `r`'s completion per GPU:
  // the change of throughput over the work left, per GPU.
  static double PerGpu(const Running& r, int64_t from, int64_t to) {
    return (r.table->At(to) - r.table->At(from)) / r.remaining / static_cast<double>(to - from);
  }

  // GPUs held where they do little move to where they do much more: the
  // best next step of any job, when worth kRebalanceFactor times the last
  // steps of others (never below their shares) that make room for it. Both
  // restart, hence the factor. Else a job grown on idle GPUs at low
  // efficiency keeps them while later arrivals run on their shares. One
  // move per call: the rest of a step given back (128 -> 64 for a waiting
  // job's first GPU) goes out as spares before the next (Replan).
  bool RebalanceOnce(double now, std::vector<int64_t>& plan, NodeBudget& placed) const {
    constexpr double kRebalanceFactor = 2;
    auto active = [&](size_t i) { return jobs_[i].arrived && !jobs_[i].done; };
    size_t to = jobs_.size();
    double gain = 0;
    int64_t to_next = 0;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (!active(i)) continue;
      const Running& r = jobs_[i];
      const int64_t next = NextCount(r, plan[i]);
      if (next == 0) continue;
      if (!RepaysRestart(r, plan[i], next, now)) continue;
      if (const double g = PerGpu(r, plan[i], next); g > gain) {
        gain = g;
        to = i;
        to_next = next;
      }
    }
    if (to == jobs_.size()) return false;
    // Room, a step at a time from where a step is worth least, each worth
    // under 1 / kRebalanceFactor of the step it makes room for, restarting
    // running jobs for no longer in all than the step saves.
    const Running& receiver = jobs_[to];
    const double saved =
        (plan[to] == receiver.gpus ? std::max(now, receiver.paused_until)
                                   : now + options_.rescale_overhead_s) +
        (plan[to] > 0 ? receiver.remaining / receiver.table->At(plan[to]) : kInf) -
        (now + options_.rescale_overhead_s + receiver.remaining / receiver.table->At(to_next));
    double restarts = 0;
    std::vector<int64_t> trial_plan = plan;
    NodeBudget trial = placed;
    trial.Remove(plan[to]);
    trial.Add(to_next);
    trial_plan[to] = to_next;
    while (!trial.FitsWith(0, 0)) {
      size_t from = jobs_.size();
      double loss = kInf;
      int64_t from_prev = 0;
      for (size_t j = 0; j < jobs_.size(); ++j) {
        if (j == to || !active(j) || trial_plan[j] == 0) continue;
        const Running& r = jobs_[j];
        const int64_t prev =
            std::max(r.admitted ? Share(r, now) : 0, PreviousCount(*r.table, trial_plan[j]));
        if (prev >= trial_plan[j]) continue;
        if (const double l = PerGpu(r, prev, trial_plan[j]); l < loss) {
          loss = l;
          from = j;
          from_prev = prev;
        }
      }
      if (from == jobs_.size() || gain < kRebalanceFactor * loss) return false;
      if (trial_plan[from] == jobs_[from].gpus) restarts += options_.rescale_overhead_s;
      if (restarts > saved) return false;
      trial.Remove(trial_plan[from]);
      trial.Add(from_prev);
      trial_plan[from] = from_prev;
    }
    placed = trial;
    plan = std::move(trial_plan);
    return true;
  }

  // An admitted job's share: the fewest GPUs that still meet its deadline,
  // or, past saving, the fewest it can run on.
  int64_t Share(const Running& r, double now) const {
    const int64_t share = MinShare(r, now);
    return share > 0 ? share : SmallestCount(*r.table);
  }

  // The step up `r`'s whole curve from `current` GPUs (SteepestStep up to
  // the cluster's size; 0: none): past a flat stretch of the curve to the
  // steep one behind it (a pipeline depth that pays from 32 GPUs, say).
  // Whether it fits is the caller's question: a spare takes the steepest
  // step that fits (GiveSpares); a move makes room for this one.
  int64_t NextCount(const Running& r, int64_t current) const {
    const std::vector<int64_t>& gpus = r.table->gpus;
    if (current == 0) return (*r.steps)[0];
    const auto it = std::lower_bound(gpus.begin(), gpus.end(), current);
    if (it != gpus.end() && *it == current) return (*r.steps)[1 + (it - gpus.begin())];
    return SteepestStep(*r.table, current, options_.total_gpus);
  }

  ClusterOutcome Summarise(double start) {
    ClusterOutcome out;
    for (Running& r : jobs_) {
      r.outcome.id = r.job->id;
      out.jobs.push_back(r.outcome);
    }
    SummariseJobs(start, out);
    const double capacity = static_cast<double>(options_.total_gpus) * out.makespan_s;
    out.gpu_utilization = capacity > 0 ? gpu_seconds_ / capacity : 0;
    out.useful_utilization = capacity > 0 ? useful_gpu_seconds_ / capacity : 0;
    out.spine_shared_gpu_s = spine_shared_gpu_s_;
    out.allocated = std::move(allocated_);
    return out;
  }

  std::vector<Running> jobs_;
  const ClusterSimOptions options_;
  PromiseLimit promise_limit_;
  Displacement displacement_;
  std::optional<LeafMap> leaves_;              // with ClusterSimOptions::nodes_per_leaf
  std::vector<LeafMap::Slice> shared_slices_;  // nodes the sub-node jobs share
  double gpu_seconds_ = 0, useful_gpu_seconds_ = 0, spine_shared_gpu_s_ = 0;
  std::vector<std::pair<double, int64_t>> allocated_;
};

}  // namespace

absl::StatusOr<ClusterOutcome> SimulateCluster(const std::vector<ClusterJob>& jobs,
                                               const std::vector<PlacementTables>& tables,
                                               const ClusterSimOptions& options) {
  if (options.total_gpus <= 0 || !(options.rescale_overhead_s >= 0)) {
    return absl::InvalidArgumentError("total_gpus must be positive and rescale_overhead_s >= 0");
  }
  if (!(options.promise_limit >= 0)) {
    return absl::InvalidArgumentError("promise_limit must be >= 0 (0: no limit)");
  }
  if (!(options.displacement_limit >= 0)) {
    return absl::InvalidArgumentError("displacement_limit must be >= 0 (0: no limit)");
  }
  if (options.nodes_per_leaf < 0 || (options.nodes_per_leaf > 0 && options.gpus_per_node <= 0) ||
      !(options.contended_background >= 0)) {
    return absl::InvalidArgumentError(
        "nodes_per_leaf and contended_background must be >= 0, and leaves need gpus_per_node > 0 "
        "(whole nodes)");
  }
  std::vector<ThroughputTable> frontiers;
  std::vector<std::vector<int64_t>> steps;
  frontiers.reserve(tables.size());
  for (const PlacementTables& t : tables) {
    frontiers.push_back(Frontier(t.packed));
    steps.push_back(SteepestSteps(frontiers.back(), options.total_gpus));
  }
  const auto or_null = [](const std::optional<ThroughputTable>& t) { return t ? &*t : nullptr; };
  std::vector<Running> running;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const ClusterJob& j = jobs[i];
    if (j.table < 0 || j.table >= static_cast<int>(tables.size()) || !(j.iterations > 0) ||
        !(j.deadline_s >= j.submit_s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("jobs[", i, "] (", j.id,
                       "): needs an existing table, iterations > 0 and a deadline after its "
                       "submission"));
    }
    const PlacementTables& t = tables[static_cast<size_t>(j.table)];
    Running r;
    r.job = &j;
    r.table = &frontiers[static_cast<size_t>(j.table)];
    r.steps = &steps[static_cast<size_t>(j.table)];
    r.fragmented = or_null(t.spread);
    r.contended = or_null(t.packed_contended);
    r.fragmented_contended = or_null(t.spread_contended);
    r.remaining = j.iterations;
    running.push_back(std::move(r));
  }
  std::stable_sort(running.begin(), running.end(), [](const Running& a, const Running& b) {
    return a.job->submit_s < b.job->submit_s;
  });
  return Cluster(std::move(running), options).Run();
}

}  // namespace vtrain
