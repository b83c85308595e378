// vtrainctl search: the best parallel plan for a model on a cluster.
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/job_flags.h"
#include "client/measurements.h"
#include "client/prediction_format.h"
#include "client/svg_plot.h"
#include "common/connection.h"
#include "common/flag_parser.h"
#include "core/plan/search.h"
#include "core/util/status_macros.h"
#include "proto/enum_convert.h"
#include "proto/json.h"
#include "proto/search_convert.h"
#include "service/service.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::client {
namespace {

constexpr char kSearchHelp[] =
    "usage: vtrainctl search --model PRESET --global-batch N (--gpus N | --max-gpus N) [flags]\n\n"
    "Enumerates tensor, data and pipeline degrees and micro-batch sizes, drops plans that do\n"
    "not fit in GPU memory, predicts the rest in parallel on all cores (operator fast path,\n"
    "built-in profiles), and prints the best plans by --objective and the Pareto frontier\n"
    "of training time against cost.\n\n"
    "examples:\n"
    "  vtrainctl search --model gpt3-175b --global-batch 1536 --gpus 512\n"
    "  vtrainctl search --model mtnlg-530b --global-batch 1920 --max-gpus 3360 \\\n"
    "      --tp-values 1,2,4,8,16 --max-dp 32 --tokens 270e9 \\\n"
    "      --price-usd-per-gpu-hour 4.096 --objective cost --top 10\n\n"
    "flags:\n";

// The request the flags describe; only parsing happens here (the space's
// defaults and validation are proto::SearchFromProto's, on either side).
absl::StatusOr<v1::SearchRequest> SearchRequestFromFlags(const common::FlagParser& f) {
  v1::SearchRequest r;
  VTRAIN_ASSIGN_OR_RETURN(*r.mutable_model(), ModelSpecFromFlags(f));
  VTRAIN_ASSIGN_OR_RETURN(*r.mutable_cluster(), ClusterSpecFromFlags(f));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> gb, f.GetInt("global-batch"));
  if (gb) r.set_global_batch(*gb);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> gpus, f.GetInt("gpus"));
  if (gpus) r.set_gpus(*gpus);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> max_gpus, f.GetInt("max-gpus"));
  if (max_gpus) r.set_max_gpus(*max_gpus);
  VTRAIN_ASSIGN_OR_RETURN(*r.mutable_space(), PlanSpaceFromFlags(f));
  if (auto d = f.Get("dtype")) {
    VTRAIN_ASSIGN_OR_RETURN(DType dtype, ParseDType(*d));
    r.set_dtype(proto::ToProto(dtype));
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> tokens, f.GetDouble("tokens"));
  if (tokens) {
    if (!(*tokens > 0)) return absl::InvalidArgumentError("--tokens must be positive");
    r.set_train_tokens(*tokens);
  }
  if (auto o = f.Get("objective")) {
    VTRAIN_ASSIGN_OR_RETURN(Objective objective, ParseObjective(*o));
    r.set_objective(proto::ToProto(objective));
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> deadline, f.GetDouble("deadline-days"));
  if (deadline) r.set_deadline_days(*deadline);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> top, f.GetInt("top"));
  if (top) {
    if (*top < 1 || *top > 1000) return absl::InvalidArgumentError("--top must be in [1, 1000]");
    r.set_top(static_cast<int32_t>(*top));
  }
  r.set_include_all_plans(f.Switch("csv") || f.Has("plot"));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> headroom, f.GetDouble("memory-headroom"));
  if (headroom) r.set_memory_headroom(*headroom);
  if (HasLaunch(f)) {
    // The launch's model, GPU count, batch and precision (the flags win);
    // its plan is what the search replaces.
    VTRAIN_ASSIGN_OR_RETURN(v1::PredictRequest launch, RequestFromFlags(f));
    *r.mutable_model() = launch.model();
    *r.mutable_cluster() = launch.cluster();
    r.mutable_cluster()->clear_num_gpus();
    if (!gpus && !max_gpus && launch.cluster().has_num_gpus())
      r.set_gpus(launch.cluster().num_gpus());
    if (!gb) r.set_global_batch(launch.plan().global_batch());
    if (!f.Has("dtype")) r.set_dtype(launch.plan().dtype());
  }
  return r;
}

// The server streams progress, then the result.
absl::StatusOr<v1::SearchResult> SearchRemotely(
    const common::FlagParser& flags, const v1::SearchRequest& request,
    const std::function<void(int64_t, int64_t)>& progress) {
  VTRAIN_ASSIGN_OR_RETURN(common::Connection c, common::Connect(flags));
  auto stub = v1::Simulator::NewStub(c.channel);
  auto ctx = c.Context();
  std::unique_ptr<grpc::ClientReader<v1::SearchResponse>> reader = stub->Search(ctx.get(), request);
  v1::SearchResponse msg;
  std::optional<v1::SearchResult> result;
  while (reader->Read(&msg)) {
    if (msg.has_progress() && progress)
      progress(msg.progress().evaluated(), msg.progress().total());
    if (msg.has_result()) result = msg.result();
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return common::FromGrpc(s);
  if (!result) return absl::InternalError("the server sent no search result");
  return *result;
}

// " c=2 V=2 sp ep=8 shard=optimizer layout=Et*3|...": the training options
// that are not plain.
std::string OptionsTag(const v1::ParallelPlan& q) {
  std::string out;
  if (q.context_parallel() > 1) absl::StrAppend(&out, " c=", q.context_parallel());
  if (q.virtual_stages() > 1) absl::StrAppend(&out, " V=", q.virtual_stages());
  if (q.sequence_parallel()) absl::StrAppend(&out, " sp");
  if (q.expert_parallel() > 1) absl::StrAppend(&out, " ep=", q.expert_parallel());
  if (q.expert_tensor_parallel() > 1) absl::StrAppend(&out, " etp=", q.expert_tensor_parallel());
  const DataParallelSharding sharding =
      proto::FromProto(q.data_parallel_sharding()).value_or(DataParallelSharding::kNone);
  if (sharding != DataParallelSharding::kNone) {
    absl::StrAppend(&out, " shard=", ShardingName(sharding));
  }
  if (!q.pipeline_layout().empty()) absl::StrAppend(&out, " layout=", q.pipeline_layout());
  return out;
}

// Which columns a plan line has: days and cost only when they were asked
// for (--tokens, and --price-usd-per-gpu-hour for the cost).
struct Columns {
  bool days = false;
  bool cost = false;
};

std::string PlanLine(const char* tag, const v1::PlanSummary& p, const Columns& columns) {
  const v1::ParallelPlan& q = p.plan();
  std::string out = absl::StrFormat(
      "%-7s t=%-3d d=%-4d p=%-4d mb=%-4d gpus=%-6d %-9s %-9s %12.1f ms %5.1f%% MFU", tag,
      q.tensor_parallel(), q.data_parallel(), q.pipeline_parallel(), q.micro_batch(), p.gpus(),
      ScheduleName(proto::FromProto(q.schedule()).value_or(PipelineSchedule::k1F1B)),
      RecomputeName(proto::FromProto(q.recompute()).value_or(Recompute::kFull)),
      p.iteration_time_ms(), 100 * p.mfu());
  // Failure-free / expected with failures, checkpoints and restarts.
  if (columns.days) {
    absl::StrAppend(&out,
                    absl::StrFormat(" %8.2f/%-8.2f days", p.training_days(), p.expected_days()));
  }
  if (columns.cost) {
    absl::StrAppend(&out, absl::StrFormat(" $%.0f/$%-12.0f", p.cost_usd(), p.expected_cost_usd()));
  }
  absl::StrAppend(
      &out, absl::StrFormat(" %6.1f GiB%s\n", p.peak_memory_bytes() / (1 << 30), OptionsTag(q)));
  return out;
}

std::string Csv(const v1::SearchResult& r) {
  std::string out =
      "tensor_parallel,data_parallel,pipeline_parallel,micro_batch,gpus,schedule,recompute,"
      "iteration_time_ms,training_days,cost_usd,peak_memory_gib,pareto,context_parallel,"
      "virtual_stages,sequence_parallel,data_parallel_sharding,mfu,expected_days,"
      "expected_cost_usd,goodput\n";
  for (const v1::PlanSummary& p : r.plans()) {
    const v1::ParallelPlan& q = p.plan();
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "%d,%d,%d,%d,%d,%s,%s,%.3f,%.4f,%.2f,%.2f,%d,%d,%d,%d,%s,%.4f,%.4f,%.2f,%.4f\n",
            q.tensor_parallel(), q.data_parallel(), q.pipeline_parallel(), q.micro_batch(),
            p.gpus(),
            ScheduleName(proto::FromProto(q.schedule()).value_or(PipelineSchedule::k1F1B)),
            RecomputeName(proto::FromProto(q.recompute()).value_or(Recompute::kFull)),
            p.iteration_time_ms(), p.training_days(), p.cost_usd(),
            p.peak_memory_bytes() / (1 << 30), p.pareto(),
            std::max<int64_t>(1, q.context_parallel()), std::max<int64_t>(1, q.virtual_stages()),
            q.sequence_parallel() ? 1 : 0,
            ShardingName(
                proto::FromProto(q.data_parallel_sharding()).value_or(DataParallelSharding::kNone)),
            p.mfu(), p.expected_days(), p.expected_cost_usd(), p.goodput()));
  }
  return out;
}

absl::Status Plot(const std::string& path, const v1::SearchRequest& req,
                  const v1::SearchResult& r) {
  if (req.train_tokens() <= 0 || req.cluster().price_usd_per_gpu_hour() <= 0) {
    return absl::InvalidArgumentError("--plot needs --tokens and --price-usd-per-gpu-hour");
  }
  std::vector<PlanPoint> points;
  for (const v1::PlanSummary& p : r.plans()) {
    const v1::ParallelPlan& q = p.plan();
    PlanPoint pt;
    // Expected, with failures: what the cost objective ranks by.
    pt.days = p.expected_days();
    pt.cost_usd = p.expected_cost_usd();
    pt.label = absl::StrFormat("t=%d d=%d p=%d mb=%d, %d GPUs: %.2f days, $%.0f expected",
                               q.tensor_parallel(), q.data_parallel(), q.pipeline_parallel(),
                               q.micro_batch(), p.gpus(), p.expected_days(), p.expected_cost_usd());
    pt.frontier = p.pareto();
    pt.chosen = p.best();
    points.push_back(pt);
  }
  const std::string model = req.model().preset().empty() ? "custom" : req.model().preset();
  const std::string title =
      absl::StrFormat("%s: %d plans that fit (of %d)", model, r.plans_size(), r.considered());
  return common::WriteFile(path, TimeVsCostSvg(points, title));
}

}  // namespace

namespace {

void AddSearchFlags(common::FlagParser& flags) {
  AddModelFlags(flags);
  AddClusterFlags(flags);
  flags.AddValue("gpus", "N", "exactly N GPUs");
  flags.AddValue("max-gpus", "N", "at most N GPUs");
  flags.AddValue("dtype", "T", "fp16, bf16 or fp8 (default fp16)");
  flags.AddValue("global-batch", "N", "global batch in sequences");
  flags.AddValue("megatron-args", "FILE|-",
                 "the model, GPU count, batch and precision of a Megatron-LM launch (the other "
                 "flags win; docs/megatron.md)");
  flags.AddValue("megatron-bridge-config", "FILE|-",
                 "the same from a Megatron-Bridge ConfigContainer YAML dump");
  flags.AddValue("tokens", "N", "tokens to train on (training days and cost)");
  flags.AddValue("tp-values", "A,B,..", "tensor-parallel degrees (default 1,2,4,...,2x node)");
  flags.AddValue("max-dp", "N", "largest data-parallel degree");
  flags.AddValue("max-micro-batch", "N", "largest micro-batch");
  flags.AddValue("schedule-values", "S,..",
                 "pipeline schedules to try: gpipe, 1f1b, zb-h1, dualpipe, dualpipev (default "
                 "1f1b)");
  flags.AddValue("schedules", "S,..", "the same as --schedule-values");
  AddTrainingSpaceFlags(flags);
  flags.AddValue("objective", "O", "time (default), cost, deadline-cost, deadline-gpus");
  flags.AddValue("deadline-days", "D", "for the deadline objectives");
  flags.AddValue(
      "memory-headroom", "F",
      "fraction of GPU memory a plan must leave free to count as fitting (default 0.03)");
  flags.AddValue("top", "N", "plans to list (default 10)");
  flags.AddValue("threads", "N", "parallel predictions (default: all cores)");
  flags.AddValue("plot", "FILE.svg", "draw training time against cost, frontier and choice marked");
  flags.AddSwitch("csv", "print every plan that fits as CSV");
  flags.AddSwitch("json", "print the result as JSON");
  common::AddLocalOrServerFlags(flags, "search in this process (the default without --server)");
  flags.AddSwitch("help", "show this help");
}

}  // namespace

int RunSearch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl search");
  AddSearchFlags(flags);
  if (std::optional<int> done = ParseCommandLine(flags, args, "search", kSearchHelp, out, err)) {
    return *done;
  }
  if (absl::Status s = common::CheckLocalOrServer(flags); !s.ok()) return Fail(err, "search", s);
  absl::StatusOr<v1::SearchRequest> request = SearchRequestFromFlags(flags);
  if (!request.ok()) return Fail(err, "search", request.status());
  absl::StatusOr<int> threads = flags.GetThreads();
  if (!threads.ok()) return Fail(err, "search", threads.status());
  // A progress bar on a terminal.
  std::mutex progress_mu;
  std::function<void(int64_t, int64_t)> progress;
  if (isatty(STDERR_FILENO)) {
    progress = [&](int64_t done, int64_t total) {
      if (done % 64 != 0 && done != total) return;
      std::lock_guard<std::mutex> lock(progress_mu);
      const int width = 40;
      const int filled = static_cast<int>(width * done / std::max<int64_t>(1, total));
      err << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done
          << "/" << total << (done == total ? "\n" : "") << std::flush;
    };
  }
  service::CallOptions local;
  local.threads = *threads;
  local.progress = progress;
  absl::StatusOr<v1::SearchResult> r =
      flags.Has("server") ? SearchRemotely(flags, *request, progress)
                          : service::Search(*request, service::BuiltinProfiles(), local);
  if (!r.ok()) return Fail(err, "search", r.status());
  // Caveats go to stderr whatever the format, so that a script sees them too.
  for (const std::string& w : r->warnings()) err << "WARNING: " << w << "\n";

  if (auto plot = flags.Get("plot")) {
    if (absl::Status s = Plot(*plot, *request, *r); !s.ok()) return Fail(err, "search", s);
  }
  // No plan is an answer, not a success: the reason goes to stderr and the
  // exit code is 1, whatever the format.
  auto done = [&]() {
    if (r->has_best()) return common::kExitOk;
    err << "vtrainctl search: no plan: "
        << (r->no_plan_reason().empty() ? "no plan meets the objective" : r->no_plan_reason())
        << "\n";
    return common::kExitFailure;
  };
  if (flags.Switch("json")) {
    out << proto::ToJson(*r);
    return done();
  }
  if (flags.Switch("csv")) {
    out << Csv(*r);
    return done();
  }
  for (const std::string& w : r->warnings()) out << "WARNING: " << w << "\n\n";
  // What each stage pruned: Megatron's rules, the memory model (before any
  // simulation), then the predictions.
  out << absl::StrFormat(
             "%d points of the space: %d not valid plans, %d plans considered, %d out of memory "
             "(dropped before simulating), %d predicted\n",
             r->invalid() + r->considered(), r->invalid(), r->considered(), r->out_of_memory(),
             r->evaluated())
      << SimulationLine(r->simulation()) << "\n";
  const Columns columns{
      .days = request->train_tokens() > 0,
      .cost = request->train_tokens() > 0 && request->cluster().price_usd_per_gpu_hour() > 0};
  if (columns.days) {
    out << "days and cost: failure-free/expected with failures, checkpoints and restarts\n";
  }
  if (r->has_best()) {
    out << PlanLine("best", r->best(), columns);
  } else {
    out << "no plan meets the objective\n";
  }
  if (r->fastest_size() > 0) {
    out << "\nfastest plans:\n";
    for (const v1::PlanSummary& p : r->fastest()) out << PlanLine("", p, columns);
  }
  if (r->pareto_size() > 1) {
    out << "\nPareto frontier (training time against cost):\n";
    for (const v1::PlanSummary& p : r->pareto()) out << PlanLine("", p, columns);
  }
  return done();
}

}  // namespace vtrain::client
