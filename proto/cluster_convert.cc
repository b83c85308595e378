#include "proto/cluster_convert.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/spec/fabric.h"
#include "proto/enum_convert.h"
#include "proto/job_convert.h"

namespace vtrain::proto {
namespace {

// A finite time on the trace's clock, within about 300 years.
bool Time(double t) { return std::isfinite(t) && std::abs(t) < 1e10; }

// Trace jobs (`field`: "jobs" or "study.trace") as rows; problems named by
// row (the first 20).
std::vector<TraceRow> Rows(const google::protobuf::RepeatedPtrField<v1::ClusterTraceJob>& in,
                           const std::string& field, const std::string& flag,
                           std::vector<std::string>& problems) {
  if (in.size() < 1 || in.size() > kMaxClusterJobs) {
    problems.push_back(absl::StrCat(field, " has ", in.size(), " entries; give 1 to ",
                                    kMaxClusterJobs, " (", flag, ")"));
  }
  std::vector<TraceRow> rows;
  for (int i = 0; i < in.size(); ++i) {
    const v1::ClusterTraceJob& j = in.Get(i);
    const std::string where = absl::StrCat(field, "[", i, "]");
    if (problems.size() >= 20) break;
    if (!Time(j.submit_s()) || !Time(j.deadline_s()) || !Time(j.duration_s())) {
      problems.push_back(
          absl::StrCat(where, ": submit_s, deadline_s and duration_s must be finite seconds"));
    } else if (!(j.duration_s() > 0) || j.deadline_s() < j.submit_s()) {
      problems.push_back(
          absl::StrCat(where, ": duration_s must be positive and deadline_s at or after submit_s"));
    }
    if (j.num_gpus() < 1 || j.num_gpus() > 1'000'000) {
      problems.push_back(
          absl::StrCat(where, ".num_gpus=", j.num_gpus(), " must be in [1, 1000000]"));
    }
    rows.push_back({j.id(), j.submit_s(), j.deadline_s(), j.duration_s(), j.num_gpus()});
  }
  return rows;
}

void CheckGpus(int64_t gpus, int64_t per_node, const std::string& field,
               std::vector<std::string>& problems) {
  if (gpus < per_node || gpus > kMaxClusterGpus) {
    problems.push_back(absl::StrCat(field, "=", gpus, " (--gpus) must be in [", per_node, ", ",
                                    kMaxClusterGpus, "]: at least one node of ", per_node,
                                    " GPUs (--gpus-per-node)"));
  }
}

void CheckFabric(const v1::ClusterSimRequest& r, const ClusterSpec& cluster, bool leaves,
                 std::vector<std::string>& problems) {
  const int64_t per_node = cluster.gpus_per_node;
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
}

void CheckOptions(const v1::ClusterSimRequest& r, ClusterSimCall& call,
                  std::vector<std::string>& problems) {
  for (int i = 0; i < r.policies_size(); ++i) {
    absl::StatusOr<ClusterPolicy> p =
        ParseClusterPolicy(r.policies(i), absl::StrCat("policies[", i, "]"));
    if (p.ok()) {
      call.policies.push_back(*p);
    } else {
      problems.push_back(absl::StrCat(p.status().message(), " (--policy)"));
    }
  }
  if (r.policies_size() == 0)
    call.policies = {ClusterPolicy::kDataParallel, ClusterPolicy::kBestPlan};
  call.options.rescale_overhead_s = r.has_rescale_overhead_s() ? r.rescale_overhead_s() : 30;
  if (!(call.options.rescale_overhead_s >= 0 && call.options.rescale_overhead_s <= 86400)) {
    problems.push_back("rescale_overhead_s (--rescale-overhead) must be in [0, 86400] seconds");
  }
  call.options.displacement_limit = r.has_displacement_limit() ? r.displacement_limit() : 1;
  if (!(call.options.displacement_limit >= 0 && call.options.displacement_limit <= 1000)) {
    problems.push_back(absl::StrCat("displacement_limit=", call.options.displacement_limit,
                                    " (--displacement-limit) must be in [0, 1000]; 0: no limit"));
  }
  call.options.promise_limit = r.has_promise_limit() ? r.promise_limit() : 2;
  if (!(call.options.promise_limit >= 0 && call.options.promise_limit <= 1000)) {
    problems.push_back(absl::StrCat("promise_limit=", call.options.promise_limit,
                                    " (--promise-limit) must be in [0, 1000]; 0: no limit"));
  }
  call.sensitivity = r.sensitivity();
  if (!(call.sensitivity >= 0 && call.sensitivity <= 0.5)) {
    problems.push_back(absl::StrCat("sensitivity=", r.sensitivity(),
                                    " (--sensitivity) must be in [0, 0.5]; e.g. 0.001 for 0.1%"));
  }
  if (r.has_target_load() && !(r.target_load() > 0 && r.target_load() <= 100)) {
    problems.push_back(
        absl::StrCat("target_load=", r.target_load(), " (--target-load) must be in (0, 100]"));
  }
  if (r.has_deadline_slack()) {
    if (r.deadline_slack() > 0 && r.deadline_slack() <= 1000) {
      call.study.deadline_slack = r.deadline_slack();
    } else {
      problems.push_back(absl::StrCat("deadline_slack=", r.deadline_slack(),
                                      " (--deadline-slack) must be in (0, 1000]"));
    }
  }
}

void CheckStudy(const v1::ClusterSimRequest& r, int64_t per_node, ClusterSimCall& call,
                std::vector<std::string>& problems) {
  const v1::ClusterStudy& s = r.study();
  StudySpec& spec = call.study;
  spec.trace = Rows(s.trace(), "study.trace", "--trace", problems);
  std::stable_sort(spec.trace.begin(), spec.trace.end(),
                   [](const TraceRow& a, const TraceRow& b) { return a.submit_s < b.submit_s; });
  if (s.windows_size() < 1) {
    problems.push_back(
        "study.windows is empty; give at least one window (--jobs, --hours or --windows)");
  }
  for (int i = 0; i < s.windows_size(); ++i) {
    const v1::ClusterWindow& w = s.windows(i);
    const std::string where = absl::StrCat("study.windows[", i, "]");
    if ((w.jobs() > 0) == (w.hours() > 0) || w.jobs() < 0 || w.jobs() > kMaxClusterJobs ||
        !(w.hours() >= 0 && w.hours() <= 100'000)) {
      problems.push_back(absl::StrCat(where, ": give jobs in [1, ", kMaxClusterJobs,
                                      "] or hours in (0, 100000], one of them (--windows)"));
    }
    if (w.has_start_s() && !Time(w.start_s())) {
      problems.push_back(absl::StrCat(where, ".start_s must be finite seconds (--window-start)"));
    }
    WindowSpec spec_w{w.jobs(), w.hours(), std::nullopt, {w.seeds().begin(), w.seeds().end()}};
    if (w.has_start_s()) spec_w.start_s = w.start_s();
    spec.windows.push_back(std::move(spec_w));
  }
  for (int64_t seed : s.seeds()) {
    if (seed < 0) problems.push_back(absl::StrCat("study.seeds has ", seed, "; seeds are >= 0"));
  }
  spec.seeds.assign(s.seeds().begin(), s.seeds().end());
  for (int i = 0; i < s.target_loads_size(); ++i) {
    const double l = s.target_loads(i);
    if (!(l > 0 && l <= 100)) {
      problems.push_back(
          absl::StrCat("study.target_loads[", i, "]=", l, " (--target-load) must be in (0, 100]"));
    }
    spec.target_loads.emplace_back(l);
  }
  if (spec.target_loads.empty() && r.has_target_load()) spec.target_loads = {r.target_load()};
  for (int i = 0; i < s.job_mixes_size(); ++i) {
    absl::StatusOr<JobMix> mix =
        FromProtoOr(s.job_mixes(i), JobMix::kItp, absl::StrCat("study.job_mixes[", i, "]"));
    if (mix.ok()) {
      spec.mixes.push_back(*mix);
    } else {
      problems.emplace_back(mix.status().message());
    }
  }
  for (int i = 0; i < s.gpus_size(); ++i) {
    CheckGpus(s.gpus(i), per_node, absl::StrCat("study.gpus[", i, "]"), problems);
    spec.cluster_gpus.push_back(s.gpus(i));
  }
  if (!r.jobs().empty()) {
    problems.push_back(
        "jobs and study are both given; give the trace as study.trace and leave jobs empty");
  }
  call.keep_jobs = s.keep_jobs();
}

}  // namespace

absl::StatusOr<ClusterSimCall> ClusterSimFromProto(const v1::ClusterSimRequest& r) {
  std::vector<std::string> problems;
  ClusterSimCall call;
  absl::StatusOr<ClusterSpec> cluster = ClusterFromProto(r.cluster());
  if (!cluster.ok()) problems.emplace_back(cluster.status().message());
  const int64_t per_node = cluster.ok() ? cluster->gpus_per_node : 8;
  if (cluster.ok()) call.cluster = *cluster;
  call.leaves = cluster.ok() && !cluster->fabric.flat();
  absl::StatusOr<JobMix> mix = FromProtoOr(r.job_mix(), JobMix::kItp, "job_mix");
  if (!mix.ok()) problems.emplace_back(mix.status().message());
  call.is_study = r.has_study();
  const bool many_sizes = call.is_study && r.study().gpus_size() > 0;
  if (!many_sizes) CheckGpus(r.gpus(), per_node, "gpus", problems);
  CheckOptions(r, call, problems);
  if (call.is_study) {
    CheckStudy(r, per_node, call, problems);
    if (call.study.cluster_gpus.empty()) call.study.cluster_gpus = {r.gpus()};
    if (call.study.mixes.empty() && mix.ok()) call.study.mixes = {*mix};
  } else {
    call.jobs = Rows(r.jobs(), "jobs", "--jobs", problems);
  }
  if (cluster.ok()) CheckFabric(r, *cluster, call.leaves, problems);
  if (call.leaves && many_sizes && r.cluster().fabric().cluster_nodes() != 0) {
    problems.push_back(
        "cluster.fabric.cluster_nodes (--cluster-nodes) names one size; a study over several "
        "study.gpus sizes takes each size's nodes: leave it unset");
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  if (call.is_study) {
    call.cells = StudyCells(call.study);
    if (static_cast<int64_t>(call.cells.size()) > kMaxStudyWindows) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the study has ", call.cells.size(),
                       " windows (job mixes x sizes x loads x windows x "
                       "seeds); at most ",
                       kMaxStudyWindows, " in one request: split it"));
    }
  } else {
    StudyCell cell;
    cell.mix = mix.ok() ? *mix : JobMix::kItp;
    cell.gpus = r.gpus();
    if (r.has_target_load()) cell.target_load = r.target_load();
    cell.window.jobs = static_cast<int64_t>(call.jobs.size());
    cell.seed = 0;
    call.cells = {cell};
  }
  call.options.gpus_per_node = per_node;
  call.options.nodes_per_leaf = call.leaves ? call.cluster.fabric.nodes_per_leaf : 0;
  call.options.contended_background = call.leaves ? ContendedBackground(call.cluster.fabric) : 0;
  return call;
}

void PolicyOutcomeToProto(ClusterPolicy policy, const ClusterOutcome& o,
                          const std::vector<std::string>& shapes, bool keep_jobs,
                          v1::ClusterPolicyOutcome* out) {
  out->set_policy(std::string(ClusterPolicyName(policy)));
  out->set_deadline_satisfaction(o.deadline_satisfaction);
  out->set_avg_jct_s(o.avg_jct_s);
  out->set_p95_jct_s(o.p95_jct_s);
  out->set_makespan_s(o.makespan_s);
  out->set_gpu_utilization(o.gpu_utilization);
  out->set_useful_utilization(o.useful_utilization);
  out->set_reallocations(o.reallocations);
  out->set_fragmented_placements(o.fragmented_placements);
  out->set_spine_shared_gpu_s(o.spine_shared_gpu_s);
  if (!keep_jobs) return;
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

namespace {
void WindowSpecToProto(const StudyCell& c, v1::ClusterWindow* out) {
  out->set_jobs(c.window.hours > 0 ? 0 : c.window.jobs);
  out->set_hours(c.window.hours);
}
}  // namespace

void WindowToProto(const StudyWindow& w, v1::ClusterWindowOutcome* out) {
  out->set_job_mix(ToProto(w.cell.mix));
  out->set_gpus(w.cell.gpus);
  if (w.cell.target_load) out->set_target_load(*w.cell.target_load);
  WindowSpecToProto(w.cell, out->mutable_window());
  if (w.cell.window.start_s) out->mutable_window()->set_start_s(*w.cell.window.start_s);
  out->set_seed(w.cell.seed);
  out->set_first_row(w.first_row + 1);
  out->set_jobs(static_cast<int64_t>(w.jobs.size()));
  out->set_trace_load(w.trace_load);
  out->set_offered_load(w.offered_load);
  out->set_running_load(w.running_load);
  out->set_peak_requested_gpus(w.peak_requested_gpus);
}

void SummaryToProto(const StudyCell& group, const StudySummary& s, v1::ClusterStudySummary* out) {
  out->set_job_mix(ToProto(group.mix));
  out->set_gpus(group.gpus);
  if (group.target_load) out->set_target_load(*group.target_load);
  WindowSpecToProto(group, out->mutable_window());
  out->set_windows(s.windows);
  out->set_mean_avg_jct_change(s.mean_avg_jct_change);
  out->set_worst_avg_jct_change(s.worst_avg_jct_change);
  out->set_mean_deadline_ratio(s.mean_deadline_ratio);
  out->set_worst_deadline_ratio(s.worst_deadline_ratio);
  out->set_mean_data_parallel_deadline_satisfaction(s.mean_data_parallel_deadline_satisfaction);
}

}  // namespace vtrain::proto
