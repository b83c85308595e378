// vtrainctl cluster-sim: the vTrain paper's multi-tenant scheduling study. A
// window of an ElasticFlow-format job trace becomes LLM training jobs; one
// elastic deadline-aware scheduler (core/cluster/scheduler.h) runs them twice,
// planning with data-parallel scaling (`elasticflow`) and with vtrain's best
// 3D plans (`vtrain`); the outcomes are compared.
#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cluster_sim_output.h"
#include "client/cluster_trace.h"
#include "client/commands.h"
#include "client/job_flags.h"
#include "common/connection.h"
#include "common/files.h"
#include "core/util/status_macros.h"
#include "proto/enum_convert.h"
#include "proto/json.h"
#include "service/cluster_sim.h"
#include "service/service.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::client {
namespace {

constexpr char kClusterSimHelp[] =
    "usage: vtrainctl cluster-sim --trace FILE.csv [--gpus N,..] [--jobs N,.. | --hours H,..]\n"
    "                             [--seed 1 | --seeds A-B] [--target-load L,..] "
    "[--job-mix itp|paper|2026,..] [flags]\n\n"
    "Replays a window of an ElasticFlow-format job trace (job_id, submission_time,\n"
    "num_iteration, model_name, deadline, batch_size, num_gpu, duration) as LLM training jobs\n"
    "on a shared cluster under an elastic, deadline-aware scheduler, once with data-parallel\n"
    "throughput curves (elasticflow) and once with vtrain's best 3D plans (vtrain).\n\n"
    "Each trace job keeps its arrival, duration and deadline and becomes an LLM job of the\n"
    "--job-mix: itp (default): a GPT job by the GPUs it asked for (1: gpt3-350m, 2: gpt3-1.3b,\n"
    "4: gpt3-2.7b, 8: gpt3-6.7b, 16-32: gpt3-13b, 64 and more: gpt3-175b; global batch 16 x\n"
    "its GPUs rounded up to a power of two in [32, 1536]); paper: the GPT-3 family on A100 at\n"
    "LLM jobs' GPU demands (8 to 1,024, median 32); 2026: Llama-style and MoE presets on H100\n"
    "at the same demands. It runs as many iterations as the elasticflow plan at the GPUs it\n"
    "asks for runs in its recorded duration.\n\n"
    "Lists (--gpus, --jobs, --hours, --target-load, --job-mix, --seeds, --windows) make a\n"
    "study: every combination is one window, replayed by the service in one request, then\n"
    "summarised per (mix, GPUs, load, window) over the seeds.\n\n"
    "--target-load L compresses the window's arrivals until the jobs' GPU-time at the GPUs\n"
    "they asked for is L times the cluster's: between the first and last arrival for --jobs,\n"
    "inside the window's hours for --hours (which then gains or loses jobs);\n"
    "--deadline-slack X sets each deadline to submit + X x the job's traced duration.\n\n"
    "example:\n  vtrainctl cluster-sim --trace data/itp-job-traces/cluster02.csv "
    "--gpus 1024 --jobs 128 --seed 1\n\nflags:\n";

absl::StatusOr<double> Seconds(absl::string_view text, absl::string_view flag) {
  absl::string_view number = text;
  absl::ConsumeSuffix(&number, "s");
  double v = 0;
  if (!absl::SimpleAtod(number, &v) || !(v >= 0) || v > 86400) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "='", text, "' is not a duration in [0, 86400] seconds, e.g. 30s"));
  }
  return v;
}

// A comma-separated list of numbers: "--flag='x' is not ...".
template <typename T>
absl::StatusOr<std::vector<T>> NumberList(const common::FlagParser& flags, absl::string_view flag,
                                          absl::string_view example) {
  std::vector<T> out;
  const std::optional<std::string> text = flags.Get(flag);
  if (!text) return out;
  for (absl::string_view item : absl::StrSplit(*text, ',')) {
    T v{};
    bool ok = false;
    if constexpr (std::is_integral_v<T>) {
      ok = absl::SimpleAtoi(item, &v);
    } else {
      ok = absl::SimpleAtod(item, &v);
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, "='", *text,
                                                     "' is not a comma-separated list of numbers, "
                                                     "e.g. ",
                                                     example));
    }
    out.push_back(v);
  }
  return out;
}

// A range A-B of seeds, or one seed: at most 1000.
absl::StatusOr<std::vector<int64_t>> SeedRange(absl::string_view text, absl::string_view flag) {
  const std::vector<std::string> ends = absl::StrSplit(text, '-');
  int64_t a = 0, b = 0;
  if (ends.size() > 2 || !absl::SimpleAtoi(ends.front(), &a) ||
      !absl::SimpleAtoi(ends.back(), &b) || a < 0 || b < a || b - a >= 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "='", text,
                     "' is not a seed or a range A-B of at most 1000 seeds (0 <= A <= B), "
                     "e.g. 1-5"));
  }
  std::vector<int64_t> seeds;
  for (int64_t k = a; k <= b; ++k) seeds.push_back(k);
  return seeds;
}

// --windows 128@1-5,400h@1-3: windows of 128 jobs over seeds 1-5 and of
// 400 hours over seeds 1-3 (the seeds after @ are optional).
absl::Status AddWindows(absl::string_view text, v1::ClusterStudy& study) {
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    const std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(item, '@');
    absl::string_view size = parts.first;
    v1::ClusterWindow* w = study.add_windows();
    const bool hours = absl::ConsumeSuffix(&size, "h");
    double v = 0;
    if (!absl::SimpleAtod(size, &v) || !(v > 0) || v > 1e9 || (!hours && v != std::floor(v))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--windows='", text,
                       "': each window is N (jobs) or Hh (hours), optionally @seeds, e.g. "
                       "128@1-5,400h@1-3"));
    }
    hours ? w->set_hours(v) : w->set_jobs(static_cast<int64_t>(v));
    if (!parts.second.empty()) {
      VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> seeds, SeedRange(parts.second, "--windows"));
      for (int64_t s : seeds) w->add_seeds(s);
    }
  }
  return absl::OkStatus();
}

// The windows, seeds and matrix lists of the flags.
absl::Status StudyLists(const common::FlagParser& flags, v1::ClusterSimRequest& r) {
  v1::ClusterStudy& study = *r.mutable_study();
  VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> jobs, NumberList<int64_t>(flags, "jobs", "128"));
  VTRAIN_ASSIGN_OR_RETURN(std::vector<double> hours, NumberList<double>(flags, "hours", "400"));
  for (int64_t n : jobs) study.add_windows()->set_jobs(n);
  for (double h : hours) study.add_windows()->set_hours(h);
  if (auto w = flags.Get("windows")) VTRAIN_RETURN_IF_ERROR(AddWindows(*w, study));
  if (study.windows_size() == 0) study.add_windows()->set_jobs(128);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> start, flags.GetDouble("window-start"));
  if (start) {
    for (v1::ClusterWindow& w : *study.mutable_windows()) w.set_start_s(*start);
  }
  if (auto seeds = flags.Get("seeds")) {
    VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> list, SeedRange(*seeds, "--seeds"));
    for (int64_t s : list) study.add_seeds(s);
  } else {
    VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> seed, flags.GetInt("seed"));
    study.add_seeds(seed.value_or(1));
  }
  VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> gpus, NumberList<int64_t>(flags, "gpus", "1024"));
  if (gpus.size() == 1) r.set_gpus(gpus[0]);
  if (gpus.empty()) r.set_gpus(1024);
  if (gpus.size() > 1) study.mutable_gpus()->Assign(gpus.begin(), gpus.end());
  VTRAIN_ASSIGN_OR_RETURN(std::vector<double> loads, NumberList<double>(flags, "target-load", "1"));
  study.mutable_target_loads()->Assign(loads.begin(), loads.end());
  for (absl::string_view m :
       absl::StrSplit(flags.Get("job-mix").value_or(""), ',', absl::SkipEmpty())) {
    VTRAIN_ASSIGN_OR_RETURN(JobMix mix, ParseJobMix(m, "--job-mix"));
    study.add_job_mixes(proto::ToProto(mix));
  }
  return absl::OkStatus();
}

// The request the flags describe: the whole trace and the study's lists
// (the ranges are proto::ClusterSimFromProto's to check, on either side).
absl::StatusOr<v1::ClusterSimRequest> StudyFromFlags(const common::FlagParser& flags) {
  if (!flags.Has("trace")) return absl::InvalidArgumentError("--trace FILE.csv is required");
  VTRAIN_ASSIGN_OR_RETURN(std::string text, common::ReadFile(*flags.Get("trace")));
  VTRAIN_ASSIGN_OR_RETURN(std::vector<TraceJob> trace, ParseTrace(text, *flags.Get("trace")));
  v1::ClusterSimRequest r;
  VTRAIN_ASSIGN_OR_RETURN(*r.mutable_cluster(), ClusterSpecFromFlags(flags));
  if (flags.Has("seed") && flags.Has("seeds")) {
    return absl::InvalidArgumentError("give --seed or --seeds, not both");
  }
  VTRAIN_RETURN_IF_ERROR(StudyLists(flags, r));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> slack, flags.GetDouble("deadline-slack"));
  if (slack) r.set_deadline_slack(*slack);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> limit, flags.GetDouble("promise-limit"));
  if (limit) r.set_promise_limit(*limit);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> displacement,
                          flags.GetDouble("displacement-limit"));
  if (displacement) r.set_displacement_limit(*displacement);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> sensitivity, flags.GetDouble("sensitivity"));
  if (sensitivity) r.set_sensitivity(*sensitivity);
  if (auto o = flags.Get("rescale-overhead")) {
    VTRAIN_ASSIGN_OR_RETURN(double restart, Seconds(*o, "--rescale-overhead"));
    r.set_rescale_overhead_s(restart);
  }
  for (absl::string_view p :
       absl::StrSplit(flags.Get("policy").value_or(""), ',', absl::SkipEmpty())) {
    r.add_policies(std::string(p));
  }
  for (const TraceJob& t : trace) {
    v1::ClusterTraceJob* j = r.mutable_study()->add_trace();
    j->set_id(t.id);
    j->set_submit_s(t.submit_s);
    j->set_deadline_s(t.deadline_s);
    j->set_duration_s(t.duration_s);
    j->set_num_gpus(t.num_gpu);
  }
  return r;
}

// The flags of cluster-sim.
void AddClusterSimFlags(common::FlagParser& flags) {
  flags.AddValue("trace", "FILE.csv", "an ElasticFlow-format job trace");
  flags.AddValue("gpus", "N,..", "GPUs in the cluster (default 1024); several: one study each");
  AddClusterFlags(flags);
  flags.AddValue("jobs", "N,..", "windows of N consecutive jobs of the trace (default 128)");
  flags.AddValue("hours", "H,..", "windows of the jobs submitted in H hours (the paper: 400)");
  flags.AddValue("windows", "SPEC",
                 "windows with their own seeds: N (jobs) or Hh (hours), @A-B, comma-separated, "
                 "e.g. 128@1-5,400h@1-3");
  flags.AddValue("job-mix", "M,..",
                 "what the trace's jobs become: itp (by their GPUs; default), paper (GPT-3 "
                 "family on A100), 2026 (Llama-style and MoE presets on H100)");
  flags.AddValue("seed", "N", "picks each window's first job (default 1)");
  flags.AddValue("seeds", "A-B", "one window per seed A..B, each reported, then summarised");
  flags.AddValue("target-load", "L,..",
                 "compress or stretch the arrivals to an offered load of L (GPU-time asked for "
                 "over the cluster's); default: as traced");
  flags.AddValue("deadline-slack", "X",
                 "each deadline = submit + X x the job's traced duration (default: the trace's "
                 "deadlines)");
  flags.AddValue("promise-limit", "X",
                 "admission refuses a deadline promise of more GPU-time than X x the cluster's "
                 "GPUs over the median deadline window so far (default 2; 0: no limit, "
                 "ElasticFlow's admission)");
  flags.AddValue("displacement-limit", "X",
                 "admission refuses a deadline promise expected to turn away more than X later "
                 "arrivals (default 1; 0: no limit)");
  flags.AddValue("sensitivity", "F",
                 "the scheduler's sensitivity check: the vtrain policy runs on the "
                 "data-parallel tables F faster (0.001: 0.1%) instead of its 3D plans");
  flags.AddValue("window-start", "S", "instead of seeds: the first job submitted at or after S");
  flags.AddValue("policy", "P,..", "elasticflow,vtrain (default both)");
  flags.AddValue("rescale-overhead", "SECONDS", "checkpoint and restart per change (default 30s)");
  flags.AddValue("threads", "N", "parallel predictions and windows (default: all cores)");
  flags.AddValue("plot", "FILE.svg",
                 "one window: GPUs allocated over time; FILE-jct.svg: JCT CDFs");
  flags.AddSwitch("json", "print the vtrain.v1.ClusterSimResponse as JSON");
  flags.AddSwitch("csv", "one window: every job's outcome as CSV");
  common::AddLocalOrServerFlags(flags,
                                "draw the curves in this process (the default without --server)");
  flags.AddSwitch("help", "show this help");
}

absl::StatusOr<v1::ClusterSimResponse> RunStudy(const common::FlagParser& flags,
                                                const v1::ClusterSimRequest& request, int threads) {
  if (!flags.Has("server")) {
    return service::ClusterSim(request, service::BuiltinProfiles(),
                               service::CallOptions::WithThreads(threads));
  }
  VTRAIN_ASSIGN_OR_RETURN(common::Connection c, common::Connect(flags));
  v1::ClusterSimResponse resp;
  grpc::Status s = v1::Simulator::NewStub(c.channel)->ClusterSim(c.Context().get(), request, &resp);
  if (!s.ok()) return common::FromGrpc(s);
  return resp;
}

// The number of windows the request's lists make.
int64_t WindowCount(const v1::ClusterSimRequest& r) {
  const v1::ClusterStudy& s = r.study();
  int64_t windows = 0;
  for (const v1::ClusterWindow& w : s.windows()) {
    windows += w.seeds_size() > 0 ? w.seeds_size() : std::max(1, s.seeds_size());
  }
  return windows * std::max(1, s.gpus_size()) * std::max(1, s.target_loads_size()) *
         std::max(1, s.job_mixes_size());
}

}  // namespace

int RunClusterSim(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl cluster-sim");
  AddClusterSimFlags(flags);
  if (std::optional<int> done =
          ParseCommandLine(flags, args, "cluster-sim", kClusterSimHelp, out, err)) {
    return *done;
  }
  auto bad = [&](absl::Status s) { return Fail(err, "cluster-sim", s); };
  if (absl::Status s = common::CheckLocalOrServer(flags); !s.ok()) return bad(s);
  absl::StatusOr<int> threads = flags.GetThreads();
  if (!threads.ok()) return bad(threads.status());
  absl::StatusOr<v1::ClusterSimRequest> request = StudyFromFlags(flags);
  if (!request.ok()) return bad(request.status());
  const bool one = WindowCount(*request) == 1;
  if (!one && (flags.Has("plot") || flags.Switch("csv"))) {
    return bad(absl::InvalidArgumentError(
        "--plot and --csv draw one window; this study has several (lists or --seeds)"));
  }
  request->mutable_study()->set_keep_jobs(one);
  absl::StatusOr<v1::ClusterSimResponse> response = RunStudy(flags, *request, *threads);
  if (!response.ok()) return bad(response.status());
  if (flags.Switch("json")) {
    out << proto::ToJson(*response);
    return common::kExitOk;
  }
  if (request->sensitivity() > 0) {
    out << absl::StrFormat(
        "sensitivity check: \"vtrain\" runs on the data-parallel tables %g%% faster, not on "
        "its 3D plans\n",
        100 * request->sensitivity());
  }
  if (!one || response->windows_size() != 1) {
    out << StudyTable(*response);
    return common::kExitOk;
  }
  const v1::ClusterWindowOutcome& w = response->windows(0);
  if (auto plot = flags.Get("plot")) {
    if (absl::Status s = WindowPlot(*plot, w); !s.ok()) return bad(s);
  }
  if (flags.Switch("csv")) {
    out << WindowCsv(w);
    return common::kExitOk;
  }
  out << absl::StrFormat(
             "%d jobs of %s from row %d, %d GPUs, restart %.0f s, %soffered load %.2f (traced "
             "%.2f); at most %d GPUs asked for at once\n\n",
             w.jobs(), *flags.Get("trace"), w.first_row(), w.gpus(),
             request->has_rescale_overhead_s() ? request->rescale_overhead_s() : 30,
             w.job_mix() > v1::JOB_MIX_ITP
                 ? absl::StrCat("job mix ", flags.Get("job-mix").value_or(""), ", ")
                 : "",
             w.offered_load(), w.trace_load(), w.peak_requested_gpus())
      << WindowSummary(w);
  return common::kExitOk;
}

}  // namespace vtrain::client
