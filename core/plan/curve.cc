#include "core/plan/curve.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/predict/memory.h"
#include "core/predict/predictor.h"
#include "core/util/parallel.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

// A count at which the policy has no plan that fits.
CurvePoint NoPlan(int64_t gpus, std::string reason = "no plan of the policy") {
  CurvePoint point;
  point.gpus = gpus;
  point.no_plan_reason = std::move(reason);
  return point;
}

// A plan's point from its prediction: throughput, memory and interval.
CurvePoint PointFromPrediction(const Job& job, int64_t gpus, const Prediction& p) {
  CurvePoint point;
  point.gpus = gpus;
  point.fits = p.memory.fits;
  point.job = job;
  point.iteration_time_ms = p.iteration_time_ms();
  const double seconds = point.iteration_time_ms / 1e3;
  point.samples_per_s = static_cast<double>(job.plan.global_batch) / seconds;
  point.tokens_per_s = point.samples_per_s * static_cast<double>(job.model.seq_len);
  point.peak_memory_bytes = p.memory.peak_bytes;
  if (p.interval_coverage > 0) {
    point.interval_low_ms = p.interval_low_ns * 1e-6;
    point.interval_high_ms = p.interval_high_ns * 1e-6;
  }
  return point;
}

absl::StatusOr<CurvePoint> PointOf(const Job& job, int64_t gpus, const ProfileSet& profiles,
                                   const CurveOptions& options) {
  PredictOptions po;
  po.cancelled = options.cancelled;
  VTRAIN_ASSIGN_OR_RETURN(Prediction p, Predict(job, profiles, po));
  CurvePoint point = PointFromPrediction(job, gpus, p);
  point.simulation = p.simulation;
  return point;
}

// The fastest plan on exactly `gpus` (FastestPlan: exact, pruned).
absl::StatusOr<CurvePoint> BestAt(const CurveSpec& spec, int64_t gpus, const ProfileSet& profiles,
                                  const CurveOptions& options) {
  SearchSpace space;
  static_cast<PlanSpace&>(space) = spec;  // the curve's plan space, as it is
  space.model = spec.model;
  space.cluster = spec.cluster;
  space.global_batch = spec.global_batch;
  space.gpus = gpus;
  space.dtype = spec.dtype;
  SearchOptions so;
  so.cancelled = options.cancelled;
  SearchResult counts;  // the enumeration's counts: why there is no plan
  VTRAIN_ASSIGN_OR_RETURN(std::optional<FastestPlanResult> best,
                          FastestPlan(space, profiles, so, &counts));
  if (!best) return NoPlan(gpus, NoPlanReason(space, so, counts));
  CurvePoint point = PointFromPrediction(best->job, gpus, best->prediction);
  point.simulation = best->simulation;
  return point;
}

// The data-parallel policy's footprint: the first t x p that fits in memory
// with micro-batch 1 and one replica, t growing inside a node first (1, 2, 4,
// ... GPUs per node), then p over the divisors of the layers. A MoE model's
// routed experts are spread over the data-parallel ranks as Megatron-Core
// does (expert parallelism folds into data parallelism), so its footprint
// is the first t x p that fits with one expert per rank (d = ep = experts);
// at each count DataParallelAt then tries the layouts its d allows.
std::optional<std::pair<int64_t, int64_t>> Footprint(const CurveSpec& spec) {
  std::vector<std::pair<int64_t, int64_t>> order;
  for (int64_t t = 1; t <= NvlinkDomainGpus(spec.cluster); t *= 2) order.emplace_back(t, 1);
  const int64_t node = order.empty() ? 1 : order.back().first;
  for (int64_t p = 2; p <= spec.model.num_layers; ++p) {
    if (spec.model.num_layers % p == 0) order.emplace_back(node, p);
  }
  for (const auto& [t, p] : order) {
    Job job;
    job.model = spec.model;
    job.cluster = spec.cluster;
    job.cluster.num_gpus = t * p;
    job.plan.tensor_parallel = t;
    job.plan.pipeline_parallel = p;
    job.plan.data_parallel = 1;
    if (spec.model.moe.enabled()) {
      job.plan.data_parallel = job.plan.expert_parallel = spec.model.moe.num_experts;
      job.cluster.num_gpus *= spec.model.moe.num_experts;
      job.plan.sequence_parallel = t > 1;  // Megatron-Core: EP with TP needs SP
    }
    job.plan.micro_batch = 1;
    job.plan.global_batch = spec.global_batch;
    job.plan.dtype = spec.dtype;
    if (!ValidateJob(job).ok()) continue;
    if (EstimateMemory(job).fits) return std::make_pair(t, p);
  }
  return std::nullopt;
}

// The fastest micro-batch for footprint t x p scaled to `gpus` by d.
absl::StatusOr<CurvePoint> DataParallelAt(const CurveSpec& spec, int64_t t, int64_t p, int64_t gpus,
                                          const ProfileSet& profiles, const CurveOptions& options) {
  if (gpus % (t * p) != 0) {
    return NoPlan(gpus, absl::StrCat("the data-parallel footprint t=", t, " x p=", p, " = ", t * p,
                                     " GPUs does not divide ", gpus, " GPUs"));
  }
  const int64_t d = gpus / (t * p);
  if (spec.global_batch % d != 0) {
    return NoPlan(gpus, absl::StrCat("global_batch=", spec.global_batch,
                                     " is not divisible by the data-parallel degree d=", d));
  }
  const CurvePoint none =
      NoPlan(gpus, absl::StrCat("every micro-batch of t=", t, " d=", d, " p=", p,
                                " is out of memory or not a valid plan"));
  std::optional<CurvePoint> best;
  SimulationCost cost;
  for (int64_t mb = 1; mb <= spec.global_batch / d; ++mb) {
    if ((spec.global_batch / d) % mb != 0) continue;
    if (spec.max_micro_batch > 0 && mb > spec.max_micro_batch) break;
    Job job;
    job.model = spec.model;
    job.cluster = spec.cluster;
    job.cluster.num_gpus = gpus;
    job.plan.tensor_parallel = t;
    job.plan.pipeline_parallel = p;
    job.plan.data_parallel = d;
    job.plan.micro_batch = mb;
    job.plan.global_batch = spec.global_batch;
    job.plan.schedule = spec.schedules.front();
    // DualPipeV always runs two chunks per stage.
    job.plan.virtual_stages = job.plan.schedule == PipelineSchedule::kDualPipeV
                                  ? 2
                                  : spec.training.virtual_stages.front();
    // Megatron-Core runs expert parallelism with TP only under SP.
    job.plan.sequence_parallel =
        spec.training.sequence_parallel.front() || (spec.model.moe.enabled() && t > 1);
    job.plan.data_parallel_sharding = spec.training.shardings.front();
    job.plan.dtype = spec.dtype;
    // The recomputations in the space, least recomputation first: the first
    // that fits is the fastest of them (recomputing more only adds work).
    std::vector<Recompute> recomputes = spec.recomputes;
    std::sort(recomputes.begin(), recomputes.end(), [](Recompute a, Recompute b) {
      auto rank = [](Recompute r) {
        return r == Recompute::kNone ? 0 : r == Recompute::kSelective ? 1 : 2;
      };
      return rank(a) < rank(b);
    });
    for (Recompute recompute : recomputes) {
      job.plan.recompute = recompute;
      bool fitted = false;
      VTRAIN_RETURN_IF_ERROR(
          ForEachExpertLayout(spec, spec.training, job, [&](Job& j) -> absl::Status {
            if (!ValidateJob(j).ok() || !EstimateMemory(j).fits) return absl::OkStatus();
            fitted = true;
            VTRAIN_ASSIGN_OR_RETURN(CurvePoint point, PointOf(j, gpus, profiles, options));
            cost.Add(point.simulation);
            if (!best || point.iteration_time_ms < best->iteration_time_ms) best = point;
            return absl::OkStatus();
          }));
      if (fitted) break;
    }
  }
  CurvePoint point = best ? *best : none;
  point.simulation = cost;
  return point;
}

absl::Status CheckSpec(const CurveSpec& spec) {
  if (spec.gpu_counts.empty()) {
    return absl::InvalidArgumentError("gpu_counts is empty; give the GPU counts of the curve");
  }
  for (size_t i = 0; i < spec.gpu_counts.size(); ++i) {
    if (spec.gpu_counts[i] < 1 || (i > 0 && spec.gpu_counts[i] <= spec.gpu_counts[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat("gpu_counts[", i, "]=", spec.gpu_counts[i],
                                                     " must be positive and above the one before"));
    }
  }
  if (spec.global_batch <= 0) return absl::InvalidArgumentError("global_batch must be positive");
  if (spec.schedules.empty() || spec.recomputes.empty() || spec.training.context_parallel.empty() ||
      spec.training.virtual_stages.empty() || spec.training.sequence_parallel.empty() ||
      spec.training.shardings.empty()) {
    return absl::InvalidArgumentError(
        "schedules, recomputes and the training-option lists need at least one value each");
  }
  // The shape itself (model, cluster, batch) on the smallest plan, so that a
  // bad model is an error rather than a curve of points that do not fit.
  Job probe;
  probe.model = spec.model;
  probe.cluster = spec.cluster;
  probe.cluster.num_gpus = 1;
  probe.plan.global_batch = spec.global_batch;
  probe.plan.dtype = spec.dtype;
  return ValidateJob(probe);
}

// A point's figures at its other placements on a leaf/spine fabric: spread
// over the cluster's leaves, and both placements with a leaf's uplinks full
// of other jobs' traffic (only a job crossing the spine can feel that).
absl::Status AddPlacements(CurvePoint& point, const ProfileSet& profiles,
                           const CurveOptions& options) {
  auto time_at = [&](Placement placement, double background) -> absl::StatusOr<CurvePoint> {
    Job job = point.job;
    job.cluster.fabric.placement = placement;
    job.cluster.fabric.spine_background = background;
    return PointOf(job, point.gpus, profiles, options);
  };
  VTRAIN_ASSIGN_OR_RETURN(CurvePoint spread, time_at(Placement::kSpread, 0));
  point.fragmented_iteration_time_ms = spread.iteration_time_ms;
  point.fragmented_samples_per_s = spread.samples_per_s;
  const FabricSpec& fabric = point.job.cluster.fabric;
  const double background = ContendedBackground(fabric);
  if (background <= 0) return absl::OkStatus();
  const int64_t per_node = std::max<int64_t>(1, point.job.cluster.gpus_per_node);
  const int64_t nodes = (point.job.cluster.num_gpus + per_node - 1) / per_node;
  point.contended_iteration_time_ms = point.iteration_time_ms;
  if (nodes > fabric.nodes_per_leaf) {  // packed, it still spans leaves
    VTRAIN_ASSIGN_OR_RETURN(CurvePoint packed, time_at(Placement::kPacked, background));
    point.contended_iteration_time_ms = packed.iteration_time_ms;
  }
  VTRAIN_ASSIGN_OR_RETURN(CurvePoint contended, time_at(Placement::kSpread, background));
  point.fragmented_contended_iteration_time_ms = contended.iteration_time_ms;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<CurvePoint>> ThroughputCurve(const CurveSpec& spec,
                                                        const ProfileSet& profiles,
                                                        const CurveOptions& options) {
  VTRAIN_RETURN_IF_ERROR(CheckSpec(spec));
  std::optional<std::pair<int64_t, int64_t>> footprint;
  if (spec.policy == CurvePolicy::kDataParallel) footprint = Footprint(spec);
  // The counts are independent: options.threads workers take the next one.
  const int64_t n = static_cast<int64_t>(spec.gpu_counts.size());
  std::vector<std::optional<absl::StatusOr<CurvePoint>>> points(static_cast<size_t>(n));
  std::atomic<int64_t> done{0};
  std::mutex progress_mu;
  ParallelFor(n, options.threads, [&](int64_t i) {
    if (options.cancelled && options.cancelled()) {
      points[static_cast<size_t>(i)] =
          absl::CancelledError("throughput curve cancelled by the caller");
      return false;
    }
    const int64_t gpus = spec.gpu_counts[static_cast<size_t>(i)];
    const int64_t started_ns = SteadyNowNs();
    absl::StatusOr<CurvePoint> point =
        spec.policy == CurvePolicy::kBest
            ? BestAt(spec, gpus, profiles, options)
            : (footprint ? DataParallelAt(spec, footprint->first, footprint->second, gpus, profiles,
                                          options)
                         : absl::StatusOr<CurvePoint>(
                               NoPlan(gpus,
                                      "no t x p with one replica and micro-batch 1 fits in "
                                      "memory (the data-parallel policy's footprint)")));
    // A count no plan can use (e.g. more GPUs than the batch has sequences)
    // is a point without a plan, not an error for the whole curve.
    if (!point.ok() && point.status().code() == absl::StatusCode::kInvalidArgument) {
      point = NoPlan(gpus, std::string(point.status().message()));
    }
    if (point.ok() && point->fits && !spec.cluster.fabric.flat()) {
      absl::Status placed = AddPlacements(*point, profiles, options);
      if (!placed.ok()) point = placed;
    }
    const bool fine = point.ok();
    if (fine) point->simulation.wall_ns = SteadyNowNs() - started_ns;
    points[static_cast<size_t>(i)] = std::move(point);
    const int64_t finished = ++done;
    if (options.progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      options.progress(finished, n);
    }
    return fine;
  });
  std::vector<CurvePoint> curve;
  for (std::optional<absl::StatusOr<CurvePoint>>& point : points) {
    if (!point) return absl::CancelledError("throughput curve cancelled by the caller");
    if (!point->ok()) return point->status();
    curve.push_back(**point);
  }
  if (spec.monotone) {
    std::optional<CurvePoint> best;
    for (CurvePoint& point : curve) {
      if (point.fits && (!best || point.samples_per_s >= best->samples_per_s)) {
        best = point;
      } else if (best) {
        const int64_t gpus = point.gpus;
        const SimulationCost cost = point.simulation;
        point = *best;
        point.gpus = gpus;  // the plan keeps its own job.cluster.num_gpus
        point.simulation = cost;
      }
    }
  }
  return curve;
}

}  // namespace vtrain
