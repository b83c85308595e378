// vtrainctl curve: throughput against GPU count for a job shape, the curve an
// elastic cluster scheduler plans with (Simulator.ThroughputCurve).
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/job_flags.h"
#include "client/prediction_format.h"
#include "client/scheduler_formats.h"
#include "client/svg_plot.h"
#include "common/connection.h"
#include "common/files.h"
#include "core/util/status_macros.h"
#include "proto/curve_convert.h"
#include "proto/enum_convert.h"
#include "proto/job_convert.h"
#include "proto/json.h"
#include "service/service.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::client {
namespace {

constexpr char kCurveHelp[] =
    "usage: vtrainctl curve --model PRESET --global-batch N (--gpu-counts A,B,.. | --max-gpus N "
    "[--step N]) [flags]\n\n"
    "For each GPU count, the best plan that fits and its throughput (iterations, samples and\n"
    "tokens per second), under the `best` policy (the full 3D plan search) or\n"
    "`data-parallel` (the smallest t x p that fits, t inside a node first, scaled by d only,\n"
    "as ElasticFlow plans). --compare draws both.\n\n"
    "examples:\n"
    "  vtrainctl curve --model gpt3-175b --global-batch 1536 --max-gpus 1024 --step 64 --compare\n"
    "  vtrainctl curve --model gpt3-13b --global-batch 512 --gpu-counts 8,16,32,64 "
    "--format elasticflow\n\nflags:\n";

absl::Status AddList(const common::FlagParser& f, const char* flag,
                     google::protobuf::RepeatedField<int64_t>* out) {
  VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> values, f.GetIntList(flag));
  out->Add(values.begin(), values.end());
  return absl::OkStatus();
}

absl::StatusOr<v1::ThroughputCurveRequest> CurveRequestFromFlags(const common::FlagParser& f) {
  v1::ThroughputCurveRequest r;
  v1::CurveJob* job = r.add_jobs();
  VTRAIN_ASSIGN_OR_RETURN(*job->mutable_model(), ModelSpecFromFlags(f));
  VTRAIN_ASSIGN_OR_RETURN(*job->mutable_cluster(), ClusterSpecFromFlags(f));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> gb, f.GetInt("global-batch"));
  if (gb) job->set_global_batch(*gb);
  if (auto d = f.Get("dtype")) {
    VTRAIN_ASSIGN_OR_RETURN(DType dtype, ParseDType(*d));
    job->set_dtype(proto::ToProto(dtype));
  }
  VTRAIN_RETURN_IF_ERROR(AddList(f, "gpu-counts", r.mutable_gpu_counts()));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> max_gpus, f.GetInt("max-gpus"));
  if (max_gpus) r.set_max_gpus(*max_gpus);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> step, f.GetInt("step"));
  if (step) r.set_step(*step);
  if (auto p = f.Get("policy")) {
    if (*p == "best") {
      r.set_policy(v1::CURVE_POLICY_BEST);
    } else if (*p == "data-parallel") {
      r.set_policy(v1::CURVE_POLICY_DATA_PARALLEL);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--policy='", *p, "' is unknown; use best or data-parallel"));
    }
  }
  r.set_monotone(f.Switch("monotone"));
  VTRAIN_ASSIGN_OR_RETURN(*r.mutable_space(), PlanSpaceFromFlags(f));
  if (HasLaunch(f)) {
    // The launch's model, batch and precision (the flags win).
    VTRAIN_ASSIGN_OR_RETURN(v1::PredictRequest launch, RequestFromFlags(f));
    *job->mutable_model() = launch.model();
    *job->mutable_cluster() = launch.cluster();
    job->mutable_cluster()->clear_num_gpus();
    if (!gb) job->set_global_batch(launch.plan().global_batch());
    if (!f.Has("dtype")) job->set_dtype(launch.plan().dtype());
  }
  if (auto s = f.Get("schedule")) {
    VTRAIN_ASSIGN_OR_RETURN(PipelineSchedule schedule, ParseSchedule(*s));
    r.mutable_space()->add_schedules(proto::ToProto(schedule));
  }
  return r;
}

}  // namespace

absl::StatusOr<v1::ThroughputCurveResponse> CurveRemotely(const common::FlagParser& flags,
                                                          const v1::ThroughputCurveRequest& r) {
  VTRAIN_ASSIGN_OR_RETURN(common::Connection c, common::Connect(flags));
  v1::ThroughputCurveResponse resp;
  grpc::Status s = v1::Simulator::NewStub(c.channel)->ThroughputCurve(c.Context().get(), r, &resp);
  if (!s.ok()) return common::FromGrpc(s);
  return resp;
}

namespace {

std::string PolicyName(v1::CurvePolicy p) {
  return p == v1::CURVE_POLICY_DATA_PARALLEL ? "data-parallel" : "best";
}

std::string Table(const v1::ThroughputCurveResponse& r) {
  std::string out;
  for (const v1::Curve& c : r.curves()) {
    absl::StrAppend(&out, c.name(), " (", PolicyName(r.policy()), ")\n",
                    absl::StrFormat("%6s  %-22s %12s %9s %11s %13s %8s\n", "gpus", "plan",
                                    "iteration_ms", "iter/s", "samples/s", "tokens/s", "mem_GiB"));
    for (const v1::CurvePoint& p : c.points()) {
      if (!p.fits()) {
        absl::StrAppend(&out, absl::StrFormat("%6d  no plan: %s\n", p.gpus(),
                                              p.no_plan_reason().empty() ? "does not fit"
                                                                         : p.no_plan_reason()));
        continue;
      }
      const v1::ParallelPlan& q = p.plan();
      const std::string plan = absl::StrFormat(
          "t=%d d=%d p=%d mb=%d%s", q.tensor_parallel(), q.data_parallel(), q.pipeline_parallel(),
          q.micro_batch(), p.plan_gpus() < p.gpus() ? absl::StrCat(" (", p.plan_gpus(), ")") : "");
      absl::StrAppend(
          &out, absl::StrFormat("%6d  %-22s %12.1f %9.4f %11.2f %13.0f %8.1f\n", p.gpus(), plan,
                                p.iteration_time_ms(), p.iterations_per_s(), p.samples_per_s(),
                                p.tokens_per_s(), p.peak_memory_bytes() / (1 << 30)));
      if (p.fragmented_samples_per_s() > 0) {
        out.pop_back();  // the newline
        absl::StrAppend(
            &out, absl::StrFormat("   spread: %.1f ms, %.2f samples/s (%+.1f%%)\n",
                                  p.fragmented_iteration_time_ms(), p.fragmented_samples_per_s(),
                                  100 * (p.fragmented_samples_per_s() / p.samples_per_s() - 1)));
      }
    }
    absl::StrAppend(&out, SimulationLine(c.simulation()));
  }
  return out;
}

std::string Csv(const std::vector<v1::ThroughputCurveResponse>& responses) {
  std::string out =
      "name,policy,gpus,fits,tensor_parallel,data_parallel,pipeline_parallel,micro_batch,"
      "plan_gpus,iteration_time_ms,iterations_per_s,samples_per_s,tokens_per_s,peak_memory_gib,"
      "fragmented_samples_per_s\n";
  for (const v1::ThroughputCurveResponse& r : responses) {
    for (const v1::Curve& c : r.curves()) {
      for (const v1::CurvePoint& p : c.points()) {
        const v1::ParallelPlan& q = p.plan();
        absl::StrAppend(
            &out, absl::StrFormat("%s,%s,%d,%d,%d,%d,%d,%d,%d,%.3f,%.6f,%.3f,%.1f,%.2f,%.3f\n",
                                  c.name(), PolicyName(r.policy()), p.gpus(), p.fits(),
                                  q.tensor_parallel(), q.data_parallel(), q.pipeline_parallel(),
                                  q.micro_batch(), p.plan_gpus(), p.iteration_time_ms(),
                                  p.iterations_per_s(), p.samples_per_s(), p.tokens_per_s(),
                                  p.peak_memory_bytes() / (1 << 30), p.fragmented_samples_per_s()));
      }
    }
  }
  return out;
}

// One job per global batch (--global-batches) and GPU type (--gpu-types),
// the first job's model and settings in each; the label of every job.
absl::StatusOr<std::vector<CurveJobLabel>> ExpandJobs(const common::FlagParser& f,
                                                      v1::ThroughputCurveRequest& r) {
  const v1::CurveJob base = r.jobs(0);
  VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> batches, f.GetIntList("global-batches"));
  if (batches.empty()) batches.push_back(base.global_batch());
  std::vector<std::string> gpus;
  if (auto list = f.Get("gpu-types")) {
    gpus = absl::StrSplit(*list, ',', absl::SkipEmpty());
  }
  if (gpus.empty()) gpus.push_back(base.cluster().gpu());
  const std::string model = !base.name().empty()             ? base.name()
                            : !base.model().preset().empty() ? base.model().preset()
                                                             : std::string("custom");
  r.clear_jobs();
  std::vector<CurveJobLabel> labels;
  for (const std::string& gpu : gpus) {
    for (int64_t batch : batches) {
      v1::CurveJob* job = r.add_jobs();
      *job = base;
      if (!gpu.empty()) job->mutable_cluster()->set_gpu(gpu);
      job->set_global_batch(batch);
      labels.push_back({model, gpu.empty() ? std::string(proto::kDefaultGpu) : gpu, batch});
    }
  }
  return labels;
}

// --format's output: ElasticFlow's files (into --output-dir, or the one
// model's to `out`) or the throughput matrix.
absl::Status WriteSchedulerFormat(const common::FlagParser& flags, const std::string& format,
                                  const v1::ThroughputCurveResponse& r,
                                  const std::vector<CurveJobLabel>& labels, std::ostream& out) {
  if (format == "matrix-json") {
    out << ThroughputMatrixJson(r, labels);
    return absl::OkStatus();
  }
  const std::map<std::string, std::string> files = ElasticFlowFiles(r, labels);
  if (auto dir = flags.Get("output-dir")) {
    for (const auto& [model, csv] : files) {
      const std::string path = absl::StrCat(*dir, "/", model, ".csv");
      VTRAIN_RETURN_IF_ERROR(common::WriteFile(path, csv));
      out << "wrote " << path << "\n";
    }
    return absl::OkStatus();
  }
  for (const auto& [model, csv] : files) out << csv;
  return absl::OkStatus();
}

void AddCurveFlags(common::FlagParser& flags) {
  AddModelFlags(flags);
  AddClusterFlags(flags);
  flags.AddValue("global-batch", "N", "global batch in sequences");
  flags.AddValue("megatron-args", "FILE|-",
                 "the model, GPU count, batch and precision of a Megatron-LM launch (the other "
                 "flags win; docs/megatron.md)");
  flags.AddValue("megatron-bridge-config", "FILE|-",
                 "the same from a Megatron-Bridge ConfigContainer YAML dump");
  flags.AddValue("dtype", "T", "fp16, bf16 or fp8 (default fp16)");
  flags.AddValue("gpu-counts", "A,B,..", "the GPU counts of the curve");
  flags.AddValue("max-gpus", "N", "every multiple of --step up to N GPUs");
  flags.AddValue("step", "N", "with --max-gpus (default: GPUs per node)");
  flags.AddValue("policy", "P", "best (default) or data-parallel");
  flags.AddSwitch("compare", "both policies (table, --csv)");
  flags.AddSwitch("monotone", "the best achievable at or below each count");
  flags.AddValue("tp-values", "A,B,..", "tensor-parallel degrees (best policy)");
  flags.AddValue("schedule", "S",
                 "pipeline schedule of every point: gpipe, 1f1b, zb-h1, dualpipe or dualpipev "
                 "(default 1f1b)");
  AddTrainingSpaceFlags(flags);
  flags.AddValue("max-micro-batch", "N", "largest micro-batch");
  flags.AddValue("threads", "N", "parallel predictions (default: all cores)");
  flags.AddValue("global-batches", "A,B,..",
                 "several global batches, one curve each (ElasticFlow's rows)");
  flags.AddValue("gpu-types", "A,B,..", "several GPU types, one curve each (matrix-json)");
  flags.AddValue("format", "F",
                 "elasticflow: ElasticFlow's throughput CSV (global_batch_size,1,2,4,... rows "
                 "of iterations/s, nan without a plan); matrix-json: jobs x GPU types x counts");
  flags.AddValue("output-dir", "DIR", "with --format elasticflow: write DIR/MODEL.csv");
  flags.AddValue("plot", "FILE.svg", "draw tokens/s against GPUs (both policies with --compare)");
  flags.AddSwitch("csv", "print every point as CSV");
  flags.AddSwitch("json", "print the vtrain.v1.ThroughputCurveResponse as JSON");
  common::AddLocalOrServerFlags(flags, "draw in this process (the default without --server)");
  flags.AddSwitch("help", "show this help");
}

}  // namespace

int RunCurve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl curve");
  AddCurveFlags(flags);
  if (std::optional<int> done = ParseCommandLine(flags, args, "curve", kCurveHelp, out, err)) {
    return *done;
  }
  if (absl::Status s = common::CheckLocalOrServer(flags); !s.ok()) return Fail(err, "curve", s);
  const std::string format = flags.Get("format").value_or("");
  if (!format.empty() && format != "elasticflow" && format != "matrix-json") {
    return Fail(err, "curve",
                absl::InvalidArgumentError(absl::StrCat(
                    "--format='", format, "' is unknown; use elasticflow or matrix-json")));
  }
  if (flags.Has("output-dir") && format != "elasticflow") {
    return Fail(err, "curve",
                absl::InvalidArgumentError("--output-dir goes with --format elasticflow"));
  }
  if (flags.Switch("compare") && flags.Has("policy")) {
    return Fail(err, "curve",
                absl::InvalidArgumentError("--compare draws both policies; drop --policy"));
  }
  absl::StatusOr<v1::ThroughputCurveRequest> request = CurveRequestFromFlags(flags);
  if (!request.ok()) return Fail(err, "curve", request.status());
  absl::StatusOr<std::vector<CurveJobLabel>> labels = ExpandJobs(flags, *request);
  if (!labels.ok()) return Fail(err, "curve", labels.status());
  absl::StatusOr<int> threads = flags.GetThreads();
  if (!threads.ok()) return Fail(err, "curve", threads.status());
  const int n_threads = *threads;
  std::vector<v1::ThroughputCurveRequest> requests = {*request};
  if (flags.Switch("compare")) {
    requests[0].set_policy(v1::CURVE_POLICY_DATA_PARALLEL);
    requests.push_back(*request);
    requests[1].set_policy(v1::CURVE_POLICY_BEST);
  }
  std::vector<v1::ThroughputCurveResponse> responses;
  const service::BuiltinProfiles builtin;
  service::CallOptions local;
  local.threads = n_threads;
  for (const v1::ThroughputCurveRequest& r : requests) {
    absl::StatusOr<v1::ThroughputCurveResponse> resp =
        flags.Has("server") ? CurveRemotely(flags, r) : service::ThroughputCurve(r, builtin, local);
    if (!resp.ok()) return Fail(err, "curve", resp.status());
    responses.push_back(*std::move(resp));
  }
  if (auto plot = flags.Get("plot")) {
    std::vector<Series> series;
    for (const v1::ThroughputCurveResponse& r : responses) {
      for (const v1::Curve& c : r.curves()) {
        Series line{absl::StrCat(c.name(), " (", PolicyName(r.policy()), ")"), {}, false};
        for (const v1::CurvePoint& p : c.points()) {
          // No line across a count without a plan: a gap.
          line.points.emplace_back(p.gpus(), p.fits() ? p.tokens_per_s() : std::nan(""));
        }
        series.push_back(std::move(line));
      }
    }
    if (absl::Status s = common::WriteFile(
            *plot, LinesSvg(series, "Throughput against GPUs", "GPUs", "tokens/s"));
        !s.ok()) {
      return Fail(err, "curve", s);
    }
  }
  if (flags.Switch("json")) {
    for (const v1::ThroughputCurveResponse& r : responses) out << proto::ToJson(r);
  } else if (flags.Switch("csv")) {
    out << Csv(responses);
  } else if (!format.empty()) {
    for (const v1::ThroughputCurveResponse& r : responses) {
      if (absl::Status s = WriteSchedulerFormat(flags, format, r, *labels, out); !s.ok()) {
        return Fail(err, "curve", s);
      }
    }
  } else {
    for (const v1::ThroughputCurveResponse& r : responses) out << Table(r);
  }
  return common::kExitOk;
}

}  // namespace vtrain::client
