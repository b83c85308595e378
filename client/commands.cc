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
      return absl::Status(s.code(), absl::StrCat(m, ". --", name, " is Megatron-LM's: here it is ",
                                                  n.vtrainctl, "; a whole launch script is read "
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

int RunPredict(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl predict");
  common::AddLocalOrServerFlags(
      flags, "run the simulation in this process (the default without --server)");
  flags.AddValue("profile-set", "ID", "--server: predict with this profile set (default: newest)");
  AddJobFlags(flags);
  flags.AddValue("tokens", "N", "tokens to train on, e.g. 270e9: adds training time and cost");
  flags.AddValue("granularity", "G", "operator (fast, default) or kernel");
  flags.AddValue("max-tasks", "N", "refuse graphs with more tasks (default 100000000)");
  flags.AddSwitch("json", "print the prediction as JSON");
  flags.AddSwitch("show-lookups", "list every profile lookup with its fidelity");
  flags.AddSwitch("print-flags", "print the job as vtrainctl flags (e.g. of --megatron-args) and stop");
  flags.AddSwitch("help", "show this help");
  if (std::optional<int> done = ParseCommandLine(flags, args, "predict", kPredictHelp, out, err)) {
    return *done;
  }
  if (absl::Status s = common::CheckLocalOrServer(flags); !s.ok()) return Fail(err, "predict", s);
  std::vector<std::string> notes;
  absl::StatusOr<v1::PredictRequest> request = RequestFromFlags(flags, &notes);
  if (!request.ok()) return Fail(err, "predict", request.status());
  for (const std::string& note : notes) err << "megatron-args: " << note << "\n";
  if (flags.Switch("print-flags")) {
    out << FlagsOf(*request) << "\n";
    return common::kExitOk;
  }
  if (auto g = flags.Get("granularity")) {
    absl::StatusOr<Granularity> granularity = ParseGranularity(*g);
    if (!granularity.ok()) return Fail(err, "predict", granularity.status());
    request->set_granularity(proto::ToProto(*granularity));
  }
  absl::StatusOr<std::optional<int64_t>> max_tasks =
      flags.GetIntIn("max-tasks", 1, int64_t{1} << 40);
  if (!max_tasks.ok()) return Fail(err, "predict", max_tasks.status());
  absl::StatusOr<std::optional<double>> tokens = flags.GetDouble("tokens");
  if (!tokens.ok()) return Fail(err, "predict", tokens.status());
  if (*tokens) {
    if (!(**tokens > 0)) {
      return Fail(err, "predict",
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
  if (!response.ok()) return Fail(err, "predict", response.status());
  if (flags.Switch("json")) {
    out << proto::ToJson(*response);
    return common::kExitOk;
  }
  absl::StatusOr<std::string> table = PredictionTable(*response, flags.Switch("show-lookups"));
  if (!table.ok()) return Fail(err, "predict", table.status());
  out << *table;
  return common::kExitOk;
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
