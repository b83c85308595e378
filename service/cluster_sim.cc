#include "service/cluster_sim.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/cluster/scheduler.h"
#include "core/util/parallel.h"
#include "core/util/status_macros.h"
#include "proto/prediction_convert.h"

namespace vtrain::service {
namespace {

// The counts a table covers: 1, 2, 4, then every multiple of a node up to
// 128 nodes (data-parallel footprints such as t8 x p6 = 48 need them), then
// 64 counts per doubling (every 2 nodes to 256, every 4 to 512, ...), so
// that a 10,000-GPU cluster's tables stay under the curve's 1,024 counts.
std::vector<int64_t> TableCounts(int64_t gpus_per_node, int64_t max) {
  std::vector<int64_t> counts;
  for (int64_t g = 1; g < gpus_per_node && g <= max; g *= 2) counts.push_back(g);
  int64_t step = gpus_per_node;
  for (int64_t g = gpus_per_node; g <= max; g += step) {
    counts.push_back(g);
    if (g >= 128 * step) step *= 2;
  }
  return counts;
}

// The curve request of one job shape on a cluster of `gpus`.
v1::ThroughputCurveRequest CurveRequest(const LlmJob& llm, const v1::ClusterSpec& cluster,
                                        int64_t gpus, const proto::ClusterSimCall& call) {
  v1::ThroughputCurveRequest curve;
  v1::CurveJob* job = curve.add_jobs();
  job->mutable_model()->set_preset(llm.preset);
  *job->mutable_cluster() = cluster;
  job->mutable_cluster()->clear_num_gpus();
  if (!llm.gpu.empty()) job->mutable_cluster()->set_gpu(llm.gpu);
  // A spread plan spreads over the whole cluster's leaves.
  if (call.leaves) {
    job->mutable_cluster()->mutable_fabric()->set_cluster_nodes(gpus / call.options.gpus_per_node);
  }
  job->set_global_batch(llm.global_batch);
  if (llm.paper_settings) {
    // The paper's jobs (§VI) train as vtrain's earlier releases assumed
    // (fp16, full recomputation, no overlaps, flash attention), so that its
    // figures stay comparable; the 2026 mix takes today's defaults.
    curve.mutable_space()->set_settings(v1::SETTINGS_MEGATRON_DEFAULTS);
    curve.mutable_space()->add_recomputes(v1::RECOMPUTE_FULL);
    job->set_dtype(v1::DTYPE_FP16);
  }
  for (int64_t g : TableCounts(call.options.gpus_per_node, gpus)) curve.add_gpu_counts(g);
  return curve;
}

// One throughput table from a drawn curve at one of its figures (the packed
// iteration time when `time_ms` is null or the point has no such figure).
ThroughputTable TableAt(const v1::Curve& curve, double (v1::CurvePoint::*time_ms)() const) {
  ThroughputTable table;
  for (const v1::CurvePoint& p : curve.points()) {
    table.gpus.push_back(p.gpus());
    double rate = p.fits() ? p.iterations_per_s() : 0;
    if (p.fits() && time_ms != nullptr && (p.*time_ms)() > 0) rate = 1000 / (p.*time_ms)();
    table.iterations_per_s.push_back(rate);
  }
  return table;
}

// A shape's tables where the scheduler may place it: spread on a leaf/spine
// fabric, contended where the uplinks are oversubscribed.
PlacementTables TablesOf(const v1::Curve& curve, const ClusterSimOptions& options) {
  PlacementTables t(TableAt(curve, nullptr));
  if (options.nodes_per_leaf > 0) {
    t.spread = TableAt(curve, &v1::CurvePoint::fragmented_iteration_time_ms);
  }
  if (options.contended_background > 0) {
    t.packed_contended = TableAt(curve, &v1::CurvePoint::contended_iteration_time_ms);
    t.spread_contended = TableAt(curve, &v1::CurvePoint::fragmented_contended_iteration_time_ms);
  }
  return t;
}

// The sensitivity check's tables: every throughput of `tables` x `factor`.
std::vector<PlacementTables> Faster(std::vector<PlacementTables> tables, double factor) {
  const auto scale = [&](ThroughputTable& t) {
    for (double& x : t.iterations_per_s) x *= factor;
  };
  for (PlacementTables& t : tables) {
    scale(t.packed);
    for (std::optional<ThroughputTable>* o :
         {&t.spread, &t.packed_contended, &t.spread_contended}) {
      if (*o) scale(**o);
    }
  }
  return tables;
}

// The windows of the call, built.
absl::StatusOr<std::vector<StudyWindow>> Windows(const proto::ClusterSimCall& call) {
  std::vector<StudyWindow> windows;
  int64_t jobs = 0;
  for (const StudyCell& cell : call.cells) {
    absl::StatusOr<StudyWindow> w = call.is_study
                                        ? BuildWindow(call.study, cell)
                                        : WindowOfJobs(call.jobs, cell, call.study.deadline_slack);
    if (!w.ok()) {
      return absl::Status(w.status().code(),
                          absl::StrCat(w.status().message(), " (--target-load, --deadline-slack)"));
    }
    jobs += static_cast<int64_t>(w->jobs.size()) * static_cast<int64_t>(call.policies.size());
    if (jobs > kMaxStudyJobs) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the study replays more than ", kMaxStudyJobs,
          " jobs over its windows and policies; give fewer windows, seeds, loads or sizes"));
    }
    windows.push_back(*std::move(w));
  }
  return windows;
}

// The scheduler's jobs of one window: each runs as many iterations as the
// data-parallel plan at the GPUs it asks for runs in its traced duration
// (the best plan where data parallelism has none there), so both policies
// face the same work.
std::vector<ClusterJob> JobsOf(const StudyWindow& w, const std::vector<int>& shape_of,
                               const std::vector<PlacementTables>& dp,
                               const std::vector<PlacementTables>& best) {
  std::vector<ClusterJob> jobs;
  jobs.reserve(w.jobs.size());
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    const StudyJob& t = w.jobs[i];
    const size_t s = static_cast<size_t>(shape_of[i]);
    double rate = dp[s].packed.At(t.llm.gpus);
    if (rate <= 0) rate = best[s].packed.At(t.llm.gpus);
    if (rate <= 0) rate = best[s].packed.At(w.cell.gpus);
    jobs.push_back({t.id, t.submit_s, std::max(1.0, std::round(t.duration_s * rate)), t.deadline_s,
                    shape_of[i]});
  }
  return jobs;
}

// One window under every policy; `comparison` set when both ran. The jobs'
// work comes from `dp` and `best`; the best-plan policy runs on `planned`
// (`best`, or the sensitivity check's faster `dp`).
absl::Status RunWindow(const PreparedClusterSim& p, size_t k,
                       const std::vector<PlacementTables>& dp,
                       const std::vector<PlacementTables>& best,
                       const std::vector<PlacementTables>& planned, v1::ClusterWindowOutcome* out,
                       std::optional<WindowComparison>* comparison) {
  const StudyWindow& w = p.windows[k];
  proto::WindowToProto(w, out);
  const std::vector<ClusterJob> jobs = JobsOf(w, p.shape_of[k], dp, best);
  std::vector<std::string> names;
  if (p.call.keep_jobs) {
    for (int s : p.shape_of[k]) names.push_back(p.shapes[static_cast<size_t>(s)].name);
  }
  ClusterSimOptions options = p.call.options;
  options.total_gpus = w.cell.gpus;
  std::optional<ClusterOutcome> e, v;
  for (ClusterPolicy policy : p.call.policies) {
    VTRAIN_ASSIGN_OR_RETURN(
        ClusterOutcome outcome,
        SimulateCluster(jobs, policy == ClusterPolicy::kBestPlan ? planned : dp, options));
    proto::PolicyOutcomeToProto(policy, outcome, names, p.call.keep_jobs, out->add_outcomes());
    (policy == ClusterPolicy::kBestPlan ? v : e) = std::move(outcome);
  }
  if (e && v) {
    *comparison = Compare(*e, *v);
    out->set_deadline_ratio((*comparison)->deadline_ratio);
    out->set_avg_jct_change((*comparison)->avg_jct_change);
  }
  return absl::OkStatus();
}

// The summaries: one per (mix, GPUs, load, window kind), over its seeds.
void Summarise(const PreparedClusterSim& p,
               const std::vector<std::optional<WindowComparison>>& comparisons,
               v1::ClusterSimResponse* out) {
  using Key = std::tuple<int, int64_t, double, int64_t, double>;
  std::map<Key, size_t> index;
  std::vector<StudyCell> groups;
  std::vector<std::vector<WindowComparison>> members;
  for (size_t k = 0; k < comparisons.size(); ++k) {
    if (!comparisons[k]) continue;
    const StudyCell& c = p.windows[k].cell;
    const Key key{static_cast<int>(c.mix), c.gpus, c.target_load.value_or(-1), c.window.jobs,
                  c.window.hours};
    auto [it, added] = index.emplace(key, groups.size());
    if (added) {
      groups.push_back(c);
      members.emplace_back();
    }
    members[it->second].push_back(*comparisons[k]);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    proto::SummaryToProto(groups[g], Summarise(members[g]), out->add_summaries());
  }
}

}  // namespace

absl::StatusOr<PreparedClusterSim> PrepareClusterSim(const v1::ClusterSimRequest& r,
                                                     const ProfileSource& source) {
  PreparedClusterSim p;
  VTRAIN_ASSIGN_OR_RETURN(p.call, proto::ClusterSimFromProto(r));
  VTRAIN_ASSIGN_OR_RETURN(p.windows, Windows(p.call));
  // One pair of tables per distinct shape and cluster size.
  std::map<std::tuple<std::string, int64_t, std::string, bool, int64_t>, int> index;
  for (const StudyWindow& w : p.windows) {
    std::vector<int>& of = p.shape_of.emplace_back();
    for (const StudyJob& j : w.jobs) {
      const LlmJob& l = j.llm;
      auto [it, added] = index.emplace(
          std::make_tuple(l.preset, l.global_batch, l.gpu, l.paper_settings, w.cell.gpus),
          static_cast<int>(p.shapes.size()));
      of.push_back(it->second);
      if (!added) continue;
      v1::ThroughputCurveRequest curve = CurveRequest(l, r.cluster(), w.cell.gpus, p.call);
      ClusterShape shape;
      shape.name = absl::StrCat(l.preset, "/", l.global_batch);
      curve.set_policy(v1::CURVE_POLICY_DATA_PARALLEL);
      VTRAIN_ASSIGN_OR_RETURN(shape.data_parallel, PrepareCurves(curve, source));
      curve.set_policy(v1::CURVE_POLICY_BEST);
      VTRAIN_ASSIGN_OR_RETURN(shape.best, PrepareCurves(curve, source));
      p.shapes.push_back(std::move(shape));
    }
  }
  return p;
}

absl::StatusOr<v1::ClusterSimResponse> RunClusterSim(const PreparedClusterSim& p,
                                                     const CallOptions& options,
                                                     CurveStore* store) {
  v1::ClusterSimResponse response;
  SimulationCost cost;
  std::vector<PlacementTables> dp, best;
  for (const ClusterShape& shape : p.shapes) {
    for (bool is_best : {false, true}) {
      VTRAIN_ASSIGN_OR_RETURN(
          v1::ThroughputCurveResponse curves,
          RunCurves(is_best ? shape.best : shape.data_parallel, options, store));
      (is_best ? best : dp).push_back(TablesOf(curves.curves(0), p.call.options));
      cost.Add(proto::SimulationFromProto(curves.curves(0).simulation()));
      cost.wall_ns += curves.curves(0).simulation().wall_ns();
    }
  }
  const std::vector<PlacementTables> faster =
      p.call.sensitivity > 0 ? Faster(dp, 1 + p.call.sensitivity) : std::vector<PlacementTables>{};
  const std::vector<PlacementTables>& planned = faster.empty() ? best : faster;
  std::vector<v1::ClusterWindowOutcome> outs(p.windows.size());
  std::vector<std::optional<WindowComparison>> comparisons(p.windows.size());
  std::vector<absl::Status> status(p.windows.size());
  ParallelFor(static_cast<int64_t>(p.windows.size()), options.threads, [&](int64_t i) {
    const size_t k = static_cast<size_t>(i);
    if (options.cancelled && options.cancelled()) {
      status[k] = absl::CancelledError("cluster simulation cancelled by the caller");
      return false;
    }
    status[k] = RunWindow(p, k, dp, best, planned, &outs[k], &comparisons[k]);
    return status[k].ok();
  });
  for (const absl::Status& s : status) VTRAIN_RETURN_IF_ERROR(s);
  if (p.call.is_study) {
    for (v1::ClusterWindowOutcome& w : outs) *response.add_windows() = std::move(w);
    Summarise(p, comparisons, &response);
  } else {
    // A window of the request's own jobs: its outcomes at the top level.
    v1::ClusterWindowOutcome& w = outs[0];
    *response.mutable_outcomes() = std::move(*w.mutable_outcomes());
    response.set_trace_load(w.trace_load());
    response.set_offered_load(w.offered_load());
    response.set_running_load(w.running_load());
    response.set_peak_requested_gpus(w.peak_requested_gpus());
  }
  proto::SimulationToProto(cost, response.mutable_simulation());
  if (options.simulated) options.simulated("ClusterSim", cost.wall_ns);
  return response;
}

absl::StatusOr<v1::ClusterSimResponse> ClusterSim(const v1::ClusterSimRequest& request,
                                                  const ProfileSource& source,
                                                  const CallOptions& options) {
  VTRAIN_ASSIGN_OR_RETURN(PreparedClusterSim prepared, PrepareClusterSim(request, source));
  return RunClusterSim(prepared, options);
}

}  // namespace vtrain::service
