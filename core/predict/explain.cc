#include "core/predict/explain.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/spec/settings.h"

namespace vtrain {
namespace {

const char* OnOff(bool on) { return on ? "on" : "off"; }

}  // namespace

std::vector<SettingChange> SettingChanges(const Job& job) {
  std::vector<SettingChange> out;
  const ParallelPlan& p = job.plan;
  auto add = [&](std::string change, auto edit) {
    Job j = job;
    edit(j.plan, j.model);
    if (ValidateJob(j).ok()) out.push_back({std::move(change), std::move(j)});
  };
  // The overlaps.
  if (p.sequence_parallel_active()) {
    add(absl::StrCat("--tp-comm-overlap ", OnOff(!p.tp_comm_overlap)),
        [](ParallelPlan& q, ModelSpec&) { q.tp_comm_overlap = !q.tp_comm_overlap; });
  }
  if (p.data_parallel_sharding == DataParallelSharding::kOptimizer) {
    add(absl::StrCat("--overlap-param-gather ", OnOff(!p.param_gather_overlap)),
        [](ParallelPlan& q, ModelSpec&) { q.param_gather_overlap = !q.param_gather_overlap; });
  }
  add(absl::StrCat("--gradient-bucketing ", OnOff(!p.gradient_bucketing)),
      [](ParallelPlan& q, ModelSpec&) { q.gradient_bucketing = !q.gradient_bucketing; });
  if (p.tensor_parallel > 1) {
    add(absl::StrCat("--sequence-parallel ", OnOff(!p.sequence_parallel),
                     p.sequence_parallel && p.tp_comm_overlap ? " --tp-comm-overlap off" : ""),
        [](ParallelPlan& q, ModelSpec&) {
          q.sequence_parallel = !q.sequence_parallel;
          if (!q.sequence_parallel) q.tp_comm_overlap = false;
        });
  }
  // Recomputation, and the distributed optimizer.
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (r == p.recompute) continue;
    add(absl::StrCat("--recompute ", RecomputeName(r)), [r](ParallelPlan& q, ModelSpec&) {
      q.recompute = r;
      q.recompute_modules = 0;
      if (r == Recompute::kFull) q.moe.overlap = false;
    });
  }
  for (DataParallelSharding s : {DataParallelSharding::kNone, DataParallelSharding::kOptimizer,
                                 DataParallelSharding::kFull}) {
    if (s == p.data_parallel_sharding) continue;
    add(absl::StrCat("--data-parallel-sharding ", ShardingName(s)),
        [s](ParallelPlan& q, ModelSpec&) {
          q.data_parallel_sharding = s;
          if (s != DataParallelSharding::kOptimizer) q.param_gather_overlap = false;
        });
  }
  add(absl::StrCat("--bf16-moments ", OnOff(!p.bf16_moments)),
      [](ParallelPlan& q, ModelSpec&) { q.bf16_moments = !q.bf16_moments; });
  add(absl::StrCat("--fp32-grads ", OnOff(!p.fp32_grads)),
      [](ParallelPlan& q, ModelSpec&) { q.fp32_grads = !q.fp32_grads; });
  // Precision.
  if (p.dtype == DType::kFp8) {
    add("--dtype bf16", [](ParallelPlan& q, ModelSpec&) { q.dtype = DType::kBf16; });
    for (Fp8Recipe r :
         {Fp8Recipe::kDelayed, Fp8Recipe::kCurrent, Fp8Recipe::kBlockwise, Fp8Recipe::kMxfp8}) {
      if (r == p.fp8_recipe) continue;
      add(absl::StrCat("--fp8-recipe ", Fp8RecipeName(r)),
          [r](ParallelPlan& q, ModelSpec&) { q.fp8_recipe = r; });
    }
  } else if (job.cluster.gpu.peak_fp8_flops_per_s > 0) {
    add("--dtype fp8", [](ParallelPlan& q, ModelSpec&) { q.dtype = DType::kFp8; });
  }
  // The attention kernel.
  if (job.model.attention != AttentionKind::kMla) {
    const bool flash = job.model.attention_impl == AttentionImpl::kFlash;
    add(absl::StrCat("--attention-impl ", flash ? "unfused" : "flash"),
        [flash](ParallelPlan&, ModelSpec& m) {
          m.attention_impl = flash ? AttentionImpl::kUnfused : AttentionImpl::kFlash;
        });
  }
  // MoE: the dispatcher and the all-to-all overlap.
  if (job.model.is_moe() && p.expert_parallel > 1) {
    for (MoeDispatcher d : {MoeDispatcher::kAllToAll, MoeDispatcher::kAllGather,
                            MoeDispatcher::kFlex, MoeDispatcher::kHybridEp}) {
      if (d == p.moe.dispatcher) continue;
      add(absl::StrCat("--moe-dispatcher ", DispatcherName(d)), [d](ParallelPlan& q, ModelSpec&) {
        q.moe.dispatcher = d;
        if (d == MoeDispatcher::kAllGather) q.moe.overlap = false;
      });
    }
    add(absl::StrCat("--moe-overlap ", OnOff(!p.moe.overlap)),
        [](ParallelPlan& q, ModelSpec&) { q.moe.overlap = !q.moe.overlap; });
  }
  // Context parallelism's exchange.
  if (p.context_parallel > 1) {
    for (ContextParallelComm c :
         {ContextParallelComm::kP2P, ContextParallelComm::kA2A, ContextParallelComm::kA2AP2P}) {
      if (c == p.cp_comm) continue;
      add(absl::StrCat("--cp-comm ", CpCommName(c)),
          [c](ParallelPlan& q, ModelSpec&) { q.cp_comm = c; });
    }
  }
  return out;
}

absl::StatusOr<Explanation> Explain(const Job& job, const Prediction& base, double measured_ms,
                                    const ProfileSet& profiles, const PredictOptions& options) {
  if (!(measured_ms > 0) || !std::isfinite(measured_ms)) {
    return absl::InvalidArgumentError(
        absl::StrCat("measured_ms=", measured_ms,
                     " (--measured-ms) must be a positive step time in milliseconds, e.g. 12100"));
  }
  Explanation e;
  e.measured_ms = measured_ms;
  e.predicted_ms = static_cast<double>(base.iteration_time_ns) * 1e-6;
  e.interval_low_ms = base.interval_low_ns * 1e-6;
  e.interval_high_ms = base.interval_high_ns * 1e-6;
  e.position = measured_ms < e.interval_low_ms    ? "below"
               : measured_ms > e.interval_high_ms ? "above"
                                                  : "inside";
  const double gap = std::abs(measured_ms - e.predicted_ms);
  auto consider = [&](std::string change, double ms, bool fits) {
    ExplainCandidate c;
    c.change = std::move(change);
    c.iteration_time_ms = ms;
    c.fits = fits;
    c.closes = gap > 0 ? 1 - std::abs(measured_ms - ms) / gap : 0;
    if (c.closes > 1e-9) {
      e.toward.push_back(std::move(c));
    } else {
      ++e.away;
    }
  };
  for (SettingChange& s : SettingChanges(job)) {
    absl::StatusOr<Prediction> p = Predict(s.job, profiles, options);
    if (!p.ok()) {
      if (p.status().code() == absl::StatusCode::kCancelled) return p.status();
      continue;  // a change the simulator refuses (e.g. too large) is not a candidate
    }
    consider(std::move(s.change), static_cast<double>(p->iteration_time_ns) * 1e-6, p->memory.fits);
  }
  // The kernels and collectives at the edges of their fitted bands: the
  // interval's ends (the calibration's held-out errors).
  if (e.interval_high_ms > 0) {
    consider("kernels and collectives at the slow edge of their fitted band", e.interval_high_ms,
             true);
    consider("kernels and collectives at the fast edge of their fitted band", e.interval_low_ms,
             true);
  }
  std::stable_sort(
      e.toward.begin(), e.toward.end(),
      [](const ExplainCandidate& a, const ExplainCandidate& b) { return a.closes > b.closes; });
  return e;
}

}  // namespace vtrain
