// vtrainctl plan-model: the compute-optimal model for a budget of GPUs and
// days (or dollars), corrected by vtrain's predictions, next to the naive
// peak-FLOP/s estimate (core/plan/model_design.h, Simulator.PlanModel).
#include <cmath>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/job_flags.h"
#include "client/prediction_format.h"
#include "client/svg_plot.h"
#include "common/connection.h"
#include "common/files.h"
#include "core/plan/model_design.h"
#include "core/util/status_macros.h"
#include "proto/enum_convert.h"
#include "proto/json.h"
#include "proto/model_design_convert.h"
#include "service/service.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::client {
namespace {

constexpr char kPlanModelHelp[] =
    "usage: vtrainctl plan-model --gpu NAME --gpus N (--days D | --budget-usd X "
    "--price-usd-per-gpu-hour P) [flags]\n\n"
    "Over the shapes of a family (--family gpt: GPT-3 / Megatron aspect ratios; llama: Llama "
    "3's),\n"
    "finds the largest model whose compute-optimal token count (--tokens-per-parameter,\n"
    "default 20) trains within the budget on its fastest plan, expected with failures and\n"
    "checkpoints (or, with --scaling-law hoffmann, the one minimising Chinchilla's loss), next\n"
    "to the naive answer that assumes every GPU at its peak. With --params N --tokens T, the\n"
    "inverse question: the fewest GPUs (up to --gpus) on which the family's shape nearest to N\n"
    "trains T tokens within --days (exit 1 when none does).\n\n"
    "examples (the vTrain paper's case: 3,360 A100s for 30 days; a 70B Llama on H100s):\n"
    "  vtrainctl plan-model --gpu a100-sxm4-80gb --gpus 3360 --days 30 --global-batch 1680\n"
    "  vtrainctl plan-model --family llama --dtype bf16 --gpu h100-sxm5-80gb --gpus 8192 \\\n"
    "      --days 60 --params 70e9 --tokens 15e12\n\n"
    "flags:\n";

absl::StatusOr<v1::PlanModelRequest> PlanRequestFromFlags(const common::FlagParser& f) {
  v1::PlanModelRequest r;
  VTRAIN_ASSIGN_OR_RETURN(*r.mutable_cluster(), ClusterSpecFromFlags(f));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> gpus, f.GetInt("gpus"));
  if (!gpus) return absl::InvalidArgumentError("--gpus N is required");
  r.set_gpus(*gpus);
  auto set_double = [&](const char* flag, void (v1::PlanModelRequest::*set)(double)) {
    absl::StatusOr<std::optional<double>> v = f.GetDouble(flag);
    if (!v.ok()) return v.status();
    if (*v) (r.*set)(**v);
    return absl::OkStatus();
  };
  VTRAIN_RETURN_IF_ERROR(set_double("days", &v1::PlanModelRequest::set_days));
  VTRAIN_RETURN_IF_ERROR(set_double("budget-usd", &v1::PlanModelRequest::set_budget_usd));
  VTRAIN_RETURN_IF_ERROR(
      set_double("tokens-per-parameter", &v1::PlanModelRequest::set_tokens_per_parameter));
  VTRAIN_RETURN_IF_ERROR(set_double("min-params", &v1::PlanModelRequest::set_min_parameters));
  VTRAIN_RETURN_IF_ERROR(set_double("max-params", &v1::PlanModelRequest::set_max_parameters));
  auto set_int = [&](const char* flag, void (v1::PlanModelRequest::*set)(int64_t)) {
    absl::StatusOr<std::optional<int64_t>> v = f.GetInt(flag);
    if (!v.ok()) return v.status();
    if (*v) (r.*set)(**v);
    return absl::OkStatus();
  };
  VTRAIN_RETURN_IF_ERROR(set_int("seq-len", &v1::PlanModelRequest::set_seq_len));
  VTRAIN_RETURN_IF_ERROR(set_int("vocab", &v1::PlanModelRequest::set_vocab_size));
  VTRAIN_RETURN_IF_ERROR(set_int("global-batch", &v1::PlanModelRequest::set_global_batch));
  if (auto law = f.Get("scaling-law")) {
    if (*law != "hoffmann") {
      return absl::InvalidArgumentError(
          absl::StrCat("--scaling-law='", *law, "' is unknown; use hoffmann"));
    }
    r.set_scaling_law(v1::SCALING_LAW_HOFFMANN);
  }
  if (auto family = f.Get("family")) {
    if (*family != "gpt" && *family != "llama") {
      return absl::InvalidArgumentError(
          absl::StrCat("--family='", *family, "' is unknown; use gpt or llama"));
    }
    r.set_family(*family == "llama" ? v1::MODEL_FAMILY_LLAMA : v1::MODEL_FAMILY_GPT);
  }
  if (auto d = f.Get("dtype")) {
    VTRAIN_ASSIGN_OR_RETURN(DType dtype, ParseDType(*d));
    r.set_dtype(proto::ToProto(dtype));
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<AttentionImpl> impl,
                          f.GetParsed("attention-impl", ParseAttentionImpl));
  if (impl) r.set_attention_impl(proto::ToProto(*impl));
  // The inverse question.
  VTRAIN_RETURN_IF_ERROR(set_double("params", &v1::PlanModelRequest::set_target_parameters));
  VTRAIN_RETURN_IF_ERROR(set_double("tokens", &v1::PlanModelRequest::set_target_tokens));
  if (f.Has("params") != f.Has("tokens")) {
    return absl::InvalidArgumentError(
        "the inverse question needs both --params N and --tokens T (and --days D)");
  }
  VTRAIN_ASSIGN_OR_RETURN(*r.mutable_space(), PlanSpaceFromFlags(f));
  return r;
}

absl::StatusOr<v1::PlanModelResult> PlanRemotely(const common::FlagParser& flags,
                                                 const v1::PlanModelRequest& r) {
  VTRAIN_ASSIGN_OR_RETURN(common::Connection c, common::Connect(flags));
  auto ctx = c.Context();
  auto reader = v1::Simulator::NewStub(c.channel)->PlanModel(ctx.get(), r);
  v1::PlanModelResponse msg;
  std::optional<v1::PlanModelResult> result;
  while (reader->Read(&msg)) {
    if (msg.has_result()) result = msg.result();
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return common::FromGrpc(s);
  if (!result) return absl::InternalError("the server sent no result");
  return *result;
}

std::string Describe(const v1::DesignedModel& d) {
  if (!d.fits()) {
    return absl::StrFormat("%d layers x hidden %d (%.2fB): no plan fits", d.model().num_layers(),
                           d.model().hidden_size(), d.parameters() / 1e9);
  }
  const v1::ParallelPlan& p = d.plan();
  return absl::StrFormat(
      "%d layers x hidden %d (%.2fB parameters), %.0fB tokens; t=%d d=%d p=%d mb=%d on %d GPUs; "
      "iteration %.0f ms, MFU %.1f%%; %.1f days (%.1f .. %.1f) with failures, %.1f without "
      "(goodput %.3f)%s",
      d.model().num_layers(), d.model().hidden_size(), d.parameters() / 1e9, d.tokens() / 1e9,
      p.tensor_parallel(), p.data_parallel(), p.pipeline_parallel(), p.micro_batch(), d.plan_gpus(),
      d.iteration_time_ms(), 100 * d.mfu(), d.days(), d.days_low(), d.days_high(),
      d.failure_free_days(), d.goodput(),
      d.cost_usd() > 0 ? absl::StrFormat(", $%.2fM", d.cost_usd() / 1e6) : "");
}

// The inverse question's answer; exit 1 when no count trains in time.
int PrintInverse(const v1::PlanModelResult& r, bool json, std::ostream& out) {
  const v1::InverseAnswer& a = r.inverse();
  if (json) {
    out << proto::ToJson(r);
  } else if (a.feasible()) {
    const v1::DesignedModel& d = a.model();
    const v1::ParallelPlan& q = d.plan();
    out << absl::StrFormat(
        "%d layers x hidden %d (%.2fB parameters) trains %.0fB tokens in %.1f days on %d GPUs "
        "(t=%d d=%d p=%d mb=%d, iteration %.0f ms; %.1f days without failures, goodput %.3f)%s\n",
        d.model().num_layers(), d.model().hidden_size(), d.parameters() / 1e9, d.tokens() / 1e9,
        d.days(), a.gpus(), q.tensor_parallel(), q.data_parallel(), q.pipeline_parallel(),
        q.micro_batch(), d.iteration_time_ms(), d.failure_free_days(), d.goodput(),
        d.cost_usd() > 0 ? absl::StrFormat(", $%.2fM", d.cost_usd() / 1e6) : "");
  } else {
    out << "infeasible: " << a.reason() << "\n";
  }
  return a.feasible() ? common::kExitOk : common::kExitFailure;
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
  flags.AddValue("family", "F",
                 "gpt (GPT-3 shapes, default) or llama (Llama 3 shapes: GQA, SwiGLU, untied)");
  flags.AddValue("dtype", "D", "fp16 (default), bf16 or fp8");
  flags.AddValue("attention-impl", "I",
                 "flash (default) or unfused (the paper's Megatron-LM, for its case study)");
  flags.AddValue("seq-len", "N", "sequence length (default 2048; llama 8192)");
  flags.AddValue("vocab", "N", "vocabulary (default 50257; llama 128256)");
  flags.AddValue("global-batch", "N", "global batch in sequences (default 1680; llama 2048)");
  flags.AddValue("min-params", "N", "smallest candidate (default 1e9)");
  flags.AddValue("max-params", "N", "largest candidate (default 1e12)");
  flags.AddValue("max-tp", "N", "tensor-parallel degrees 1, 2, 4, ... up to N (default 8)");
  flags.AddValue("tp-values", "A,B,..", "tensor-parallel degrees to search (default 1,2,4,8)");
  AddTrainingSpaceFlags(flags);
  flags.AddValue("params", "N", "the inverse question: a model of about N parameters ...");
  flags.AddValue("tokens", "T", "... training T tokens within --days: the fewest GPUs");
  flags.AddValue("plot", "FILE.svg", "draw tokens trainable in the budget against model size");
  flags.AddSwitch("json", "print the vtrain.v1.PlanModelResult as JSON");
  flags.AddSwitch("csv", "print every candidate as CSV");
  common::AddLocalOrServerFlags(flags, "plan in this process (the default without --server)");
  flags.AddSwitch("help", "show this help");
  if (std::optional<int> done =
          ParseCommandLine(flags, args, "plan-model", kPlanModelHelp, out, err)) {
    return *done;
  }
  if (absl::Status s = common::CheckLocalOrServer(flags); !s.ok())
    return Fail(err, "plan-model", s);
  absl::StatusOr<v1::PlanModelRequest> request = PlanRequestFromFlags(flags);
  if (!request.ok()) return Fail(err, "plan-model", request.status());
  absl::StatusOr<v1::PlanModelResult> r =
      flags.Has("server") ? PlanRemotely(flags, *request)
                          : service::PlanModel(*request, service::BuiltinProfiles());
  if (!r.ok()) return Fail(err, "plan-model", r.status());
  if (auto plot = flags.Get("plot")) {
    // Tokens trainable in the budget (billions) against parameters (billions),
    // the compute-optimal line D = k N, and both answers as vertical marks.
    const double k = request->tokens_per_parameter() > 0 ? request->tokens_per_parameter() : 20;
    Series trainable{"tokens trainable in the budget", {}, false};
    Series optimal_line{absl::StrCat("D = ", k, " N"), {}, false};
    for (const v1::DesignedModel& d : r->candidates()) {
      if (d.fits()) trainable.points.emplace_back(d.parameters() / 1e9, d.budget_tokens() / 1e9);
      optimal_line.points.emplace_back(d.parameters() / 1e9, d.tokens() / 1e9);
    }
    std::vector<Series> series = {trainable, optimal_line};
    auto mark = [&](const char* name, const v1::DesignedModel& d) {
      series.push_back({absl::StrFormat("%s: %.2fB", name, d.parameters() / 1e9),
                        {{d.parameters() / 1e9, 0}, {d.parameters() / 1e9, d.tokens() / 1e9}},
                        false});
    };
    if (r->has_naive()) mark("naive", r->naive());
    if (r->has_optimal()) mark("compute-optimal", r->optimal());
    if (absl::Status s =
            common::WriteFile(*plot, LinesSvg(series, "Compute-optimal model within the budget",
                                              "parameters (billions)", "tokens (billions)"));
        !s.ok()) {
      return Fail(err, "plan-model", s);
    }
  }
  for (const std::string& w : r->warnings()) err << "WARNING: " << w << "\n";
  if (r->has_inverse()) return PrintInverse(*r, flags.Switch("json"), out);
  if (flags.Switch("json")) {
    out << proto::ToJson(*r);
  } else if (flags.Switch("csv")) {
    out << "num_layers,hidden_size,parameters,fits,gpus,tensor_parallel,data_parallel,"
           "pipeline_parallel,iteration_time_ms,mfu,budget_tokens,tokens,days\n";
    for (const v1::DesignedModel& d : r->candidates()) {
      out << absl::StrFormat(
          "%d,%d,%.6g,%d,%d,%d,%d,%d,%.3f,%.4f,%.6g,%.6g,%.3f\n", d.model().num_layers(),
          d.model().hidden_size(), d.parameters(), d.fits(), d.plan_gpus(),
          d.plan().tensor_parallel(), d.plan().data_parallel(), d.plan().pipeline_parallel(),
          d.iteration_time_ms(), d.mfu(), d.budget_tokens(), d.tokens(), d.days());
    }
  } else {
    out << absl::StrFormat("naive (every GPU at its peak): %.2fB parameters on %.0fB tokens\n",
                           r->naive_estimate_parameters() / 1e9, r->naive_estimate_tokens() / 1e9);
    if (r->has_naive()) out << "  as planned by vtrain: " << Describe(r->naive()) << "\n";
    if (r->has_optimal()) {
      out << "compute-optimal within the budget: " << Describe(r->optimal()) << "\n";
    } else {
      out << "no candidate trains its compute-optimal tokens within the budget\n";
    }
    out << SimulationLine(r->simulation());
  }
  // No answer is a failure, as a search with no plan is (the JSON says so too).
  return r->has_optimal() ? common::kExitOk : common::kExitFailure;
}

}  // namespace vtrain::client
