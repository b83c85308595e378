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

// The documented rule from a trace job's GPU count to an LLM job shape.
std::pair<std::string, int64_t> LlmShape(int64_t gpus) {
  const char* preset = gpus <= 1    ? "gpt3-350m"
                       : gpus <= 2  ? "gpt3-1.3b"
                       : gpus <= 4  ? "gpt3-2.7b"
                       : gpus <= 8  ? "gpt3-6.7b"
                       : gpus <= 32 ? "gpt3-13b"
                                    : "gpt3-175b";
  int64_t batch = 32;
  while (batch < 16 * gpus && batch < 1536) batch *= 2;
  return {preset, std::min<int64_t>(batch, 1536)};
}

// The counts a table covers: 1, 2, 4, then every multiple of a node up to
// `max` (data-parallel footprints such as t8 x p6 = 48 need them).
std::vector<int64_t> TableCounts(int64_t gpus_per_node, int64_t max) {
  std::vector<int64_t> counts;
  for (int64_t g = 1; g < gpus_per_node && g <= max; g *= 2) counts.push_back(g);
  for (int64_t g = gpus_per_node; g <= max; g += gpus_per_node) counts.push_back(g);
  return counts;
}

struct Setup {
  int64_t gpus = 1024;
  v1::ClusterSpec cluster;
  double rescale_overhead_s = 30;
  int threads = 1;
  std::optional<common::Connection> server;  // --server: every table from its ThroughputCurve
  service::BuiltinProfiles builtin;          // else these tables, made once per GPU
};

// One throughput table per shape and policy: from this process, or from the
// server's ThroughputCurve with --server.
absl::StatusOr<ThroughputTable> Table(const Setup& setup, const std::string& preset, int64_t batch,
                                      int64_t max_gpus, v1::CurvePolicy policy) {
  v1::ThroughputCurveRequest r;
  v1::CurveJob* job = r.add_jobs();
  job->mutable_model()->set_preset(preset);
  *job->mutable_cluster() = setup.cluster;
  job->set_global_batch(batch);
  for (int64_t g : TableCounts(
           setup.cluster.gpus_per_node() > 0 ? setup.cluster.gpus_per_node() : 8, max_gpus)) {
    r.add_gpu_counts(g);
  }
  r.set_policy(policy);
  v1::ThroughputCurveResponse resp;
  if (setup.server) {
    grpc::Status s = v1::Simulator::NewStub(setup.server->channel)
                         ->ThroughputCurve(setup.server->Context().get(), r, &resp);
    if (!s.ok()) return common::FromGrpc(s);
  } else {
    VTRAIN_ASSIGN_OR_RETURN(
        resp, service::ThroughputCurve(r, setup.builtin,
                                       service::CallOptions::WithThreads(setup.threads)));
  }
  ThroughputTable table;
  for (const v1::CurvePoint& p : resp.curves(0).points()) {
    table.gpus.push_back(p.gpus());
    table.iterations_per_s.push_back(p.fits() ? p.iterations_per_s() : 0);
  }
  return table;
}

struct Study {
  std::vector<std::string> policies;
  std::vector<ClusterOutcome> outcomes;
  std::vector<std::string> shapes;  // per job, "preset/batch"
};

absl::StatusOr<Study> RunStudy(const Setup& setup, const std::vector<TraceJob>& window,
                               const std::vector<std::string>& policies) {
  // Tables per (shape, policy), computed once.
  std::map<std::pair<std::string, int64_t>, int> shape_index;
  std::vector<std::pair<std::string, int64_t>> shapes;
  Study study;
  for (const TraceJob& t : window) {
    const auto shape = LlmShape(t.num_gpu);
    if (shape_index.emplace(shape, static_cast<int>(shapes.size())).second) shapes.push_back(shape);
    study.shapes.push_back(absl::StrCat(shape.first, "/", shape.second));
  }
  const int64_t max_gpus = setup.gpus;
  std::vector<ThroughputTable> dp_tables, best_tables;
  for (const auto& [preset, batch] : shapes) {
    VTRAIN_ASSIGN_OR_RETURN(ThroughputTable dp,
                            Table(setup, preset, batch, max_gpus, v1::CURVE_POLICY_DATA_PARALLEL));
    VTRAIN_ASSIGN_OR_RETURN(ThroughputTable best,
                            Table(setup, preset, batch, max_gpus, v1::CURVE_POLICY_BEST));
    dp_tables.push_back(std::move(dp));
    best_tables.push_back(std::move(best));
  }
  std::vector<ClusterJob> jobs;
  for (size_t i = 0; i < window.size(); ++i) {
    const TraceJob& t = window[i];
    const int s = shape_index[LlmShape(t.num_gpu)];
    // Iterations: what the elasticflow plan at the job's own GPU count runs
    // in its recorded duration (the best plan when scaling by d has none).
    double rate = dp_tables[s].At(t.num_gpu);
    if (rate <= 0) rate = best_tables[s].At(t.num_gpu);
    if (rate <= 0) rate = best_tables[s].At(max_gpus);
    jobs.push_back(
        {t.id, t.submit_s, std::max(1.0, std::round(t.duration_s * rate)), t.deadline_s, s});
  }
  const ClusterSimOptions options{
      .total_gpus = setup.gpus,
      .rescale_overhead_s = setup.rescale_overhead_s,
      .gpus_per_node = setup.cluster.gpus_per_node() > 0 ? setup.cluster.gpus_per_node() : 8};
  for (const std::string& policy : policies) {
    VTRAIN_ASSIGN_OR_RETURN(
        ClusterOutcome out,
        SimulateCluster(jobs, policy == "vtrain" ? best_tables : dp_tables, options));
    study.policies.push_back(policy);
    study.outcomes.push_back(std::move(out));
  }
  return study;
}

// The study as JSON, through the escaping writer: job ids and shapes come
// from the trace file and may hold any character.
std::string Json(const Study& s) {
  JsonWriter w;
  w.BeginObject().Key("policies").BeginArray();
  for (size_t i = 0; i < s.policies.size(); ++i) {
    const ClusterOutcome& o = s.outcomes[i];
    w.BeginObject()
        .Key("policy")
        .String(s.policies[i])
        .Key("jobs")
        .Int(static_cast<int64_t>(o.jobs.size()))
        .Key("deadline_satisfaction")
        .Double(o.deadline_satisfaction)
        .Key("avg_jct_s")
        .Double(o.avg_jct_s)
        .Key("p95_jct_s")
        .Double(o.p95_jct_s)
        .Key("makespan_s")
        .Double(o.makespan_s)
        .Key("gpu_utilization")
        .Double(o.gpu_utilization)
        .Key("useful_utilization")
        .Double(o.useful_utilization)
        .Key("reallocations")
        .Int(o.reallocations)
        .EndObject();
  }
  w.EndArray().Key("jobs").BeginArray();
  for (size_t j = 0; !s.outcomes.empty() && j < s.outcomes[0].jobs.size(); ++j) {
    w.BeginObject().Key("id").String(s.outcomes[0].jobs[j].id).Key("shape").String(s.shapes[j]);
    for (size_t i = 0; i < s.policies.size(); ++i) {
      const JobOutcome& o = s.outcomes[i].jobs[j];
      w.Key(s.policies[i])
          .BeginObject()
          .Key("admitted")
          .Bool(o.admitted)
          .Key("met_deadline")
          .Bool(o.met_deadline)
          .Key("jct_s")
          .Double(o.finished ? o.jct_s : -1.0)
          .Key("reallocations")
          .Int(o.reallocations)
          .EndObject();
    }
    w.EndObject();
  }
  w.EndArray().EndObject();
  return w.str() + "\n";
}

std::string Summary(const Study& s) {
  std::string out =
      absl::StrFormat("%-12s %5s %9s %12s %12s %12s %7s %7s %8s\n", "policy", "jobs", "deadline",
                      "avg_jct_s", "p95_jct_s", "makespan_s", "util", "useful", "reallocs");
  for (size_t i = 0; i < s.policies.size(); ++i) {
    const ClusterOutcome& o = s.outcomes[i];
    absl::StrAppend(&out,
                    absl::StrFormat("%-12s %5d %8.1f%% %12.0f %12.0f %12.0f %6.1f%% %6.1f%% %8d\n",
                                    s.policies[i], o.jobs.size(), 100 * o.deadline_satisfaction,
                                    o.avg_jct_s, o.p95_jct_s, o.makespan_s, 100 * o.gpu_utilization,
                                    100 * o.useful_utilization, o.reallocations));
  }
  if (s.policies.size() == 2) {
    const ClusterOutcome& e = s.outcomes[0];
    const ClusterOutcome& v = s.outcomes[1];
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "\n%s vs %s: deadline satisfaction %.2fx, average JCT %+.1f%%, makespan %+.1f%%\n",
            s.policies[1], s.policies[0],
            e.deadline_satisfaction > 0 ? v.deadline_satisfaction / e.deadline_satisfaction : 0.0,
            e.avg_jct_s > 0 ? 100 * (v.avg_jct_s / e.avg_jct_s - 1) : 0.0,
            e.makespan_s > 0 ? 100 * (v.makespan_s / e.makespan_s - 1) : 0.0));
  }
  return out;
}

std::string Csv(const Study& s) {
  std::string out = "policy,job_id,shape,admitted,finished,met_deadline,jct_s,reallocations\n";
  for (size_t i = 0; i < s.policies.size(); ++i) {
    for (size_t j = 0; j < s.outcomes[i].jobs.size(); ++j) {
      const JobOutcome& o = s.outcomes[i].jobs[j];
      absl::StrAppend(&out, absl::StrFormat("%s,%s,%s,%d,%d,%d,%.3f,%d\n", s.policies[i], o.id,
                                            s.shapes[j], o.admitted, o.finished, o.met_deadline,
                                            o.finished ? o.jct_s : -1.0, o.reallocations));
    }
  }
  return out;
}

// FILE.svg: GPUs allocated over time per policy; FILE-jct.svg: the JCT CDFs.
absl::Status Plot(const std::string& path, const Study& s) {
  std::vector<Series> allocated, cdfs;
  for (size_t i = 0; i < s.policies.size(); ++i) {
    const ClusterOutcome& o = s.outcomes[i];
    Series a{s.policies[i], {}, true};
    const double t0 = o.allocated.empty() ? 0 : o.allocated.front().first;
    for (const auto& [t, g] : o.allocated) a.points.emplace_back((t - t0) / 3600, g);
    allocated.push_back(std::move(a));
    std::vector<double> jcts;
    for (const JobOutcome& j : o.jobs) {
      if (j.finished) jcts.push_back(j.jct_s / 3600);
    }
    std::sort(jcts.begin(), jcts.end());
    Series c{s.policies[i], {}, true};
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
  if (!flags.Has("trace")) return bad(absl::InvalidArgumentError("--trace FILE.csv is required"));
  if (flags.Has("server") && flags.Switch("local")) {
    return bad(absl::InvalidArgumentError("give either --local or --server, not both"));
  }
  absl::StatusOr<std::string> text = common::ReadFile(*flags.Get("trace"));
  if (!text.ok()) return bad(text.status());
  absl::StatusOr<std::vector<TraceJob>> trace = ParseTrace(*text, *flags.Get("trace"));
  if (!trace.ok()) return bad(trace.status());
  Setup setup;
  absl::StatusOr<v1::ClusterSpec> cluster = ClusterSpecFromFlags(flags);
  if (!cluster.ok()) return bad(cluster.status());
  setup.cluster = *cluster;
  absl::StatusOr<std::optional<int64_t>> gpus = flags.GetInt("gpus");
  absl::StatusOr<std::optional<int64_t>> n_jobs = flags.GetInt("jobs");
  absl::StatusOr<std::optional<int64_t>> seed = flags.GetInt("seed");
  absl::StatusOr<std::optional<double>> window_start = flags.GetDouble("window-start");
  absl::StatusOr<int> threads = flags.GetThreads();
  for (const absl::Status& s :
       {gpus.status(), n_jobs.status(), seed.status(), window_start.status(), threads.status()}) {
    if (!s.ok()) return bad(s);
  }
  setup.gpus = gpus->value_or(1024);
  const int64_t count = n_jobs->value_or(128);
  if (setup.gpus < 1 || setup.gpus > 65536 || count < 1 || count > 100'000) {
    return bad(
        absl::InvalidArgumentError("--gpus must be in [1, 65536] and --jobs in [1, 100000]"));
  }
  const int64_t per_node = setup.cluster.gpus_per_node() > 0 ? setup.cluster.gpus_per_node() : 8;
  if (setup.gpus < per_node) {
    // The throughput tables start at whole nodes' worth of plans and the
    // study places jobs on them: a smaller cluster runs nothing.
    return bad(absl::InvalidArgumentError(
        absl::StrCat("--gpus=", setup.gpus, " is less than one node (", per_node,
                     " GPUs, --gpus-per-node); give at least ", per_node, " GPUs")));
  }
  if (flags.Has("server")) {
    absl::StatusOr<common::Connection> c = common::Connect(flags);
    if (!c.ok()) return bad(c.status());
    setup.server = *std::move(c);
  }
  setup.threads = *threads;
  if (auto o = flags.Get("rescale-overhead")) {
    absl::StatusOr<double> s = Seconds(*o, "--rescale-overhead");
    if (!s.ok()) return bad(s.status());
    setup.rescale_overhead_s = *s;
  }
  std::vector<std::string> policies;
  for (absl::string_view p :
       absl::StrSplit(flags.Get("policy").value_or("elasticflow,vtrain"), ',', absl::SkipEmpty())) {
    if (p != "elasticflow" && p != "vtrain") {
      return bad(absl::InvalidArgumentError(
          absl::StrCat("--policy: '", p, "' is unknown; use elasticflow and/or vtrain")));
    }
    policies.emplace_back(p);
  }
  // The window: `count` consecutive jobs from a seeded start (or a time).
  const int64_t rows = static_cast<int64_t>(trace->size());
  const int64_t take = std::min(count, rows);
  int64_t first = 0;
  if (*window_start) {
    while (first < rows && (*trace)[first].submit_s < **window_start) ++first;
    first = std::min(first, rows - take);
  } else {
    std::mt19937_64 engine(static_cast<uint64_t>(seed->value_or(1)));
    first = static_cast<int64_t>(engine() % static_cast<uint64_t>(rows - take + 1));
  }
  const std::vector<TraceJob> window(trace->begin() + first, trace->begin() + first + take);
  absl::StatusOr<Study> study = RunStudy(setup, window, policies);
  if (!study.ok()) return bad(study.status());
  if (auto plot = flags.Get("plot")) {
    if (absl::Status s = Plot(*plot, *study); !s.ok()) return bad(s);
  }
  if (flags.Switch("json")) {
    out << Json(*study);
  } else if (flags.Switch("csv")) {
    out << Csv(*study);
  } else {
    out << absl::StrFormat("%d jobs of %s from row %d, %d GPUs, restart %.0f s\n\n", take,
                           *flags.Get("trace"), first + 1, setup.gpus, setup.rescale_overhead_s)
        << Summary(*study);
  }
  return common::kExitOk;
}

}  // namespace vtrain::cli
