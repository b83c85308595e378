#include "core/plan/model_design.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/predict/goodput.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

// Megatron-LM's GPT shapes (Narayanan et al. 2021, Table 1): hidden size
// against layers. The family interpolates layers between these rows.
constexpr std::pair<int64_t, int64_t> kMegatronShapes[] = {
    {1536, 24},  {2304, 24},  {3072, 30},  {4096, 36},   {6144, 40},   {8192, 48},
    {10240, 60}, {12288, 80}, {16384, 96}, {20480, 105}, {25600, 128},
};

int64_t LayersFor(int64_t hidden) {
  const auto* begin = std::begin(kMegatronShapes);
  const auto* end = std::end(kMegatronShapes);
  if (hidden <= begin->first) return begin->second;
  for (const auto* it = begin + 1; it != end; ++it) {
    if (hidden <= it->first) {
      const auto& [h0, l0] = *(it - 1);
      const auto& [h1, l1] = *it;
      const double f = static_cast<double>(hidden - h0) / static_cast<double>(h1 - h0);
      return std::llround(static_cast<double>(l0) + f * static_cast<double>(l1 - l0));
    }
  }
  return (end - 1)->second;
}

absl::Status CheckSpec(const DesignSpec& spec) {
  if (spec.candidates.empty()) {
    return absl::InvalidArgumentError("no candidate models; widen the size range");
  }
  if (spec.max_gpus < 1) return absl::InvalidArgumentError("gpus (--gpus) must be positive");
  if (spec.global_batch < 1) {
    return absl::InvalidArgumentError("global_batch (--global-batch) must be positive");
  }
  if (!(spec.days > 0) && !(spec.budget_usd > 0)) {
    return absl::InvalidArgumentError(
        "give a budget: days (--days) and/or budget_usd (--budget-usd)");
  }
  if (spec.budget_usd > 0 && !(spec.cluster.price_usd_per_gpu_hour > 0)) {
    return absl::InvalidArgumentError(
        "budget_usd needs the price (--price-usd-per-gpu-hour) to turn dollars into GPU-hours");
  }
  if (!(spec.tokens_per_parameter > 0)) {
    return absl::InvalidArgumentError("tokens_per_parameter must be positive");
  }
  return absl::OkStatus();
}

// The budget in seconds of the job's own GPUs: the days, and what the money
// buys on them, whichever is less.
double BudgetSeconds(const DesignSpec& spec, int64_t gpus) {
  double seconds = spec.days > 0 ? spec.days * 86400 : INFINITY;
  if (spec.budget_usd > 0) {
    const double hours =
        spec.budget_usd / (spec.cluster.price_usd_per_gpu_hour * static_cast<double>(gpus));
    seconds = std::min(seconds, hours * 3600);
  }
  return seconds;
}

absl::StatusOr<DesignedModel> Plan(const DesignSpec& spec, const ModelSpec& model,
                                   const ProfileSet& profiles, const DesignOptions& options) {
  DesignedModel d;
  d.model = model;
  d.parameters = ModelParameterCount(model);
  d.optimal_tokens = spec.tokens_per_parameter * d.parameters;
  SearchSpace space = spec.plan_space;
  space.model = model;
  space.cluster = spec.cluster;
  space.global_batch = spec.global_batch;
  space.gpus = 0;
  space.max_gpus = spec.max_gpus;
  SearchOptions so;
  so.cancelled = options.cancelled;
  absl::StatusOr<std::optional<FastestPlanResult>> best = FastestPlan(space, profiles, so);
  if (!best.ok()) {
    if (best.status().code() == absl::StatusCode::kCancelled) return best.status();
    return d;  // no plan of this shape on these GPUs (e.g. the batch does not split)
  }
  if (!*best) return d;
  d.fits = true;
  d.job = (*best)->job;
  d.simulation = (*best)->simulation;
  const Prediction& p = (*best)->prediction;
  d.iteration_time_ms = p.iteration_time_ms();
  d.mfu = p.mfu;
  const double tokens_per_iteration =
      static_cast<double>(spec.global_batch) * static_cast<double>(model.seq_len);
  const double iteration_s = d.iteration_time_ms / 1e3;
  const double seconds_per_token = iteration_s / tokens_per_iteration;
  const double budget_s = BudgetSeconds(spec, d.job.cluster.num_gpus);
  const double useful_s = std::isfinite(budget_s)
                              ? budget_s * EstimateGoodput(d.job, iteration_s, budget_s).fraction
                              : budget_s;
  d.budget_tokens = useful_s / seconds_per_token;
  const double failure_free_s = d.optimal_tokens * seconds_per_token;
  const Goodput goodput = EstimateGoodput(d.job, iteration_s, failure_free_s);
  d.failure_free_days = failure_free_s / 86400;
  d.goodput = goodput.fraction;
  d.days_for_optimal = goodput.expected_time_s / 86400;
  if (p.interval_coverage > 0) {
    d.days_low = d.days_for_optimal * p.interval_low_ns / static_cast<double>(p.iteration_time_ns);
    d.days_high =
        d.days_for_optimal * p.interval_high_ns / static_cast<double>(p.iteration_time_ns);
  }
  d.cost_usd = d.days_for_optimal * 24 * static_cast<double>(d.job.cluster.num_gpus) *
               spec.cluster.price_usd_per_gpu_hour;
  d.loss = HoffmannLoss(d.parameters, std::min(d.budget_tokens, d.optimal_tokens));
  return d;
}

}  // namespace

std::vector<ModelSpec> GptFamily(double min_parameters, double max_parameters, int64_t seq_len,
                                 int64_t vocab_size) {
  std::vector<ModelSpec> family;
  for (int64_t hidden = 1024; hidden <= 32768; hidden += 512) {
    ModelSpec m;
    m.name = absl::StrCat("gpt-h", hidden, "-l", LayersFor(hidden));
    m.hidden_size = hidden;
    m.num_heads = hidden / 128;  // head size 128
    m.num_layers = LayersFor(hidden);
    m.seq_len = seq_len;
    m.vocab_size = vocab_size;
    const double n = ModelParameterCount(m);
    if (n >= min_parameters && n <= max_parameters) family.push_back(m);
  }
  return family;
}

double HoffmannLoss(double parameters, double tokens) {
  // Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models",
  // Section 3.3 / Appendix D.2 (Approach 3).
  constexpr double kE = 1.69, kA = 406.4, kB = 410.7, kAlpha = 0.34, kBeta = 0.28;
  return kE + kA / std::pow(parameters, kAlpha) + kB / std::pow(tokens, kBeta);
}

absl::StatusOr<DesignResult> DesignModel(const DesignSpec& spec, const ProfileSet& profiles,
                                         const DesignOptions& options) {
  VTRAIN_RETURN_IF_ERROR(CheckSpec(spec));
  const int64_t started_ns = SteadyNowNs();
  DesignResult result;
  const int64_t n = static_cast<int64_t>(spec.candidates.size());
  for (int64_t i = 0; i < n; ++i) {
    VTRAIN_ASSIGN_OR_RETURN(DesignedModel d,
                            Plan(spec, spec.candidates[static_cast<size_t>(i)], profiles, options));
    result.simulation.Add(d.simulation);
    result.candidates.push_back(std::move(d));
    if (options.progress) options.progress(i + 1, n);
  }
  // The naive estimate: every GPU at its peak, 6 N D FLOPs, D = k N.
  const double flops = static_cast<double>(spec.max_gpus) *
                       spec.cluster.gpu.PeakFlops(spec.plan_space.dtype) *
                       BudgetSeconds(spec, spec.max_gpus);
  result.naive_parameters = std::sqrt(flops / (6 * spec.tokens_per_parameter));
  result.naive_tokens = spec.tokens_per_parameter * result.naive_parameters;
  for (const DesignedModel& d : result.candidates) {
    if (d.parameters <= result.naive_parameters && d.fits) result.naive = d;
    const bool trains = d.fits && d.budget_tokens >= d.optimal_tokens;
    if (spec.rule == DesignRule::kTokensPerParameter && trains) result.optimal = d;
    if (spec.rule == DesignRule::kHoffmann && d.fits &&
        (!result.optimal || d.loss < result.optimal->loss)) {
      result.optimal = d;
    }
  }
  result.simulation.wall_ns = SteadyNowNs() - started_ns;
  return result;
}

}  // namespace vtrain
