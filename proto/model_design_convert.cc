#include "proto/model_design_convert.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/enum_convert.h"
#include "proto/job_convert.h"
#include "proto/prediction_convert.h"
#include "proto/search_convert.h"

namespace vtrain::proto {
namespace {

void ModelToProto(const DesignedModel& d, v1::DesignedModel* out) {
  *out->mutable_model() = JobToProto(Job{d.model, ParallelPlan{}, ClusterSpec{}}).model();
  out->set_parameters(d.parameters);
  out->set_fits(d.fits);
  out->set_tokens(d.optimal_tokens);
  out->set_loss(d.loss);
  SimulationToProto(d.simulation, out->mutable_simulation());
  if (!d.fits) return;
  *out->mutable_plan() = JobToProto(d.job).plan();
  out->set_plan_gpus(d.job.cluster.num_gpus);
  out->set_iteration_time_ms(d.iteration_time_ms);
  out->set_mfu(d.mfu);
  out->set_budget_tokens(d.budget_tokens);
  out->set_days(d.days_for_optimal);
  out->set_days_low(d.days_low);
  out->set_days_high(d.days_high);
  out->set_cost_usd(d.cost_usd);
  out->set_failure_free_days(d.failure_free_days);
  out->set_goodput(d.goodput);
}

bool Finite(double v) { return std::isfinite(v); }

}  // namespace

absl::StatusOr<DesignSpec> DesignSpecFromProto(const v1::PlanModelRequest& r, GpuLookup gpus) {
  std::vector<std::string> problems;
  DesignSpec spec;
  absl::StatusOr<ClusterSpec> cluster = ClusterFromProto(r.cluster(), gpus);
  if (cluster.ok()) {
    spec.cluster = *cluster;
  } else {
    problems.emplace_back(cluster.status().message());
  }
  if (r.gpus() < 1 || r.gpus() > (int64_t{1} << 24)) {
    problems.push_back("gpus (--gpus) must be in [1, 16777216]");
  }
  spec.max_gpus = r.gpus();
  if (!Finite(r.days()) || r.days() < 0 || r.days() > 36500) {
    problems.push_back("days (--days) must be in [0, 36500]");
  }
  if (!Finite(r.budget_usd()) || r.budget_usd() < 0) {
    problems.push_back("budget_usd (--budget-usd) must be a finite number >= 0");
  }
  spec.days = r.days();
  spec.budget_usd = r.budget_usd();
  spec.tokens_per_parameter = r.tokens_per_parameter() == 0 ? 20 : r.tokens_per_parameter();
  if (!Finite(spec.tokens_per_parameter) || spec.tokens_per_parameter <= 0 ||
      spec.tokens_per_parameter > 1e6) {
    problems.push_back("tokens_per_parameter (--tokens-per-parameter) must be in (0, 1e6]");
  }
  if (r.scaling_law() == v1::SCALING_LAW_HOFFMANN) {
    spec.rule = DesignRule::kHoffmann;
  } else if (r.scaling_law() != v1::SCALING_LAW_UNSPECIFIED &&
             r.scaling_law() != v1::SCALING_LAW_TOKENS_PER_PARAMETER) {
    problems.push_back(absl::StrCat("scaling_law=", r.scaling_law(), " is not a ScalingLaw"));
  }
  const bool llama = r.family() == v1::MODEL_FAMILY_LLAMA;
  if (r.family() != v1::MODEL_FAMILY_UNSPECIFIED && r.family() != v1::MODEL_FAMILY_GPT && !llama) {
    problems.push_back(
        absl::StrCat("family=", r.family(), " is not a ModelFamily; use gpt or llama"));
  }
  const int64_t seq = r.seq_len() != 0 ? r.seq_len() : llama ? 8192 : 2048;
  const int64_t vocab = r.vocab_size() != 0 ? r.vocab_size() : llama ? 128256 : 50257;
  spec.global_batch = r.global_batch() != 0 ? r.global_batch() : llama ? 2048 : 1680;
  const bool inverse = r.target_parameters() != 0 || r.target_tokens() != 0;
  if (inverse && !(Finite(r.target_parameters()) && r.target_parameters() >= 1e6 &&
                   r.target_parameters() <= 1e14)) {
    problems.push_back("target_parameters (--params) must be in [1e6, 1e14]");
  }
  if (inverse && !(Finite(r.target_tokens()) && r.target_tokens() > 0 &&
                   r.target_tokens() <= kMaxTrainTokens)) {
    problems.push_back(
        absl::StrCat("target_tokens (--tokens) must be in (0, ", kMaxTrainTokens, "]"));
  }
  if (inverse && !(r.days() > 0)) problems.push_back("the inverse question needs days (--days)");
  if (seq < 1 || seq > (1 << 20) || vocab < 1 || vocab > (1 << 24)) {
    problems.push_back("seq_len (--seq-len) and vocab_size (--vocab) must be positive and sane");
  }
  if (spec.global_batch < 1 || spec.global_batch > (int64_t{1} << 24)) {
    problems.push_back("global_batch (--global-batch) must be in [1, 16777216]");
  }
  // The inverse question picks the nearest shape: every size is a candidate.
  const double lo = r.min_parameters() != 0 ? r.min_parameters() : inverse ? 1e8 : 1e9;
  const double hi = r.max_parameters() != 0 ? r.max_parameters() : inverse ? 1e14 : 1e12;
  if (!Finite(lo) || !Finite(hi) || lo <= 0 || hi < lo) {
    problems.push_back(
        "min_parameters and max_parameters (--min-params, --max-params) must be "
        "positive with min <= max");
  }
  spec.plan_space.tensor_parallel = {1, 2, 4, 8};  // the default of model planning
  PlanSpaceFromProto(r.space(), spec.plan_space, problems);
  absl::StatusOr<DType> dtype = FromProtoOr(r.dtype(), DType::kFp16, "dtype (--dtype)");
  if (dtype.ok()) {
    spec.plan_space.dtype = *dtype;
  } else {
    problems.emplace_back(dtype.status().message());
  }
  // Interpolated Llama depths are often prime (97, 103): the divisors of the
  // layers would leave p = 1 or p = layers. Megatron lays such depths out
  // unevenly instead, so the family's plans try powers of two.
  if (llama && r.space().pipeline_parallel_values().empty()) {
    spec.plan_space.training.pipeline_parallel = {1, 2, 4, 8, 16, 32, 64};
  }
  AttentionImpl attention_impl = AttentionImpl::kFlash;
  if (absl::StatusOr<AttentionImpl> impl = FromProtoOr(r.attention_impl(), AttentionImpl::kFlash,
                                                       "attention_impl (--attention-impl)");
      impl.ok()) {
    attention_impl = *impl;
  } else {
    problems.emplace_back(impl.status().message());
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  spec.candidates = llama ? LlamaFamily(lo, hi, seq, vocab) : GptFamily(lo, hi, seq, vocab);
  // Every candidate is a dense custom shape of one family: one fill of the
  // settings serves them all.
  GivenSpace given = GivenSpaceOf(r.space(), r.dtype(), v1::ModelSpec());
  given.attention_impl = r.attention_impl() != v1::ATTENTION_IMPL_UNSPECIFIED;
  ModelSpec probe = spec.candidates.empty() ? ModelSpec() : spec.candidates.front();
  probe.attention_impl = attention_impl;
  FillSpaceSettings(given, spec.cluster.gpu, probe, spec.plan_space, spec.plan_space.dtype);
  for (ModelSpec& m : spec.candidates) m.attention_impl = probe.attention_impl;
  return spec;
}

void InverseResultToProto(const InverseResult& r, v1::PlanModelResult* out) {
  v1::InverseAnswer* a = out->mutable_inverse();
  a->set_feasible(r.feasible);
  a->set_gpus(r.gpus);
  ModelToProto(r.model, a->mutable_model());
  a->set_reason(r.reason);
  for (const std::string& w : r.warnings) out->add_warnings(w);
  SimulationToProto(r.simulation, out->mutable_simulation());
}

void DesignResultToProto(const DesignResult& r, v1::PlanModelResult* out) {
  out->set_naive_estimate_parameters(r.naive_parameters);
  out->set_naive_estimate_tokens(r.naive_tokens);
  if (r.naive) ModelToProto(*r.naive, out->mutable_naive());
  if (r.optimal) ModelToProto(*r.optimal, out->mutable_optimal());
  for (const DesignedModel& d : r.candidates) ModelToProto(d, out->add_candidates());
  for (const std::string& w : r.warnings) out->add_warnings(w);
  SimulationToProto(r.simulation, out->mutable_simulation());
}

}  // namespace vtrain::proto
