#include "service/cluster_sim.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/spec/fabric.h"
#include "core/util/status_macros.h"
#include "proto/job_convert.h"
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

// A finite time on the trace's clock, within about 300 years.
bool Time(double t) { return std::isfinite(t) && std::abs(t) < 1e10; }

void CheckJobs(const v1::ClusterSimRequest& r, std::vector<std::string>& problems) {
  if (r.jobs_size() < 1 || r.jobs_size() > kMaxClusterJobs) {
    problems.push_back(absl::StrCat("jobs has ", r.jobs_size(), " entries; give 1 to ",
                                    kMaxClusterJobs, " (--jobs)"));
  }
  for (int i = 0; i < r.jobs_size() && problems.size() < 20; ++i) {
    const v1::ClusterTraceJob& j = r.jobs(i);
    const std::string where = absl::StrCat("jobs[", i, "]");
    if (!Time(j.submit_s()) || !Time(j.deadline_s()) || !Time(j.duration_s())) {
      problems.push_back(absl::StrCat(where,
                                      ": submit_s, deadline_s and duration_s must be "
                                      "finite seconds"));
    } else if (!(j.duration_s() > 0) || j.deadline_s() < j.submit_s()) {
      problems.push_back(absl::StrCat(where,
                                      ": duration_s must be positive and deadline_s at or "
                                      "after submit_s"));
    }
    if (j.num_gpus() < 1 || j.num_gpus() > 1'000'000) {
      problems.push_back(
          absl::StrCat(where, ".num_gpus=", j.num_gpus(), " must be in [1, 1000000]"));
    }
  }
}

// One throughput table from a drawn curve: iterations per second by count.
ThroughputTable TableOf(const v1::Curve& curve) {
  ThroughputTable table;
  for (const v1::CurvePoint& p : curve.points()) {
    table.gpus.push_back(p.gpus());
    table.iterations_per_s.push_back(p.fits() ? p.iterations_per_s() : 0);
  }
  return table;
}

// The same curve's plans at another of its figures: spread over the
// cluster's leaves, or either placement with a leaf's uplinks full of other
// jobs' traffic (the packed throughput where the curve has no such figure).
ThroughputTable TableAt(const v1::Curve& curve, double (v1::CurvePoint::*time_ms)() const) {
  ThroughputTable table = TableOf(curve);
  for (int i = 0; i < curve.points_size(); ++i) {
    const v1::CurvePoint& p = curve.points(i);
    if (p.fits() && (p.*time_ms)() > 0) {
      table.iterations_per_s[static_cast<size_t>(i)] = 1000 / (p.*time_ms)();
    }
  }
  return table;
}

void OutcomeToProto(const std::string& policy, const ClusterOutcome& o,
                    const std::vector<std::string>& shapes, v1::ClusterPolicyOutcome* out) {
  out->set_policy(policy);
  out->set_deadline_satisfaction(o.deadline_satisfaction);
  out->set_avg_jct_s(o.avg_jct_s);
  out->set_p95_jct_s(o.p95_jct_s);
  out->set_makespan_s(o.makespan_s);
  out->set_gpu_utilization(o.gpu_utilization);
  out->set_useful_utilization(o.useful_utilization);
  out->set_reallocations(o.reallocations);
  out->set_fragmented_placements(o.fragmented_placements);
  out->set_spine_shared_gpu_s(o.spine_shared_gpu_s);
  for (size_t j = 0; j < o.jobs.size(); ++j) {
    const JobOutcome& in = o.jobs[j];
    v1::ClusterJobOutcome* job = out->add_jobs();
    job->set_id(in.id);
    job->set_shape(j < shapes.size() ? shapes[j] : "");
    job->set_admitted(in.admitted);
    job->set_finished(in.finished);
    job->set_met_deadline(in.met_deadline);
    job->set_jct_s(in.finished ? in.jct_s : -1.0);
    job->set_reallocations(in.reallocations);
  }
  for (const auto& [time_s, gpus] : o.allocated) {
    v1::ClusterAllocation* a = out->add_allocated();
    a->set_time_s(time_s);
    a->set_gpus(gpus);
  }
}

// Applies the request's target load and deadline slack to its jobs.
absl::Status ShapeRequest(PreparedClusterSim& prepared) {
  v1::ClusterSimRequest& r = prepared.request;
  std::vector<WindowJob> window;
  for (const v1::ClusterTraceJob& j : r.jobs()) {
    window.push_back({j.submit_s(), j.deadline_s(), j.duration_s(), j.num_gpus()});
  }
  prepared.trace_load = OfferedLoad(window, r.gpus());
  VTRAIN_RETURN_IF_ERROR(ShapeWindow(
      window, r.gpus(), r.has_target_load() ? std::optional<double>(r.target_load()) : std::nullopt,
      r.has_deadline_slack() ? std::optional<double>(r.deadline_slack()) : std::nullopt));
  prepared.offered_load = OfferedLoad(window, r.gpus());
  prepared.peak_requested_gpus = PeakRequestedGpus(window);
  for (int i = 0; i < r.jobs_size(); ++i) {
    r.mutable_jobs(i)->set_submit_s(window[static_cast<size_t>(i)].submit_s);
    r.mutable_jobs(i)->set_deadline_s(window[static_cast<size_t>(i)].deadline_s);
  }
  return absl::OkStatus();
}

}  // namespace

std::pair<std::string, int64_t> LlmShape(int64_t gpus) {
  const char* preset = gpus <= 1    ? "gpt3-350m"
                       : gpus <= 2  ? "gpt3-1.3b"
                       : gpus <= 4  ? "gpt3-2.7b"
                       : gpus <= 8  ? "gpt3-6.7b"
                       : gpus <= 32 ? "gpt3-13b"
                                    : "gpt3-175b";
  int64_t batch = 32;
  while (batch < 16 * gpus && batch < 1536) batch *= 2;
  return {preset, std::min<int64_t>(batch, 1536)};
}

absl::StatusOr<PreparedClusterSim> PrepareClusterSim(const v1::ClusterSimRequest& r,
                                                     const ProfileSource& source) {
  std::vector<std::string> problems;
  CheckJobs(r, problems);
  absl::StatusOr<ClusterSpec> cluster = proto::ClusterFromProto(r.cluster());
  if (!cluster.ok()) problems.emplace_back(cluster.status().message());
  const int64_t per_node = cluster.ok() ? cluster->gpus_per_node : 8;
  if (r.gpus() < per_node || r.gpus() > kMaxClusterGpus) {
    problems.push_back(absl::StrCat("gpus=", r.gpus(), " (--gpus) must be in [", per_node, ", ",
                                    kMaxClusterGpus, "]: at least one node of ", per_node,
                                    " GPUs (--gpus-per-node)"));
  }
  PreparedClusterSim prepared;
  for (int i = 0; i < r.policies_size(); ++i) {
    if (r.policies(i) != "elasticflow" && r.policies(i) != "vtrain") {
      problems.push_back(absl::StrCat("policies[", i, "]='", r.policies(i),
                                      "' is unknown; use elasticflow and/or vtrain (--policy)"));
    }
  }
  const double restart = r.has_rescale_overhead_s() ? r.rescale_overhead_s() : 30;
  if (!(restart >= 0 && restart <= 86400)) {
    problems.push_back("rescale_overhead_s (--rescale-overhead) must be in [0, 86400] seconds");
  }
  const double promise_limit = r.has_promise_limit() ? r.promise_limit() : 2;
  if (!(promise_limit >= 0 && promise_limit <= 1000)) {
    problems.push_back(absl::StrCat("promise_limit=", promise_limit,
                                    " (--promise-limit) must be in [0, 1000]; 0: no limit"));
  }
  const bool leaves = cluster.ok() && !cluster->fabric.flat();
  if (leaves && r.cluster().fabric().cluster_nodes() != 0 &&
      r.cluster().fabric().cluster_nodes() * per_node != r.gpus()) {
    problems.push_back(
        absl::StrCat("cluster.fabric.cluster_nodes=", r.cluster().fabric().cluster_nodes(),
                     " (--cluster-nodes, or a --topology-file's nodes): cluster-sim's cluster "
                     "is gpus=",
                     r.gpus(), " (--gpus) of ", per_node,
                     " per node; leave it unset or give --gpus the cluster's GPUs"));
  }
  if (r.cluster().fabric().nodes_size() > 0) {
    problems.push_back(
        "cluster.fabric.nodes (--nodes) places one job; cluster-sim places every job on the "
        "leaves itself: leave it unset");
  }
  if (leaves && r.cluster().fabric().placement() == v1::PLACEMENT_SPREAD) {
    problems.push_back(
        "cluster.fabric.placement (--placement) places one job; cluster-sim places every job on "
        "the leaves itself (packed as the free nodes allow): leave it unset");
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  prepared.request = r;
  VTRAIN_RETURN_IF_ERROR(ShapeRequest(prepared));
  prepared.policies.assign(r.policies().begin(), r.policies().end());
  if (prepared.policies.empty()) prepared.policies = {"elasticflow", "vtrain"};
  prepared.options =
      ClusterSimOptions{.total_gpus = r.gpus(),
                        .rescale_overhead_s = restart,
                        .gpus_per_node = per_node,
                        .nodes_per_leaf = leaves ? cluster->fabric.nodes_per_leaf : 0,
                        .contended_background = leaves ? ContendedBackground(cluster->fabric) : 0,
                        .promise_limit = promise_limit};
  // One table per distinct shape and policy.
  std::map<std::pair<std::string, int64_t>, int> index;
  for (const v1::ClusterTraceJob& j : r.jobs()) {
    const auto shape = LlmShape(j.num_gpus());
    auto [it, added] = index.emplace(shape, static_cast<int>(prepared.best.size()));
    prepared.shape_of.push_back(it->second);
    prepared.shape_names.push_back(absl::StrCat(shape.first, "/", shape.second));
    if (!added) continue;
    v1::ThroughputCurveRequest curve;
    v1::CurveJob* job = curve.add_jobs();
    job->mutable_model()->set_preset(shape.first);
    *job->mutable_cluster() = r.cluster();
    job->mutable_cluster()->clear_num_gpus();
    // A spread plan spreads over the whole cluster's leaves.
    if (leaves) job->mutable_cluster()->mutable_fabric()->set_cluster_nodes(r.gpus() / per_node);
    job->set_global_batch(shape.second);
    // The study replays the paper's (§VI): its jobs train as vtrain's
    // earlier releases assumed (fp16, full recomputation, no overlaps, flash
    // attention), so that its figures stay comparable.
    curve.mutable_space()->set_settings(v1::SETTINGS_MEGATRON_DEFAULTS);
    curve.mutable_space()->add_recomputes(v1::RECOMPUTE_FULL);
    job->set_dtype(v1::DTYPE_FP16);
    for (int64_t g : TableCounts(per_node, r.gpus())) curve.add_gpu_counts(g);
    for (v1::CurvePolicy policy : {v1::CURVE_POLICY_DATA_PARALLEL, v1::CURVE_POLICY_BEST}) {
      curve.set_policy(policy);
      VTRAIN_ASSIGN_OR_RETURN(PreparedCurves p, PrepareCurves(curve, source));
      (policy == v1::CURVE_POLICY_BEST ? prepared.best : prepared.data_parallel)
          .push_back(std::move(p));
    }
  }
  return prepared;
}

absl::StatusOr<v1::ClusterSimResponse> RunClusterSim(const PreparedClusterSim& prepared,
                                                     const CallOptions& options,
                                                     CurveStore* store) {
  v1::ClusterSimResponse response;
  SimulationCost cost;
  // Per policy, tables [0, S) packed, [S, 2S) spread, [2S, 3S) packed and
  // [3S, 4S) spread with a leaf's uplinks full of other jobs' traffic.
  constexpr double (v1::CurvePoint::*kFigures[])() const = {
      &v1::CurvePoint::fragmented_iteration_time_ms, &v1::CurvePoint::contended_iteration_time_ms,
      &v1::CurvePoint::fragmented_contended_iteration_time_ms};
  const int shapes = static_cast<int>(prepared.best.size());
  std::vector<ThroughputTable> dp_tables, best_tables;
  std::vector<std::vector<ThroughputTable>> dp_more(3), best_more(3);
  for (int s = 0; s < shapes; ++s) {
    for (bool best : {false, true}) {
      VTRAIN_ASSIGN_OR_RETURN(
          v1::ThroughputCurveResponse curves,
          RunCurves(best ? prepared.best[s] : prepared.data_parallel[s], options, store));
      (best ? best_tables : dp_tables).push_back(TableOf(curves.curves(0)));
      for (int k = 0; k < 3; ++k) {
        (best ? best_more : dp_more)[k].push_back(TableAt(curves.curves(0), kFigures[k]));
      }
      cost.Add(proto::SimulationFromProto(curves.curves(0).simulation()));
      cost.wall_ns += curves.curves(0).simulation().wall_ns();
    }
  }
  const v1::ClusterSimRequest& r = prepared.request;
  std::vector<ClusterJob> jobs;
  for (int i = 0; i < r.jobs_size(); ++i) {
    const v1::ClusterTraceJob& t = r.jobs(i);
    const int s = prepared.shape_of[static_cast<size_t>(i)];
    // Iterations: what the elasticflow plan at the job's own GPU count runs
    // in its recorded duration (the best plan when scaling by d has none).
    double rate = dp_tables[s].At(t.num_gpus());
    if (rate <= 0) rate = best_tables[s].At(t.num_gpus());
    if (rate <= 0) rate = best_tables[s].At(r.gpus());
    // A job's nodes on more leaves than it needs run at the spread
    // throughput; on oversubscribed leaves, jobs crossing the same uplinks
    // share them.
    const bool leaves = prepared.options.nodes_per_leaf > 0;
    const bool shared = prepared.options.contended_background > 0;
    ClusterJob job{t.id(), t.submit_s(), std::max(1.0, std::round(t.duration_s() * rate)),
                   t.deadline_s(), s};
    job.fragmented_table = leaves ? shapes + s : -1;
    job.contended_table = shared ? 2 * shapes + s : -1;
    job.fragmented_contended_table = shared ? 3 * shapes + s : -1;
    jobs.push_back(std::move(job));
  }
  for (int k = 0; k < 3; ++k) {
    dp_tables.insert(dp_tables.end(), dp_more[k].begin(), dp_more[k].end());
    best_tables.insert(best_tables.end(), best_more[k].begin(), best_more[k].end());
  }
  for (const std::string& policy : prepared.policies) {
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError("cluster simulation cancelled by the caller");
    }
    VTRAIN_ASSIGN_OR_RETURN(
        ClusterOutcome outcome,
        SimulateCluster(jobs, policy == "vtrain" ? best_tables : dp_tables, prepared.options));
    OutcomeToProto(policy, outcome, prepared.shape_names, response.add_outcomes());
  }
  proto::SimulationToProto(cost, response.mutable_simulation());
  response.set_trace_load(prepared.trace_load);
  response.set_offered_load(prepared.offered_load);
  response.set_peak_requested_gpus(prepared.peak_requested_gpus);
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
