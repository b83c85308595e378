// vtrainctl search: the best parallel plan for a model on a cluster.
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/flag_parser.h"
#include "client/job_flags.h"
#include "client/json_writer.h"
#include "client/remote.h"
#include "proto/convert.h"
#include "vtrain/v1/vtrain.grpc.pb.h"
#include "client/measurements.h"
#include "client/svg_plot.h"
#include "core/plan/search.h"
#include "core/profile/default_profiles.h"
#include "core/util/status_macros.h"

namespace vtrain::cli {
namespace {

constexpr char kHelp[] =
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

absl::StatusOr<SearchSpace> SpaceFromFlags(const FlagParser& f) {
  SearchSpace s;
  if (auto preset = f.Get("model")) {
    VTRAIN_ASSIGN_OR_RETURN(s.model, ModelPreset(*preset));
  } else {
    return absl::InvalidArgumentError("--model PRESET is required");
  }
  VTRAIN_ASSIGN_OR_RETURN(s.cluster, ClusterFromFlags(f));
  if (s.cluster.price_usd_per_gpu_hour < 0 || s.cluster.gpus_per_node < 1 ||
      s.cluster.gpus_per_node > 1024) {
    return absl::InvalidArgumentError(
        "--price-usd-per-gpu-hour must be >= 0 and --gpus-per-node in [1, 1024]");
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> gb, f.GetInt("global-batch"));
  if (!gb || *gb <= 0) return absl::InvalidArgumentError("--global-batch N (> 0) is required");
  s.global_batch = *gb;
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> gpus, f.GetInt("gpus"));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> max_gpus, f.GetInt("max-gpus"));
  if (!gpus && !max_gpus) return absl::InvalidArgumentError("give --gpus N or --max-gpus N");
  s.gpus = gpus.value_or(0);
  s.max_gpus = max_gpus.value_or(0);
  if (s.gpus < 0 || s.max_gpus < 0 || s.gpus > (1 << 24) || s.max_gpus > (1 << 24)) {
    return absl::InvalidArgumentError("--gpus and --max-gpus must be between 1 and 16777216");
  }
  if (auto tps = f.Get("tp-values")) {
    for (absl::string_view v : absl::StrSplit(*tps, ',', absl::SkipEmpty())) {
      int64_t t = 0;
      if (!absl::SimpleAtoi(v, &t) || t < 1 || t > 1024) {
        return absl::InvalidArgumentError(absl::StrCat("--tp-values: '", v, "' is not a degree"));
      }
      s.tensor_parallel.push_back(t);
    }
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> max_dp, f.GetInt("max-dp"));
  s.max_data_parallel = max_dp.value_or(0);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> max_mb, f.GetInt("max-micro-batch"));
  s.max_micro_batch = max_mb.value_or(0);
  if (auto sch = f.Get("schedules")) {
    s.schedules.clear();
    for (absl::string_view v : absl::StrSplit(*sch, ',', absl::SkipEmpty())) {
      VTRAIN_ASSIGN_OR_RETURN(PipelineSchedule x, ParseSchedule(v));
      s.schedules.push_back(x);
    }
  }
  if (auto rc = f.Get("recompute-values")) {
    s.recomputes.clear();
    for (absl::string_view v : absl::StrSplit(*rc, ',', absl::SkipEmpty())) {
      VTRAIN_ASSIGN_OR_RETURN(Recompute x, ParseRecompute(v));
      s.recomputes.push_back(x);
    }
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> tokens, f.GetDouble("tokens"));
  if (tokens) {
    if (*tokens <= 0) return absl::InvalidArgumentError("--tokens must be positive");
    s.train_tokens = *tokens;
  }
  return s;
}

void PlanJson(JsonWriter& w, const PlanResult& p) {
  w.BeginObject();
  w.Key("tensor_parallel").Int(p.job.plan.tensor_parallel);
  w.Key("data_parallel").Int(p.job.plan.data_parallel);
  w.Key("pipeline_parallel").Int(p.job.plan.pipeline_parallel);
  w.Key("micro_batch").Int(p.job.plan.micro_batch);
  w.Key("gpus").Int(p.job.cluster.num_gpus);
  w.Key("schedule").String(ScheduleName(p.job.plan.schedule));
  w.Key("recompute").String(RecomputeName(p.job.plan.recompute));
  w.Key("iteration_time_ms").Double(p.iteration_time_ms);
  w.Key("training_days").Double(p.training_days);
  w.Key("cost_usd").Double(p.cost_usd);
  w.Key("peak_memory_gib").Double(p.peak_memory_bytes / (1 << 30));
  w.EndObject();
}

}  // namespace

int RunSearch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags("vtrainctl search");
  flags.AddValue("model", "PRESET", "model preset");
  flags.AddValue("gpu", "NAME", "GPU model (default a100-sxm4-80gb)");
  flags.AddValue("gpus", "N", "exactly N GPUs");
  flags.AddValue("max-gpus", "N", "at most N GPUs");
  flags.AddValue("gpus-per-node", "N", "GPUs per node (default 8)");
  flags.AddValue("intra-node-bandwidth", "BW", "per-GPU NVLink bandwidth, e.g. 150GB/s");
  flags.AddValue("inter-node-bandwidth", "BW", "per-node network bandwidth, e.g. 800Gb/s");
  flags.AddValue("price-usd-per-gpu-hour", "USD", "price of a GPU-hour");
  flags.AddValue("global-batch", "N", "global batch in sequences");
  flags.AddValue("tokens", "N", "tokens to train on (training days and cost)");
  flags.AddValue("tp-values", "A,B,..", "tensor-parallel degrees (default 1,2,4,...,2x node)");
  flags.AddValue("max-dp", "N", "largest data-parallel degree");
  flags.AddValue("max-micro-batch", "N", "largest micro-batch");
  flags.AddValue("schedules", "S,..", "gpipe,1f1b (default 1f1b)");
  flags.AddValue("recompute-values", "R,..", "none,full (default full)");
  flags.AddValue("objective", "O", "time (default), cost, deadline-cost, deadline-gpus");
  flags.AddValue("deadline-days", "D", "for the deadline objectives");
  flags.AddValue("top", "N", "plans to list (default 10)");
  flags.AddValue("threads", "N", "parallel predictions (default: all cores)");
  flags.AddValue("plot", "FILE.svg", "draw training time against cost, frontier and choice marked");
  flags.AddSwitch("csv", "print every plan that fits as CSV");
  flags.AddSwitch("json", "print the result as JSON");
  AddConnectionFlags(flags);
  flags.AddSwitch("local", "search in this process (the default without --server)");
  flags.AddSwitch("help", "show this help");
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(err, "search", s);
  if (flags.Switch("help")) {
    out << kHelp << flags.Usage();
    return kExitOk;
  }
  absl::StatusOr<SearchSpace> space = SpaceFromFlags(flags);
  if (!space.ok()) return Fail(err, "search", space.status());
  SearchOptions options;
  absl::StatusOr<Objective> objective = ParseObjective(flags.Get("objective").value_or("time"));
  if (!objective.ok()) return Fail(err, "search", objective.status());
  options.objective = *objective;
  absl::StatusOr<std::optional<double>> deadline = flags.GetDouble("deadline-days");
  if (!deadline.ok()) return Fail(err, "search", deadline.status());
  options.deadline_days = deadline->value_or(0);
  absl::StatusOr<std::optional<int64_t>> threads = flags.GetInt("threads");
  if (!threads.ok()) return Fail(err, "search", threads.status());
  options.threads = static_cast<int>(
      threads->value_or(std::max(1u, std::thread::hardware_concurrency())));
  absl::StatusOr<std::optional<int64_t>> top = flags.GetInt("top");
  if (!top.ok()) return Fail(err, "search", top.status());
  const int64_t show = std::max<int64_t>(1, top->value_or(10));
  // A progress bar on a terminal.
  std::mutex progress_mu;
  if (isatty(STDERR_FILENO)) {
    options.progress = [&](int64_t done, int64_t total) {
      if (done % 64 != 0 && done != total) return;
      std::lock_guard<std::mutex> lock(progress_mu);
      const int width = 40;
      const int filled = static_cast<int>(width * done / std::max<int64_t>(1, total));
      err << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done
          << "/" << total << (done == total ? "\n" : "") << std::flush;
    };
  }
  absl::StatusOr<SearchResult> r;
  if (flags.Has("server")) {
    // The server streams progress, then the result.
    absl::StatusOr<Connection> c = Connect(flags);
    if (!c.ok()) return Fail(err, "search", c.status());
    const v1::SearchRequest req = convert::SearchToProto(
        *space, flags.Get("objective").value_or("time"), options.deadline_days,
        static_cast<int>(std::min<int64_t>(show, 1000)));
    auto stub = v1::Simulator::NewStub(c->channel);
    auto ctx = c->Context();
    std::unique_ptr<grpc::ClientReader<v1::SearchResponse>> reader = stub->Search(ctx.get(), req);
    v1::SearchResponse msg;
    std::optional<v1::SearchResult> final_result;
    while (reader->Read(&msg)) {
      if (msg.has_progress() && options.progress) {
        options.progress(msg.progress().evaluated(), msg.progress().total());
      }
      if (msg.has_result()) final_result = msg.result();
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return Fail(err, "search", FromGrpc(s));
    if (!final_result) {
      return Fail(err, "search", absl::InternalError("the server sent no search result"));
    }
    r = convert::SearchResultFromProto(*final_result, *space);
  } else {
    const ProfileSet profiles = DefaultProfileSet(space->cluster.gpu);
    r = Search(*space, profiles, options);
  }
  if (!r.ok()) return Fail(err, "search", r.status());

  if (auto plot = flags.Get("plot")) {
    if (space->train_tokens <= 0 || space->cluster.price_usd_per_gpu_hour <= 0) {
      return Fail(err, "search", absl::InvalidArgumentError(
                                     "--plot needs --tokens and --price-usd-per-gpu-hour"));
    }
    std::vector<PlanPoint> points;
    for (size_t i = 0; i < r->plans.size(); ++i) {
      const PlanResult& p = r->plans[i];
      PlanPoint pt;
      pt.days = p.training_days;
      pt.cost_usd = p.cost_usd;
      pt.label = absl::StrFormat("t=%d d=%d p=%d mb=%d, %d GPUs: %.2f days, $%.0f",
                                 p.job.plan.tensor_parallel, p.job.plan.data_parallel,
                                 p.job.plan.pipeline_parallel, p.job.plan.micro_batch,
                                 p.job.cluster.num_gpus, p.training_days, p.cost_usd);
      pt.frontier = std::find(r->pareto.begin(), r->pareto.end(), static_cast<int>(i)) != r->pareto.end();
      pt.chosen = static_cast<int>(i) == r->best;
      points.push_back(pt);
    }
    const std::string title = absl::StrFormat("%s: %d plans that fit (of %d)", space->model.name,
                                              r->plans.size(), r->considered);
    if (absl::Status s = WriteFile(*plot, TimeVsCostSvg(points, title)); !s.ok()) {
      return Fail(err, "search", s);
    }
  }
  if (flags.Switch("json")) {
    JsonWriter w;
    w.BeginObject();
    w.Key("considered").Int(r->considered);
    w.Key("out_of_memory").Int(r->out_of_memory);
    w.Key("evaluated").Int(r->considered - r->out_of_memory);
    w.Key("best");
    if (r->best >= 0) PlanJson(w, r->plans[r->best]); else w.String("none");
    w.Key("pareto").BeginArray();
    for (int i : r->pareto) PlanJson(w, r->plans[i]);
    w.EndArray();
    w.Key("plans").BeginArray();
    for (const PlanResult& p : r->plans) PlanJson(w, p);
    w.EndArray();
    w.EndObject();
    out << w.str() << "\n";
    return kExitOk;
  }
  if (flags.Switch("csv")) {
    out << "tensor_parallel,data_parallel,pipeline_parallel,micro_batch,gpus,schedule,recompute,"
           "iteration_time_ms,training_days,cost_usd,peak_memory_gib,pareto\n";
    for (size_t i = 0; i < r->plans.size(); ++i) {
      const PlanResult& p = r->plans[i];
      const bool on = std::find(r->pareto.begin(), r->pareto.end(), static_cast<int>(i)) != r->pareto.end();
      out << absl::StrFormat("%d,%d,%d,%d,%d,%s,%s,%.3f,%.4f,%.2f,%.2f,%d\n",
                             p.job.plan.tensor_parallel, p.job.plan.data_parallel,
                             p.job.plan.pipeline_parallel, p.job.plan.micro_batch,
                             p.job.cluster.num_gpus, ScheduleName(p.job.plan.schedule),
                             RecomputeName(p.job.plan.recompute), p.iteration_time_ms,
                             p.training_days, p.cost_usd, p.peak_memory_bytes / (1 << 30), on);
    }
    return kExitOk;
  }
  out << absl::StrFormat("%d plans considered, %d out of memory, %d predicted\n\n", r->considered,
                         r->out_of_memory, r->considered - r->out_of_memory);
  auto row = [&](const char* tag, const PlanResult& p) {
    out << absl::StrFormat("%-7s t=%-3d d=%-4d p=%-4d mb=%-4d gpus=%-6d %-5s %-4s %12.1f ms %9.2f days "
                           "$%-12.0f %6.1f GiB\n",
                           tag, p.job.plan.tensor_parallel, p.job.plan.data_parallel,
                           p.job.plan.pipeline_parallel, p.job.plan.micro_batch,
                           p.job.cluster.num_gpus, ScheduleName(p.job.plan.schedule),
                           RecomputeName(p.job.plan.recompute), p.iteration_time_ms,
                           p.training_days, p.cost_usd, p.peak_memory_bytes / (1 << 30));
  };
  if (r->best >= 0) {
    row("best", r->plans[r->best]);
  } else {
    out << "no plan meets the objective (e.g. none trains within the deadline)\n";
  }
  out << "\nfastest plans:\n";
  for (int64_t i = 0; i < show && i < static_cast<int64_t>(r->plans.size()); ++i) row("", r->plans[i]);
  out << "\nPareto frontier (training time against cost):\n";
  for (int i : r->pareto) row("", r->plans[i]);
  return kExitOk;
}

}  // namespace vtrain::cli
