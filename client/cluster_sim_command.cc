// vtrainctl cluster-sim: the vTrain paper's multi-tenant scheduling study. A
// window of an ElasticFlow-format job trace becomes LLM training jobs; one
// elastic deadline-aware scheduler (core/plan/cluster_sim.h) runs them twice,
// planning with data-parallel scaling (`elasticflow`) and with vtrain's best
// 3D plans (`vtrain`); the outcomes are compared.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cluster_trace.h"
#include "client/commands.h"
#include "client/job_flags.h"
#include "client/json_writer.h"
#include "client/svg_plot.h"
#include "common/connection.h"
#include "common/files.h"
#include "core/plan/cluster_sim.h"
#include "core/util/status_macros.h"
#include "proto/curve_convert.h"
#include "proto/json.h"
#include "service/cluster_sim.h"
#include "service/service.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::cli {
namespace {

constexpr char kHelp[] =
    "usage: vtrainctl cluster-sim --trace FILE.csv [--gpus 1024] [--jobs 128] [--seed 1] "
    "[flags]\n\n"
    "Replays a window of an ElasticFlow-format job trace (job_id, submission_time,\n"
    "num_iteration, model_name, deadline, batch_size, num_gpu, duration) as LLM training jobs\n"
    "on a shared cluster under an elastic, deadline-aware scheduler, once with data-parallel\n"
    "throughput curves (elasticflow) and once with vtrain's best 3D plans (vtrain).\n\n"
    "Each trace job becomes a GPT job by the GPUs it asked for (1: gpt3-350m, 2: gpt3-1.3b,\n"
    "4: gpt3-2.7b, 8: gpt3-6.7b, 16-32: gpt3-13b, 64 and more: gpt3-175b), with a global batch\n"
    "of 16 x its GPUs rounded up to a power of two in [32, 1536], and as many iterations as\n"
    "the elasticflow plan at its GPU count runs in the job's recorded duration; it keeps the\n"
    "trace's deadline (so its slack over the duration).\n\n"
    "example:\n  vtrainctl cluster-sim --trace ../shared/data/itp-job-traces/cluster02.csv "
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

// The request the flags describe, and the trace row its window starts at.
struct Study {
  v1::ClusterSimRequest request;
  int64_t first_row = 0;  // 0-based
};

// Reads the trace, picks the window (--jobs consecutive jobs from a seeded
// start, or from --window-start) and fills the request; the ranges are
// service::PrepareClusterSim's to check, on either side.
absl::StatusOr<Study> StudyFromFlags(const common::FlagParser& flags) {
  if (!flags.Has("trace")) return absl::InvalidArgumentError("--trace FILE.csv is required");
  VTRAIN_ASSIGN_OR_RETURN(std::string text, common::ReadFile(*flags.Get("trace")));
  VTRAIN_ASSIGN_OR_RETURN(std::vector<TraceJob> trace, ParseTrace(text, *flags.Get("trace")));
  Study study;
  v1::ClusterSimRequest& r = study.request;
  VTRAIN_ASSIGN_OR_RETURN(*r.mutable_cluster(), ClusterSpecFromFlags(flags));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> gpus, flags.GetInt("gpus"));
  r.set_gpus(gpus.value_or(1024));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> count,
                          flags.GetIntIn("jobs", 1, service::kMaxClusterJobs));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> seed, flags.GetInt("seed"));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> window_start, flags.GetDouble("window-start"));
  if (auto o = flags.Get("rescale-overhead")) {
    VTRAIN_ASSIGN_OR_RETURN(double restart, Seconds(*o, "--rescale-overhead"));
    r.set_rescale_overhead_s(restart);
  }
  for (absl::string_view p :
       absl::StrSplit(flags.Get("policy").value_or(""), ',', absl::SkipEmpty())) {
    r.add_policies(std::string(p));
  }
  const int64_t rows = static_cast<int64_t>(trace.size());
  const int64_t take = std::min(count.value_or(128), rows);
  int64_t first = 0;
  if (window_start) {
    while (first < rows && trace[first].submit_s < *window_start) ++first;
    first = std::min(first, rows - take);
  } else {
    std::mt19937_64 engine(static_cast<uint64_t>(seed.value_or(1)));
    first = static_cast<int64_t>(engine() % static_cast<uint64_t>(rows - take + 1));
  }
  for (int64_t i = first; i < first + take; ++i) {
    const TraceJob& t = trace[static_cast<size_t>(i)];
    v1::ClusterTraceJob* j = r.add_jobs();
    j->set_id(t.id);
    j->set_submit_s(t.submit_s);
    j->set_deadline_s(t.deadline_s);
    j->set_duration_s(t.duration_s);
    j->set_num_gpus(t.num_gpu);
  }
  study.first_row = first;
  return study;
}

std::string Summary(const v1::ClusterSimResponse& r) {
  std::string out =
      absl::StrFormat("%-12s %5s %9s %12s %12s %12s %7s %7s %8s\n", "policy", "jobs", "deadline",
                      "avg_jct_s", "p95_jct_s", "makespan_s", "util", "useful", "reallocs");
  for (const v1::ClusterPolicyOutcome& o : r.outcomes()) {
    absl::StrAppend(
        &out,
        absl::StrFormat("%-12s %5d %8.1f%% %12.0f %12.0f %12.0f %6.1f%% %6.1f%% %8d\n", o.policy(),
                        o.jobs_size(), 100 * o.deadline_satisfaction(), o.avg_jct_s(),
                        o.p95_jct_s(), o.makespan_s(), 100 * o.gpu_utilization(),
                        100 * o.useful_utilization(), o.reallocations()));
  }
  if (r.outcomes_size() == 2) {
    const v1::ClusterPolicyOutcome& e = r.outcomes(0);
    const v1::ClusterPolicyOutcome& v = r.outcomes(1);
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "\n%s vs %s: deadline satisfaction %.2fx, average JCT %+.1f%%, makespan %+.1f%%\n",
            v.policy(), e.policy(),
            e.deadline_satisfaction() > 0 ? v.deadline_satisfaction() / e.deadline_satisfaction()
                                          : 0.0,
            e.avg_jct_s() > 0 ? 100 * (v.avg_jct_s() / e.avg_jct_s() - 1) : 0.0,
            e.makespan_s() > 0 ? 100 * (v.makespan_s() / e.makespan_s() - 1) : 0.0));
  }
  return out;
}

std::string Csv(const v1::ClusterSimResponse& r) {
  std::string out = "policy,job_id,shape,admitted,finished,met_deadline,jct_s,reallocations\n";
  for (const v1::ClusterPolicyOutcome& o : r.outcomes()) {
    for (const v1::ClusterJobOutcome& j : o.jobs()) {
      absl::StrAppend(&out, absl::StrFormat("%s,%s,%s,%d,%d,%d,%.3f,%d\n", o.policy(), j.id(),
                                            j.shape(), j.admitted(), j.finished(), j.met_deadline(),
                                            j.jct_s(), j.reallocations()));
    }
  }
  return out;
}

// FILE.svg: GPUs allocated over time per policy; FILE-jct.svg: the JCT CDFs.
absl::Status Plot(const std::string& path, const v1::ClusterSimResponse& r) {
  std::vector<Series> allocated, cdfs;
  for (const v1::ClusterPolicyOutcome& o : r.outcomes()) {
    Series a{o.policy(), {}, true};
    const double t0 = o.allocated().empty() ? 0 : o.allocated(0).time_s();
    for (const v1::ClusterAllocation& x : o.allocated()) {
      a.points.emplace_back((x.time_s() - t0) / 3600, x.gpus());
    }
    allocated.push_back(std::move(a));
    std::vector<double> jcts;
    for (const v1::ClusterJobOutcome& j : o.jobs()) {
      if (j.finished()) jcts.push_back(j.jct_s() / 3600);
    }
    std::sort(jcts.begin(), jcts.end());
    Series c{o.policy(), {}, true};
    for (size_t k = 0; k < jcts.size(); ++k) {
      c.points.emplace_back(jcts[k], static_cast<double>(k + 1) / static_cast<double>(jcts.size()));
    }
    cdfs.push_back(std::move(c));
  }
  VTRAIN_RETURN_IF_ERROR(
      common::WriteFile(path, LinesSvg(allocated, "GPUs allocated over time", "hours", "GPUs")));
  std::string jct_path = path;
  if (absl::EndsWith(jct_path, ".svg")) jct_path.resize(jct_path.size() - 4);
  return common::WriteFile(
      absl::StrCat(jct_path, "-jct.svg"),
      LinesSvg(cdfs, "Job completion time (CDF)", "hours", "fraction of jobs"));
}

absl::StatusOr<v1::ClusterSimResponse> ClusterSimRemotely(const common::FlagParser& flags,
                                                          const v1::ClusterSimRequest& r) {
  VTRAIN_ASSIGN_OR_RETURN(common::Connection c, common::Connect(flags));
  v1::ClusterSimResponse resp;
  grpc::Status s = v1::Simulator::NewStub(c.channel)->ClusterSim(c.Context().get(), r, &resp);
  if (!s.ok()) return common::FromGrpc(s);
  return resp;
}

}  // namespace

namespace {

// The flags of cluster-sim.
void AddClusterSimFlags(common::FlagParser& flags) {
  flags.AddValue("trace", "FILE.csv", "an ElasticFlow-format job trace");
  flags.AddValue("gpus", "N", "GPUs in the cluster (default 1024)");
  AddClusterFlags(flags);
  flags.AddValue("jobs", "N", "consecutive jobs of the trace to replay (default 128)");
  flags.AddValue("seed", "N", "picks the first job (default 1)");
  flags.AddValue("window-start", "S", "instead of --seed: the first job submitted at or after S");
  flags.AddValue("policy", "P,..", "elasticflow,vtrain (default both)");
  flags.AddValue("rescale-overhead", "SECONDS", "checkpoint and restart per change (default 30s)");
  flags.AddValue("threads", "N", "parallel predictions (default: all cores)");
  flags.AddValue("plot", "FILE.svg", "draw GPUs allocated over time; FILE-jct.svg: the JCT CDFs");
  flags.AddSwitch("json", "print the outcome as JSON");
  flags.AddSwitch("csv", "print every job's outcome as CSV");
  common::AddConnectionFlags(flags);
  flags.AddSwitch("local", "draw the curves in this process (the default without --server)");
  flags.AddSwitch("help", "show this help");
}

}  // namespace

int RunClusterSim(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl cluster-sim");
  AddClusterSimFlags(flags);
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(err, "cluster-sim", s);
  if (flags.Switch("help")) {
    out << kHelp << flags.Usage();
    return common::kExitOk;
  }
  auto bad = [&](absl::Status s) { return Fail(err, "cluster-sim", s); };
  if (flags.Has("server") && flags.Switch("local")) {
    return bad(absl::InvalidArgumentError("give either --local or --server, not both"));
  }
  absl::StatusOr<Study> study = StudyFromFlags(flags);
  if (!study.ok()) return bad(study.status());
  const v1::ClusterSimRequest* request = &study->request;
  absl::StatusOr<int> threads = flags.GetThreads();
  if (!threads.ok()) return bad(threads.status());
  absl::StatusOr<v1::ClusterSimResponse> response =
      flags.Has("server") ? ClusterSimRemotely(flags, *request)
                          : service::ClusterSim(*request, service::BuiltinProfiles(),
                                                service::CallOptions::WithThreads(*threads));
  if (!response.ok()) return bad(response.status());
  if (auto plot = flags.Get("plot")) {
    if (absl::Status s = Plot(*plot, *response); !s.ok()) return bad(s);
  }
  if (flags.Switch("json")) {
    out << convert::ToJson(*response);
  } else if (flags.Switch("csv")) {
    out << Csv(*response);
  } else {
    out << absl::StrFormat("%d jobs of %s from row %d, %d GPUs, restart %.0f s\n\n",
                           request->jobs_size(), *flags.Get("trace"), study->first_row + 1,
                           request->gpus(),
                           request->has_rescale_overhead_s() ? request->rescale_overhead_s() : 30)
        << Summary(*response);
  }
  return common::kExitOk;
}

}  // namespace vtrain::cli
