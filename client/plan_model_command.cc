// vtrainctl plan-model: the compute-optimal model for a budget of GPUs and
// days (or dollars), corrected by vtrain's predictions, next to the naive
// peak-FLOP/s estimate (core/plan/model_design.h).
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/job_flags.h"
#include "core/plan/model_design.h"
#include "core/util/status_macros.h"
#include "proto/job_convert.h"

namespace vtrain::cli {
namespace {

constexpr char kHelp[] =
    "usage: vtrainctl plan-model --gpu NAME --gpus N (--days D | --budget-usd X "
    "--price-usd-per-gpu-hour P) [flags]\n\n"
    "Over GPT shapes with the GPT-3 / Megatron aspect ratios, finds the largest model whose\n"
    "compute-optimal token count (--tokens-per-parameter, default 20) trains within the\n"
    "budget on its fastest plan (or, with --scaling-law hoffmann, the one minimising\n"
    "Chinchilla's loss), next to the naive answer that assumes every GPU at its peak.\n\n"
    "example (the vTrain paper's case: 3,360 A100s for 30 days):\n"
    "  vtrainctl plan-model --gpu a100-sxm4-80gb --gpus 3360 --days 30 --global-batch 1680\n\n"
    "flags:\n";

std::string Describe(const DesignedModel& d) {
  if (!d.fits) return absl::StrFormat("%s (%.2fB): no plan fits", d.model.name, d.parameters / 1e9);
  const ParallelPlan& p = d.job.plan;
  return absl::StrFormat(
      "%d layers x hidden %d (%.2fB parameters), %.0fB tokens; t=%d d=%d p=%d mb=%d on %d GPUs; "
      "iteration %.0f ms, MFU %.1f%%; %.1f days (%.1f .. %.1f)%s",
      d.model.num_layers, d.model.hidden_size, d.parameters / 1e9, d.optimal_tokens / 1e9,
      p.tensor_parallel, p.data_parallel, p.pipeline_parallel, p.micro_batch,
      d.job.cluster.num_gpus, d.iteration_time_ms, 100 * d.mfu, d.days_for_optimal, d.days_low,
      d.days_high, d.cost_usd > 0 ? absl::StrFormat(", $%.2fM", d.cost_usd / 1e6) : "");
}

std::string JsonModel(const char* key, const std::optional<DesignedModel>& d, double parameters,
                      double tokens) {
  if (!d) {
    return absl::StrFormat("\"%s\": {\"parameters\": %.6g, \"tokens\": %.6g, \"fits\": false}", key,
                           parameters, tokens);
  }
  const ParallelPlan& p = d->job.plan;
  return absl::StrFormat(
      "\"%s\": {\"parameters\": %.6g, \"tokens\": %.6g, \"num_layers\": %d, \"hidden_size\": %d, "
      "\"days\": %.6g, \"days_low\": %.6g, \"days_high\": %.6g, \"mfu\": %.6g, "
      "\"iteration_time_ms\": %.6g, \"cost_usd\": %.6g, \"plan\": {\"tensor_parallel\": %d, "
      "\"data_parallel\": %d, \"pipeline_parallel\": %d, \"micro_batch\": %d, \"gpus\": %d}}",
      key, parameters, tokens, d->model.num_layers, d->model.hidden_size, d->days_for_optimal,
      d->days_low, d->days_high, d->mfu, d->iteration_time_ms, d->cost_usd, p.tensor_parallel,
      p.data_parallel, p.pipeline_parallel, p.micro_batch, d->job.cluster.num_gpus);
}

}  // namespace

int RunPlanModel(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl plan-model");
  AddClusterFlags(flags);
  flags.AddValue("gpus", "N", "GPUs available (plans use at most this many)");
  flags.AddValue("days", "D", "the time budget");
  flags.AddValue("budget-usd", "X", "a money budget (needs --price-usd-per-gpu-hour)");
  flags.AddValue("tokens-per-parameter", "K", "compute-optimal tokens per parameter (default 20)");
  flags.AddValue("scaling-law", "S", "hoffmann: minimise Chinchilla's L(N, D) instead");
  flags.AddValue("family", "F", "gpt (the only family)");
  flags.AddValue("seq-len", "N", "sequence length (default 2048)");
  flags.AddValue("vocab", "N", "vocabulary (default 50257)");
  flags.AddValue("global-batch", "N", "global batch in sequences (default 1680)");
  flags.AddValue("min-params", "N", "smallest candidate (default 1e9)");
  flags.AddValue("max-params", "N", "largest candidate (default 1e12)");
  flags.AddValue("tp-values", "A,B,..", "tensor-parallel degrees to search (default 1,2,4,8)");
  flags.AddSwitch("json", "print naive and optimal as JSON");
  flags.AddSwitch("csv", "print every candidate as CSV");
  flags.AddSwitch("help", "show this help");
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(err, "plan-model", s);
  if (flags.Switch("help")) {
    out << kHelp << flags.Usage();
    return common::kExitOk;
  }
  auto bad = [&](const absl::Status& s) { return Fail(err, "plan-model", s); };
  if (auto f = flags.Get("family"); f && *f != "gpt") {
    return bad(absl::InvalidArgumentError(absl::StrCat("--family='", *f, "' is unknown; use gpt")));
  }
  absl::StatusOr<v1::ClusterSpec> cluster_msg = ClusterSpecFromFlags(flags);
  if (!cluster_msg.ok()) return bad(cluster_msg.status());
  absl::StatusOr<ClusterSpec> cluster = convert::ClusterFromProto(*cluster_msg);
  if (!cluster.ok()) return bad(cluster.status());
  DesignSpec spec;
  spec.cluster = *cluster;
  absl::StatusOr<std::optional<int64_t>> gpus = flags.GetInt("gpus");
  absl::StatusOr<std::optional<int64_t>> batch = flags.GetInt("global-batch");
  absl::StatusOr<std::optional<int64_t>> seq = flags.GetInt("seq-len");
  absl::StatusOr<std::optional<int64_t>> vocab = flags.GetInt("vocab");
  absl::StatusOr<std::optional<double>> days = flags.GetDouble("days");
  absl::StatusOr<std::optional<double>> usd = flags.GetDouble("budget-usd");
  absl::StatusOr<std::optional<double>> k = flags.GetDouble("tokens-per-parameter");
  absl::StatusOr<std::optional<double>> min_params = flags.GetDouble("min-params");
  absl::StatusOr<std::optional<double>> max_params = flags.GetDouble("max-params");
  for (const absl::Status& s :
       {gpus.status(), batch.status(), seq.status(), vocab.status(), days.status(), usd.status(),
        k.status(), min_params.status(), max_params.status()}) {
    if (!s.ok()) return bad(s);
  }
  if (!*gpus) return bad(absl::InvalidArgumentError("--gpus N is required"));
  spec.max_gpus = **gpus;
  spec.global_batch = batch->value_or(1680);
  spec.days = days->value_or(0);
  spec.budget_usd = usd->value_or(0);
  spec.tokens_per_parameter = k->value_or(20);
  if (auto law = flags.Get("scaling-law")) {
    if (*law != "hoffmann") {
      return bad(absl::InvalidArgumentError(
          absl::StrCat("--scaling-law='", *law, "' is unknown; use hoffmann")));
    }
    spec.rule = DesignRule::kHoffmann;
  }
  spec.candidates = GptFamily(min_params->value_or(1e9), max_params->value_or(1e12),
                              seq->value_or(2048), vocab->value_or(50257));
  spec.plan_space.tensor_parallel = {1, 2, 4, 8};
  if (auto tps = flags.Get("tp-values")) {
    spec.plan_space.tensor_parallel.clear();
    for (absl::string_view v : absl::StrSplit(*tps, ',', absl::SkipEmpty())) {
      int64_t t = 0;
      if (!absl::SimpleAtoi(v, &t) || t < 1 || t > 1024) {
        return bad(
            absl::InvalidArgumentError(absl::StrCat("--tp-values: '", v, "' is not a degree")));
      }
      spec.plan_space.tensor_parallel.push_back(t);
    }
  }
  absl::StatusOr<ProfileSet> profiles = BuiltinProfileSet(spec.cluster.gpu);
  if (!profiles.ok()) return bad(profiles.status());
  absl::StatusOr<DesignResult> r = DesignModel(spec, *profiles);
  if (!r.ok()) return bad(r.status());
  if (flags.Switch("json")) {
    out << "{"
        << absl::StrFormat("\"naive_estimate\": {\"parameters\": %.6g, \"tokens\": %.6g}, ",
                           r->naive_parameters, r->naive_tokens)
        << JsonModel("naive", r->naive, r->naive ? r->naive->parameters : r->naive_parameters,
                     r->naive ? r->naive->optimal_tokens : r->naive_tokens)
        << ", "
        << JsonModel("optimal", r->optimal, r->optimal ? r->optimal->parameters : 0,
                     r->optimal ? r->optimal->optimal_tokens : 0)
        << "}\n";
    return common::kExitOk;
  }
  if (flags.Switch("csv")) {
    out << "num_layers,hidden_size,parameters,fits,gpus,tensor_parallel,data_parallel,"
           "pipeline_parallel,iteration_time_ms,mfu,budget_tokens,optimal_tokens,days_for_"
           "optimal\n";
    for (const DesignedModel& d : r->candidates) {
      out << absl::StrFormat(
          "%d,%d,%.6g,%d,%d,%d,%d,%d,%.3f,%.4f,%.6g,%.6g,%.3f\n", d.model.num_layers,
          d.model.hidden_size, d.parameters, d.fits, d.job.cluster.num_gpus,
          d.job.plan.tensor_parallel, d.job.plan.data_parallel, d.job.plan.pipeline_parallel,
          d.iteration_time_ms, d.mfu, d.budget_tokens, d.optimal_tokens, d.days_for_optimal);
    }
    return common::kExitOk;
  }
  out << absl::StrFormat("naive (every GPU at its peak): %.2fB parameters on %.0fB tokens\n",
                         r->naive_parameters / 1e9, r->naive_tokens / 1e9);
  if (r->naive) out << "  as planned by vtrain: " << Describe(*r->naive) << "\n";
  if (r->optimal) {
    out << "compute-optimal within the budget: " << Describe(*r->optimal) << "\n";
  } else {
    out << "no candidate trains its compute-optimal tokens within the budget\n";
  }
  return common::kExitOk;
}

}  // namespace vtrain::cli
