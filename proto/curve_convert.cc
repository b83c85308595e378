#include "proto/curve_convert.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/enum_convert.h"
#include "proto/job_convert.h"
#include "proto/prediction_convert.h"
#include "proto/search_convert.h"

namespace vtrain::proto {
namespace {

// The counts of a request: its list, or every multiple of step up to max.
std::vector<int64_t> Counts(const v1::ThroughputCurveRequest& r, int64_t gpus_per_node,
                            std::vector<std::string>& problems) {
  std::vector<int64_t> counts(r.gpu_counts().begin(), r.gpu_counts().end());
  if (counts.empty()) {
    const int64_t step = r.step() > 0 ? r.step() : gpus_per_node;
    if (r.max_gpus() <= 0 || r.step() < 0) {
      problems.push_back(
          "give gpu_counts (--gpu-counts), or max_gpus (--max-gpus) with an "
          "optional step (--step)");
      return {};
    }
    if (r.max_gpus() / step > kMaxCurvePoints) {
      problems.push_back(absl::StrCat("max_gpus / step = ", r.max_gpus() / step,
                                      " points; a curve has at most ", kMaxCurvePoints));
      return {};
    }
    for (int64_t g = step; g <= r.max_gpus(); g += step) counts.push_back(g);
  }
  if (counts.size() > static_cast<size_t>(kMaxCurvePoints)) {
    problems.push_back(
        absl::StrCat("gpu_counts has ", counts.size(), " values; at most ", kMaxCurvePoints));
    return {};
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  if (!counts.empty() && (counts.front() < 1 || counts.back() > (int64_t{1} << 24))) {
    problems.push_back("gpu_counts values must be in [1, 16777216]");
  }
  return counts;
}

// The fields shared by every job of the request: the plan space, the policy.
void CommonSpec(const v1::ThroughputCurveRequest& r, CurveSpec& spec,
                std::vector<std::string>& problems) {
  PlanSpaceFromProto(r.space(), spec, problems);
  auto policy = FromProtoOr(r.policy(), CurvePolicy::kBest, "policy");
  if (policy.ok()) {
    spec.policy = *policy;
  } else {
    problems.emplace_back(policy.status().message());
  }
  spec.monotone = r.monotone();
}

}  // namespace

absl::StatusOr<CurveCall> CurveCallFromProto(const v1::ThroughputCurveRequest& r, GpuLookup gpus) {
  std::vector<std::string> problems;
  if (r.jobs_size() == 0 || r.jobs_size() > kMaxCurveJobs) {
    problems.push_back(
        absl::StrCat("jobs has ", r.jobs_size(), " entries; give 1 to ", kMaxCurveJobs));
  }
  CurveSpec common;
  CommonSpec(r, common, problems);
  CurveCall call;
  for (int i = 0; i < r.jobs_size() && i < kMaxCurveJobs; ++i) {
    const v1::CurveJob& j = r.jobs(i);
    const std::string where = absl::StrCat("jobs[", i, "].");
    CurveSpec spec = common;
    absl::StatusOr<ModelSpec> model = ModelFromProto(j.model());
    absl::StatusOr<ClusterSpec> cluster = ClusterFromProto(j.cluster(), gpus);
    absl::StatusOr<DType> dtype = FromProtoOr(j.dtype(), DType::kFp16, where + "dtype");
    for (const absl::Status& s : {model.status(), cluster.status(), dtype.status()}) {
      if (!s.ok()) problems.push_back(absl::StrCat(where, s.message()));
    }
    if (j.global_batch() <= 0) problems.push_back(where + "global_batch must be positive");
    if (!model.ok() || !cluster.ok() || !dtype.ok()) continue;
    spec.model = *model;
    spec.cluster = *cluster;
    spec.dtype = *dtype;
    FillSpaceSettings(GivenSpaceOf(r.space(), j.dtype(), j.model()), spec.cluster.gpu, spec.model,
                      spec, spec.dtype);
    spec.global_batch = j.global_batch();
    spec.gpu_counts = Counts(r, spec.cluster.gpus_per_node, problems);
    call.names.push_back(j.name().empty() ? spec.model.name : j.name());
    call.specs.push_back(std::move(spec));
  }
  if (!problems.empty()) {
    std::sort(problems.begin(), problems.end());
    problems.erase(std::unique(problems.begin(), problems.end()), problems.end());
    return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  }
  return call;
}

void CurveToProto(const std::string& name, const std::vector<CurvePoint>& points, v1::Curve* out) {
  out->set_name(name);
  // The curve's points are computed in parallel: its wall time is theirs
  // summed (the time the workers spent on it).
  SimulationCost total;
  for (const CurvePoint& p : points) {
    total.Add(p.simulation);
    total.wall_ns += p.simulation.wall_ns;
  }
  SimulationToProto(total, out->mutable_simulation());
  for (const CurvePoint& p : points) {
    v1::CurvePoint* q = out->add_points();
    q->set_gpus(p.gpus);
    q->set_fits(p.fits);
    SimulationToProto(p.simulation, q->mutable_simulation());
    if (!p.fits) {
      q->set_no_plan_reason(p.no_plan_reason);
      continue;
    }
    *q->mutable_plan() = JobToProto(p.job).plan();
    q->set_plan_gpus(p.job.cluster.num_gpus);
    q->set_iteration_time_ms(p.iteration_time_ms);
    q->set_iterations_per_s(1e3 / p.iteration_time_ms);
    q->set_samples_per_s(p.samples_per_s);
    q->set_fragmented_iteration_time_ms(p.fragmented_iteration_time_ms);
    q->set_fragmented_samples_per_s(p.fragmented_samples_per_s);
    q->set_contended_iteration_time_ms(p.contended_iteration_time_ms);
    q->set_fragmented_contended_iteration_time_ms(p.fragmented_contended_iteration_time_ms);
    q->set_tokens_per_s(p.tokens_per_s);
    q->set_peak_memory_bytes(p.peak_memory_bytes);
    q->set_interval_low_ms(p.interval_low_ms);
    q->set_interval_high_ms(p.interval_high_ms);
  }
}

}  // namespace vtrain::proto
