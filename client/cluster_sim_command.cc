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
#include "absl/strings/str_join.h"
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

namespace vtrain::client {
namespace {

constexpr char kClusterSimHelp[] =
    "usage: vtrainctl cluster-sim --trace FILE.csv [--gpus 1024] [--jobs 128 | --hours H]\n"
    "                             [--seed 1 | --seeds A-B] [--target-load L] "
    "[--deadline-slack X] [flags]\n\n"
    "Replays a window of an ElasticFlow-format job trace (job_id, submission_time,\n"
    "num_iteration, model_name, deadline, batch_size, num_gpu, duration) as LLM training jobs\n"
    "on a shared cluster under an elastic, deadline-aware scheduler, once with data-parallel\n"
    "throughput curves (elasticflow) and once with vtrain's best 3D plans (vtrain).\n\n"
    "Each trace job becomes a GPT job by the GPUs it asked for (1: gpt3-350m, 2: gpt3-1.3b,\n"
    "4: gpt3-2.7b, 8: gpt3-6.7b, 16-32: gpt3-13b, 64 and more: gpt3-175b), with a global batch\n"
    "of 16 x its GPUs rounded up to a power of two in [32, 1536], and as many iterations as\n"
    "the elasticflow plan at its GPU count runs in the job's recorded duration; it keeps the\n"
    "trace's deadline (so its slack over the duration).\n\n"
    "--target-load L compresses the window's arrivals until the jobs' GPU-time at the GPUs\n"
    "they asked for is L times the cluster's between the first and last arrival;\n"
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

// The request the flags describe, and the trace row its window starts at.
struct Study {
  v1::ClusterSimRequest request;
  int64_t first_row = 0;  // 0-based
};

// Reads the trace, picks the window (--jobs consecutive jobs, or --hours of
// them, from a seeded start or from --window-start) and fills the request;
// the ranges are service::PrepareClusterSim's to check, on either side.
// `seed`: the seed to use instead of --seed (--seeds).
absl::StatusOr<Study> StudyFromFlags(const common::FlagParser& flags,
                                     std::optional<int64_t> seed_override = std::nullopt) {
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
  if (seed_override) seed = seed_override;
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> window_start, flags.GetDouble("window-start"));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> hours, flags.GetDouble("hours"));
  if (hours && count) {
    return absl::InvalidArgumentError("give --jobs or --hours, not both");
  }
  if (hours && !(*hours > 0 && *hours <= 100'000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hours=", *hours, " must be in (0, 100000], e.g. 400"));
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> load, flags.GetDouble("target-load"));
  if (load) r.set_target_load(*load);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> slack, flags.GetDouble("deadline-slack"));
  if (slack) r.set_deadline_slack(*slack);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> limit, flags.GetDouble("promise-limit"));
  if (limit) r.set_promise_limit(*limit);
  if (auto o = flags.Get("rescale-overhead")) {
    VTRAIN_ASSIGN_OR_RETURN(double restart, Seconds(*o, "--rescale-overhead"));
    r.set_rescale_overhead_s(restart);
  }
  for (absl::string_view p :
       absl::StrSplit(flags.Get("policy").value_or(""), ',', absl::SkipEmpty())) {
    r.add_policies(std::string(p));
  }
  const int64_t rows = static_cast<int64_t>(trace.size());
  int64_t take = std::min(count.value_or(128), rows);
  int64_t first = 0;
  if (hours) {
    // A window of H hours from a seeded row (or --window-start): the rows
    // submitted before the trace's last H hours can start one.
    const double span = *hours * 3600;
    int64_t starts = 0;
    while (starts < rows && trace[starts].submit_s + span <= trace[rows - 1].submit_s) ++starts;
    starts = std::max<int64_t>(starts, 1);
    if (window_start) {
      while (first < rows && trace[first].submit_s < *window_start) ++first;
      first = std::min(first, rows - 1);
    } else {
      std::mt19937_64 engine(static_cast<uint64_t>(seed.value_or(1)));
      first = static_cast<int64_t>(engine() % static_cast<uint64_t>(starts));
    }
    take = 0;
    while (first + take < rows && trace[first + take].submit_s < trace[first].submit_s + span &&
           take < service::kMaxClusterJobs) {
      ++take;
    }
  } else if (window_start) {
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
  std::vector<std::string> fragmented;
  for (const v1::ClusterPolicyOutcome& o : r.outcomes()) {
    if (o.fragmented_placements() > 0) {
      fragmented.push_back(absl::StrCat(o.policy(), " ", o.fragmented_placements()));
    }
  }
  if (!fragmented.empty()) {
    absl::StrAppend(&out, "placements on more leaves than needed (run at the spread throughput): ",
                    absl::StrJoin(fragmented, ", "), "\n");
  }
  std::vector<std::string> shared;
  for (const v1::ClusterPolicyOutcome& o : r.outcomes()) {
    if (o.spine_shared_gpu_s() > 0) {
      shared.push_back(absl::StrFormat("%s %.1f", o.policy(), o.spine_shared_gpu_s() / 3600));
    }
  }
  if (!shared.empty()) {
    absl::StrAppend(&out, "GPU-hours lost to other jobs on shared spine uplinks: ",
                    absl::StrJoin(shared, ", "), "\n");
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
  flags.AddValue("hours", "H", "instead of --jobs: the jobs submitted in H hours (the paper: 400)");
  flags.AddValue("seed", "N", "picks the first job (default 1)");
  flags.AddValue("seeds", "A-B",
                 "run the study once per seed A..B and report each, the mean and the worst");
  flags.AddValue("target-load", "L",
                 "compress or stretch the arrivals to an offered load of L (GPU-time asked for "
                 "over the cluster's, from the first arrival to the last); default: as traced");
  flags.AddValue("deadline-slack", "X",
                 "each deadline = submit + X x the job's traced duration (default: the trace's "
                 "deadlines)");
  flags.AddValue("promise-limit", "X",
                 "admission refuses a deadline promise of more GPU-time than X x the cluster's "
                 "GPUs over the median deadline window so far (default 2; 0: no limit, "
                 "ElasticFlow's admission)");
  flags.AddValue("window-start", "S", "instead of --seed: the first job submitted at or after S");
  flags.AddValue("policy", "P,..", "elasticflow,vtrain (default both)");
  flags.AddValue("rescale-overhead", "SECONDS", "checkpoint and restart per change (default 30s)");
  flags.AddValue("threads", "N", "parallel predictions (default: all cores)");
  flags.AddValue("plot", "FILE.svg", "draw GPUs allocated over time; FILE-jct.svg: the JCT CDFs");
  flags.AddSwitch("json", "print the outcome as JSON");
  flags.AddSwitch("csv", "print every job's outcome as CSV");
  common::AddLocalOrServerFlags(flags,
                                "draw the curves in this process (the default without --server)");
  flags.AddSwitch("help", "show this help");
}

}  // namespace

namespace {

// --seeds A-B (or one seed): at most 1000.
absl::StatusOr<std::vector<int64_t>> SeedsFromFlags(const common::FlagParser& flags) {
  std::vector<int64_t> seeds;
  const std::optional<std::string> text = flags.Get("seeds");
  if (!text) return seeds;
  const std::vector<std::string> ends = absl::StrSplit(*text, '-');
  int64_t a = 0, b = 0;
  if (ends.size() > 2 || !absl::SimpleAtoi(ends.front(), &a) ||
      !absl::SimpleAtoi(ends.back(), &b) || a < 0 || b < a || b - a >= 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--seeds='", *text, "' is not a range A-B of at most 1000 seeds (0 <= A <= B), e.g. 1-5"));
  }
  for (int64_t k = a; k <= b; ++k) seeds.push_back(k);
  return seeds;
}

// One study: locally or on the server.
absl::StatusOr<v1::ClusterSimResponse> RunStudy(const common::FlagParser& flags,
                                                const v1::ClusterSimRequest& request, int threads) {
  return flags.Has("server") ? ClusterSimRemotely(flags, request)
                             : service::ClusterSim(request, service::BuiltinProfiles(),
                                                   service::CallOptions::WithThreads(threads));
}

// vtrain against elasticflow in one study: the deadline-satisfaction ratio
// and the change of the average JCT; nullopt unless both ran.
std::optional<std::pair<double, double>> Compare(const v1::ClusterSimResponse& r) {
  const v1::ClusterPolicyOutcome *e = nullptr, *v = nullptr;
  for (const v1::ClusterPolicyOutcome& o : r.outcomes()) {
    (o.policy() == "vtrain" ? v : e) = &o;
  }
  if (e == nullptr || v == nullptr) return std::nullopt;
  const double ratio =
      e->deadline_satisfaction() > 0 ? v->deadline_satisfaction() / e->deadline_satisfaction() : 0;
  const double jct = e->avg_jct_s() > 0 ? v->avg_jct_s() / e->avg_jct_s() - 1 : 0;
  return std::make_pair(ratio, jct);
}

// --seeds: one study per seed, each reported, then the mean and the worst.
int RunSeeds(const common::FlagParser& flags, const std::vector<int64_t>& seeds, int threads,
             std::ostream& out, std::ostream& err) {
  std::string table = absl::StrFormat("%-6s %-13s %5s %6s %6s %6s  %-32s %-8s %8s\n", "seed",
                                      "rows", "jobs", "trace", "load", "peak",
                                      "per policy: deadline, avg JCT (s)", "deadline", "avg_jct");
  std::string json = "{\"seeds\": [";
  double ratio_sum = 0, jct_sum = 0, worst_ratio = 1e300, worst_jct = -1e300;
  int compared = 0;
  for (size_t k = 0; k < seeds.size(); ++k) {
    absl::StatusOr<Study> study = StudyFromFlags(flags, seeds[k]);
    if (!study.ok()) return Fail(err, "cluster-sim", study.status());
    absl::StatusOr<v1::ClusterSimResponse> r = RunStudy(flags, study->request, threads);
    if (!r.ok()) return Fail(err, "cluster-sim", r.status());
    std::string policies;
    for (const v1::ClusterPolicyOutcome& o : r->outcomes()) {
      absl::StrAppend(&policies, absl::StrFormat("%s %.1f%% %.0f  ", o.policy(),
                                                 100 * o.deadline_satisfaction(), o.avg_jct_s()));
    }
    const std::optional<std::pair<double, double>> c = Compare(*r);
    absl::StrAppend(&table,
                    absl::StrFormat("%-6d %-13s %5d %6.2f %6.2f %6d  %-32s", seeds[k],
                                    absl::StrCat(study->first_row + 1, "-",
                                                 study->first_row + study->request.jobs_size()),
                                    study->request.jobs_size(), r->trace_load(), r->offered_load(),
                                    r->peak_requested_gpus(), policies),
                    c ? absl::StrFormat(" %7.2fx %+7.1f%%", c->first, 100 * c->second) : "", "\n");
    if (c) {
      ratio_sum += c->first;
      jct_sum += c->second;
      worst_ratio = std::min(worst_ratio, c->first);
      worst_jct = std::max(worst_jct, c->second);
      ++compared;
    }
    absl::StrAppend(&json, k > 0 ? ", " : "", "{\"seed\": ", seeds[k],
                    ", \"first_row\": ", study->first_row + 1, ", \"result\": ", proto::ToJson(*r),
                    "}");
  }
  const double n = std::max(1, compared);
  if (flags.Switch("json")) {
    absl::StrAppend(&json, "]");
    if (compared > 0) {
      absl::StrAppend(&json,
                      absl::StrFormat(", \"mean_deadline_ratio\": %.6g, \"mean_avg_jct_change\": "
                                      "%.6g, \"worst_deadline_ratio\": %.6g, "
                                      "\"worst_avg_jct_change\": %.6g",
                                      ratio_sum / n, jct_sum / n, worst_ratio, worst_jct));
    }
    out << json << "}\n";
    return common::kExitOk;
  }
  out << table;
  if (compared > 0) {
    out << absl::StrFormat(
        "\nvtrain vs elasticflow over %d seeds: deadline satisfaction %.2fx mean, %.2fx worst; "
        "average JCT %+.1f%% mean, %+.1f%% worst\n",
        compared, ratio_sum / n, worst_ratio, 100 * jct_sum / n, 100 * worst_jct);
  }
  return common::kExitOk;
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
  absl::StatusOr<std::vector<int64_t>> seeds = SeedsFromFlags(flags);
  if (!seeds.ok()) return bad(seeds.status());
  if (!seeds->empty()) {
    if (flags.Has("seed") || flags.Has("window-start") || flags.Has("plot") ||
        flags.Switch("csv")) {
      return bad(absl::InvalidArgumentError(
          "--seeds runs several windows: it does not go with --seed, --window-start, --plot "
          "or --csv"));
    }
    return RunSeeds(flags, *seeds, *threads, out, err);
  }
  absl::StatusOr<Study> study = StudyFromFlags(flags);
  if (!study.ok()) return bad(study.status());
  const v1::ClusterSimRequest* request = &study->request;
  absl::StatusOr<v1::ClusterSimResponse> response = RunStudy(flags, *request, *threads);
  if (!response.ok()) return bad(response.status());
  if (auto plot = flags.Get("plot")) {
    if (absl::Status s = Plot(*plot, *response); !s.ok()) return bad(s);
  }
  if (flags.Switch("json")) {
    out << proto::ToJson(*response);
  } else if (flags.Switch("csv")) {
    out << Csv(*response);
  } else {
    out << absl::StrFormat(
               "%d jobs of %s from row %d, %d GPUs, restart %.0f s, offered load %.2f (traced "
               "%.2f); at most %d GPUs asked for at once\n\n",
               request->jobs_size(), *flags.Get("trace"), study->first_row + 1, request->gpus(),
               request->has_rescale_overhead_s() ? request->rescale_overhead_s() : 30,
               response->offered_load(), response->trace_load(), response->peak_requested_gpus())
        << Summary(*response);
  }
  return common::kExitOk;
}

}  // namespace vtrain::client
