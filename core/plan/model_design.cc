#include "core/plan/model_design.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

// Llama 3's shapes (hidden, layers): Llama 3.2 1B and 3B, Llama 3 8B, 70B
// and 405B.
constexpr std::pair<int64_t, int64_t> kLlamaShapes[] = {
    {2048, 16}, {3072, 28}, {4096, 32}, {8192, 80}, {16384, 126},
};

// Layers for `hidden` interpolated between `shapes` (held at the ends).
template <size_t N>
int64_t Interpolate(const std::pair<int64_t, int64_t> (&shapes)[N], int64_t hidden) {
  if (hidden <= shapes[0].first) return shapes[0].second;
  for (size_t i = 1; i < N; ++i) {
    if (hidden <= shapes[i].first) {
      const auto& [h0, l0] = shapes[i - 1];
      const auto& [h1, l1] = shapes[i];
      const double f = static_cast<double>(hidden - h0) / static_cast<double>(h1 - h0);
      return std::llround(static_cast<double>(l0) + f * static_cast<double>(l1 - l0));
    }
  }
  return shapes[N - 1].second;
}

int64_t LayersFor(int64_t hidden) { return Interpolate(kMegatronShapes, hidden); }

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

std::vector<ModelSpec> LlamaFamily(double min_parameters, double max_parameters, int64_t seq_len,
                                   int64_t vocab_size) {
  std::vector<ModelSpec> family;
  for (int64_t hidden = 1024; hidden <= 32768; hidden += 1024) {
    ModelSpec m;
    m.arch = Architecture::kLlama;
    m.hidden_size = hidden;
    m.num_heads = hidden / 128;  // head size 128
    m.num_kv_heads = std::min<int64_t>(8, m.num_heads);
    m.num_layers = Interpolate(kLlamaShapes, hidden);
    const double multiplier = hidden <= 8192 ? 1.3 : 1.2;
    const auto ffn = static_cast<int64_t>(multiplier * 8.0 * static_cast<double>(hidden) / 3);
    m.ffn_hidden_size = (ffn + 1023) / 1024 * 1024;
    m.seq_len = seq_len;
    m.vocab_size = vocab_size;
    m.name = absl::StrCat("llama-h", hidden, "-l", m.num_layers);
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
  if (result.optimal) {
    if (std::string w = BatchWarning(result.optimal->job); !w.empty()) {
      result.warnings.push_back(std::move(w));
    }
  }
  result.simulation.wall_ns = SteadyNowNs() - started_ns;
  return result;
}

std::string BatchWarning(const Job& job) {
  const ParallelPlan& p = job.plan;
  if (p.pipeline_parallel < 2 || p.data_parallel < 1 || p.micro_batch < 1) return "";
  const int64_t m = p.global_batch / (p.data_parallel * p.micro_batch);
  const double stages = static_cast<double>(p.pipeline_parallel);
  const double bubble = (stages - 1) / (static_cast<double>(p.virtual_stages * m) + stages - 1);
  if (bubble <= 0.25) return "";
  return absl::StrFormat(
      "the global batch (%d sequences) limits the efficiency: its plan (t=%d d=%d p=%d) runs %d "
      "micro-batches per pipeline of %d stages, a pipeline bubble of %.0f%% of the iteration; "
      "a larger --global-batch trains faster",
      p.global_batch, p.tensor_parallel, p.data_parallel, p.pipeline_parallel, m,
      p.pipeline_parallel, 100 * bubble);
}

absl::StatusOr<InverseResult> DesignForModel(const DesignSpec& spec, double parameters,
                                             double tokens, const ProfileSet& profiles,
                                             const DesignOptions& options) {
  VTRAIN_RETURN_IF_ERROR(CheckSpec(spec));
  if (!(parameters > 0) || !(tokens > 0) || !(spec.days > 0)) {
    return absl::InvalidArgumentError(
        "the inverse question needs target_parameters (--params), target_tokens (--tokens) "
        "and days (--days), all positive");
  }
  const int64_t started_ns = SteadyNowNs();
  const ModelSpec* nearest = nullptr;
  for (const ModelSpec& m : spec.candidates) {
    if (!nearest || std::abs(std::log(ModelParameterCount(m) / parameters)) <
                        std::abs(std::log(ModelParameterCount(*nearest) / parameters))) {
      nearest = &m;
    }
  }
  InverseResult result;
  // The nearest shape's fastest plan on at most `gpus` GPUs, for `tokens`.
  auto plan = [&](int64_t gpus) -> absl::StatusOr<DesignedModel> {
    DesignSpec s = spec;
    s.max_gpus = gpus;
    s.tokens_per_parameter = tokens / ModelParameterCount(*nearest);
    absl::StatusOr<DesignedModel> d = Plan(s, *nearest, profiles, options);
    if (d.ok()) result.simulation.Add(d->simulation);
    return d;
  };
  auto in_time = [&](const DesignedModel& d) { return d.fits && d.days_for_optimal <= spec.days; };
  const int64_t node = std::max<int64_t>(1, std::min(spec.cluster.gpus_per_node, spec.max_gpus));
  int64_t lo = 0, hi = spec.max_gpus / node;  // in nodes: lo never in time, hi in time
  VTRAIN_ASSIGN_OR_RETURN(DesignedModel at_most, plan(hi * node));
  if (!in_time(at_most)) {
    result.model = std::move(at_most);
    result.reason =
        !result.model.fits
            ? absl::StrFormat("no plan of %s fits on up to %d GPUs with a global batch of %d",
                              nearest->name, hi * node, spec.global_batch)
            : absl::StrFormat(
                  "on up to %d GPUs the fastest plan of %s needs %.1f days (%.1f without "
                  "failures) for %.0fB tokens, more than %g; allow more GPUs or days",
                  hi * node, nearest->name, result.model.days_for_optimal,
                  result.model.failure_free_days, tokens / 1e9, spec.days);
  } else {
    DesignedModel best = std::move(at_most);
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      VTRAIN_ASSIGN_OR_RETURN(DesignedModel d, plan(mid * node));
      if (in_time(d)) {
        hi = mid;
        best = std::move(d);
      } else {
        lo = mid;
      }
    }
    result.model = std::move(best);
    result.feasible = true;
    result.gpus = result.model.job.cluster.num_gpus;
  }
  if (result.model.fits) {
    if (std::string w = BatchWarning(result.model.job); !w.empty()) {
      result.warnings.push_back(std::move(w));
    }
  }
  result.simulation.wall_ns = SteadyNowNs() - started_ns;
  return result;
}

}  // namespace vtrain
