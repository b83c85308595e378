#include "client/commands.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/job_flags.h"
#include "client/prediction_format.h"
#include "common/connection.h"
#include "common/flag_parser.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "core/util/status_macros.h"
#include "proto/enum_convert.h"
#include "proto/job_convert.h"
#include "proto/json.h"
#include "proto/prediction_convert.h"
#include "proto/profile_set_convert.h"
#include "service/service.h"

namespace vtrain::client {
namespace {

// Every subcommand: the dispatch table, and the usage list made from it.
struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>&, std::ostream&, std::ostream&);
};
constexpr Command kCommands[] = {
    {"predict", "simulate one training iteration of a model, plan and cluster", RunPredict},
    {"explain", "a measured step time against the prediction: why it differs, ranked", RunExplain},
    {"presets", "list the model presets and GPU models", RunPresets},
    {"compare", "two or more plans side by side, the differences marked", RunCompare},
    {"search", "find the fastest or cheapest parallel plan (and the time/cost frontier)",
     RunSearch},
    {"curve", "throughput against GPU count (best or data-parallel plans), for schedulers",
     RunCurve},
    {"cluster-sim",
     "replay a job trace on a shared cluster: elastic scheduling with and without vtrain's "
     "plans (the paper's scheduling case study)",
     RunClusterSim},
    {"plan-model", "the compute-optimal model for a budget of GPUs and days", RunPlanModel},
    {"trace", "write the simulated iteration as a Chrome trace / Perfetto JSON file", RunTrace},
    {"profiles", "list, show, push, pull and delete a server's profile sets", RunProfiles},
    {"bench", "load-test a vtrain-server on loopback (throughput, p50/p99)", RunBench},
    {"validate", "compare predictions with measured iteration times (MAPE, R^2)", RunValidate},
    {"calibrate", "fit the analytical model to measured runs; cross-validated error", RunCalibrate},
};

std::string Usage() {
  std::string out =
      "vtrainctl: predict the iteration time, training time and cost of LLM training\n"
      "\n"
      "usage: vtrainctl COMMAND [flags]\n"
      "\n"
      "commands:\n";
  for (const Command& c : kCommands) {
    absl::StrAppend(&out, absl::StrFormat("  %-12s %s\n", c.name, c.summary));
  }
  absl::StrAppend(&out, absl::StrFormat("  %-12s %s\n", "help", "show this message"),
                  "\n'vtrainctl COMMAND --help' shows the flags of a command.\n");
  return out;
}

constexpr char kPredictHelp[] =
    "usage: vtrainctl predict [--local | --server HOST:PORT] --model PRESET --gpus N\n"
    "                         --global-batch N [flags]\n"
    "\n"
    "Simulates one training iteration in-process on the built-in profiles (or asks a\n"
    "vtrain-server, which uses its newest profile set for the GPU) and\n"
    "prints the iteration time, its per-stage breakdown, MFU, throughput and,\n"
    "with --tokens, the training time and cost.\n"
    "\n"
    "examples:\n"
    "  vtrainctl predict --local --model gpt3-175b --gpus 512 --tp 8 --pp 16 \\\n"
    "      --micro-batch 6 --global-batch 1536 --tokens 300e9 --price-usd-per-gpu-hour 4.096\n"
    "  vtrainctl predict --local --layers 24 --hidden 2048 --heads 16 --seq-len 1024 \\\n"
    "      --gpus 8 --tp 2 --global-batch 64 --json\n"
    "\n"
    "flags:\n";

}  // namespace

int Fail(std::ostream& err, absl::string_view command, const absl::Status& status) {
  err << "vtrainctl " << command << ": " << status.message() << "\n";
  return common::ExitCodeFor(status);
}

namespace {

// Megatron-LM's names for vtrainctl's flags: an unknown flag that is one
// gets a hint (the flag to use, and --megatron-args for a whole launch).
constexpr struct {
  absl::string_view megatron, vtrainctl;
} kMegatronNames[] = {
    {"tensor-model-parallel-size", "--tp"},
    {"pipeline-model-parallel-size", "--pp"},
    {"context-parallel-size", "--cp"},
    {"expert-model-parallel-size", "--ep"},
    {"expert-tensor-parallel-size", "--etp"},
    {"num-layers", "--layers"},
    {"hidden-size", "--hidden"},
    {"ffn-hidden-size", "--ffn"},
    {"num-attention-heads", "--heads"},
    {"num-query-groups", "--kv-heads"},
    {"seq-length", "--seq-len"},
    {"vocab-size", "--vocab"},
    {"micro-batch-size", "--micro-batch"},
    {"global-batch-size", "--global-batch"},
    {"num-layers-per-virtual-pipeline-stage", "--virtual-stages (chunks per stage)"},
    {"bf16", "--dtype bf16"},
    {"fp16", "--dtype fp16"},
    {"fp8-format", "--dtype fp8"},
    {"recompute-granularity", "--recompute"},
    {"use-distributed-optimizer", "--data-parallel-sharding optimizer"},
    {"overlap-grad-reduce", "--gradient-bucketing on"},
    {"sequence-parallel", "--sequence-parallel on"},
    {"num-experts", "--num-experts"},
    {"moe-router-topk", "--moe-top-k"},
    {"moe-token-dispatcher-type", "--moe-dispatcher"},
};

absl::Status WithMegatronHint(absl::Status s) {
  constexpr absl::string_view kUnknown = "unknown flag --";
  const absl::string_view m = s.message();
  const size_t at = m.find(kUnknown);
  if (at == absl::string_view::npos) return s;
  absl::string_view name = m.substr(at + kUnknown.size());
  name = name.substr(0, name.find(' '));
  for (const auto& n : kMegatronNames) {
    if (n.megatron == name) {
      return absl::Status(
          s.code(), absl::StrCat(m, ". --", name, " is Megatron-LM's: here it is ", n.vtrainctl,
                                 "; a whole launch script is read "
                                 "with --megatron-args FILE"));
    }
  }
  return s;
}

}  // namespace

std::optional<int> ParseCommandLine(common::FlagParser& flags, const std::vector<std::string>& args,
                                    absl::string_view command, absl::string_view help,
                                    std::ostream& out, std::ostream& err) {
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(err, command, WithMegatronHint(s));
  if (flags.Switch("help")) {
    out << help << flags.Usage();
    return common::kExitOk;
  }
  return std::nullopt;
}

namespace {

constexpr char kExplainHelp[] =
    "usage: vtrainctl explain [--local | --server HOST:PORT] JOB FLAGS --measured-ms X\n"
    "\n"
    "Why is my run slower (or faster) than predicted? Predicts the job (flags,\n"
    "-f, or --megatron-args), places the measured step time against the\n"
    "prediction's 90% interval, shows where the predicted time goes, and ranks\n"
    "the single setting changes that move the prediction toward the measurement\n"
    "(an overlap off, another recomputation, dispatcher or fp8 recipe, the\n"
    "kernels at the edges of their fitted band), closest first.\n"
    "\n"
    "example:\n"
    "  vtrainctl explain --model llama3-70b --gpu h100-sxm5-80gb --gpus 64 --tp 4 \\\n"
    "      --pp 4 --cp 2 --virtual-stages 5 --global-batch 128 --dtype fp8 --measured-ms 12100\n"
    "\n"
    "flags:\n";

// The explanation of a response, for people.
std::string ExplanationTable(const v1::PredictResponse& r) {
  const v1::Explanation& e = r.explanation();
  const double diff = 100 * (e.measured_ms() / e.predicted_ms() - 1);
  std::string out = absl::StrFormat(
      "measured  %.1f ms against %.1f ms predicted (%+.1f%%): %s the 90%% interval %.1f .. %.1f "
      "ms\n",
      e.measured_ms(), e.predicted_ms(), diff, e.position(), r.interval().low_ms(),
      r.interval().high_ms());
  // Where the predicted time goes: the slowest stage's parts.
  const v1::StageBreakdown* worst = nullptr;
  for (const v1::StageBreakdown& s : r.stages()) {
    const double busy =
        s.compute_ms() + s.tensor_parallel_ms() + s.context_parallel_ms() + s.expert_parallel_ms();
    if (worst == nullptr || busy > worst->compute_ms() + worst->tensor_parallel_ms() +
                                       worst->context_parallel_ms() + worst->expert_parallel_ms()) {
      worst = &s;
    }
  }
  if (worst != nullptr) {
    const double total = r.iteration_time_ms();
    auto part = [total](const char* name, double ms) {
      return ms > 0 ? absl::StrFormat(", %s %.0f ms (%.0f%%)", name, ms, 100 * ms / total) : "";
    };
    absl::StrAppend(
        &out, "predicted stage ", worst->stage(), ":",
        part("compute", worst->compute_ms()).substr(1),
        part("exposed TP", worst->tensor_parallel_ms()), part("CP", worst->context_parallel_ms()),
        part("EP", worst->expert_parallel_ms()), part("PP", worst->pipeline_exposed_ms()),
        part("DP", worst->data_parallel_exposed_ms()), part("bubble and waiting", worst->idle_ms()),
        "\n");
    const double recompute = r.hardware_flops_per_iteration() - r.model_flops_per_iteration();
    if (recompute > 0) {
      absl::StrAppend(&out, absl::StrFormat("recomputation adds %.0f%% to the model's FLOPs (%s)\n",
                                            100 * recompute / r.model_flops_per_iteration(),
                                            EnumName(r.plan().recompute())));
    }
  }
  if (e.toward_size() == 0) {
    absl::StrAppend(&out, "no single setting change moves the prediction toward the measurement (",
                    e.away(), " tried)\n");
    return out;
  }
  absl::StrAppend(&out,
                  "settings that move the prediction toward the measurement, closest first:\n");
  int rank = 0;
  for (const v1::Explanation::Candidate& c : e.toward()) {
    absl::StrAppend(&out, absl::StrFormat("  %2d. %-62s %10.1f ms  closes %3.0f%% of the gap%s\n",
                                          ++rank, c.change(), c.iteration_time_ms(),
                                          100 * c.closes(), c.fits() ? "" : " (out of memory)"));
  }
  absl::StrAppend(&out, "(", e.away(), " other changes moved it away or changed nothing)\n");
  return out;
}

int RunPredictOrExplain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                        bool explain) {
  const char* name = explain ? "explain" : "predict";
  common::FlagParser flags(absl::StrCat("vtrainctl ", name));
  common::AddLocalOrServerFlags(
      flags, "run the simulation in this process (the default without --server)");
  flags.AddValue("profile-set", "ID", "--server: predict with this profile set (default: newest)");
  AddJobFlags(flags);
  flags.AddValue("tokens", "N", "tokens to train on, e.g. 270e9: adds training time and cost");
  flags.AddValue("granularity", "G", "operator (fast, default) or kernel");
  flags.AddValue("max-tasks", "N", "refuse graphs with more tasks (default 100000000)");
  flags.AddSwitch("json", "print the prediction as JSON");
  flags.AddSwitch("show-lookups", "list every profile lookup with its fidelity");
  flags.AddSwitch("print-flags",
                  "print the job as vtrainctl flags (e.g. of --megatron-args) and stop");
  flags.AddValue("measured-ms", "X",
                 explain ? "the measured step time in ms (required)"
                         : "a measured step time in ms: also explain the difference (as explain)");
  flags.AddSwitch("help", "show this help");
  if (std::optional<int> done =
          ParseCommandLine(flags, args, name, explain ? kExplainHelp : kPredictHelp, out, err)) {
    return *done;
  }
  absl::StatusOr<std::optional<double>> measured = flags.GetDouble("measured-ms");
  if (!measured.ok()) return Fail(err, name, measured.status());
  if (explain && !measured->has_value()) {
    return Fail(err, name,
                absl::InvalidArgumentError(
                    "--measured-ms is required: the step time your run measured, in ms"));
  }
  if (absl::Status s = common::CheckLocalOrServer(flags); !s.ok()) return Fail(err, name, s);
  std::vector<std::string> notes;
  absl::StatusOr<v1::PredictRequest> request = RequestFromFlags(flags, &notes);
  if (!request.ok()) return Fail(err, name, request.status());
  const char* source =
      flags.Has("megatron-bridge-config") ? "megatron-bridge-config" : "megatron-args";
  for (const std::string& note : notes) err << source << ": " << note << "\n";
  if (flags.Switch("print-flags")) {
    out << FlagsOf(*request) << "\n";
    return common::kExitOk;
  }
  if (*measured) request->set_measured_ms(**measured);
  if (auto g = flags.Get("granularity")) {
    absl::StatusOr<Granularity> granularity = ParseGranularity(*g);
    if (!granularity.ok()) return Fail(err, name, granularity.status());
    request->set_granularity(proto::ToProto(*granularity));
  }
  absl::StatusOr<std::optional<int64_t>> max_tasks =
      flags.GetIntIn("max-tasks", 1, int64_t{1} << 40);
  if (!max_tasks.ok()) return Fail(err, name, max_tasks.status());
  absl::StatusOr<std::optional<double>> tokens = flags.GetDouble("tokens");
  if (!tokens.ok()) return Fail(err, name, tokens.status());
  if (*tokens) {
    if (!(**tokens > 0)) {
      return Fail(err, name,
                  absl::InvalidArgumentError("--tokens must be a positive number, e.g. 270e9"));
    }
    request->set_train_tokens(**tokens);
  }
  if (auto id = flags.Get("profile-set")) {
    if (!flags.Has("server")) {
      return Fail(
          err, "predict",
          absl::InvalidArgumentError("--profile-set names a server's set; give --server too"));
    }
    request->set_profile_set_id(*id);
  }
  if (max_tasks->has_value() && flags.Has("server")) {
    return Fail(
        err, "predict",
        absl::InvalidArgumentError("--max-tasks bounds a local run; a server applies its own"));
  }
  service::CallOptions local;
  local.max_tasks = max_tasks->value_or(service::kDefaultMaxTasks);
  absl::StatusOr<v1::PredictResponse> response =
      flags.Has("server") ? PredictRemotely(flags, *request)
                          : service::Predict(*request, service::BuiltinProfiles(), local);
  if (!response.ok()) return Fail(err, name, response.status());
  if (flags.Switch("json")) {
    out << proto::ToJson(*response);
    return common::kExitOk;
  }
  absl::StatusOr<std::string> table = PredictionTable(*response, flags.Switch("show-lookups"));
  if (!table.ok()) return Fail(err, name, table.status());
  if (response->has_explanation()) {
    // explain: the explanation first, then the prediction it explains.
    out << ExplanationTable(*response) << "\n";
  }
  out << *table;
  return common::kExitOk;
}

}  // namespace

int RunPredict(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return RunPredictOrExplain(args, out, err, /*explain=*/false);
}

int RunExplain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return RunPredictOrExplain(args, out, err, /*explain=*/true);
}

int RunVtrainctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << Usage();
    return common::kExitBadInput;
  }
  const std::string& command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const Command& c : kCommands) {
    if (command == c.name) return c.run(rest, out, err);
  }
  if (command == "help" || command == "--help" || command == "-h") {
    out << Usage();
    return common::kExitOk;
  }
  err << "vtrainctl: unknown command '" << command << "'\n\n" << Usage();
  return common::kExitBadInput;
}

}  // namespace vtrain::client
