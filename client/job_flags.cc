#include "client/job_flags.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "client/measurements.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"

namespace vtrain::cli {
namespace {

// Parses `flag` as an integer into `*out` when present.
absl::Status SetInt(const FlagParser& flags, absl::string_view flag, int64_t* out) {
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> v, flags.GetInt(flag));
  if (v) *out = *v;
  return absl::OkStatus();
}

// "25MiB", "1GB", "1048576": a size in bytes.
absl::StatusOr<int64_t> ParseBytes(absl::string_view text, absl::string_view field) {
  // Reuse the bandwidth parser by appending "/s" to a plain size.
  if (!text.empty() && (text.back() == 'B')) {
    VTRAIN_ASSIGN_OR_RETURN(double bytes, ParseBandwidth(absl::StrCat(text, "/s"), field));
    return static_cast<int64_t>(bytes);
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "='", text, "' is not a size; write e.g. 25MiB or 26214400"));
  }
  return value;
}

}  // namespace

void AddJobFlags(FlagParser& p) {
  p.AddValue("job-file", "FILE", "-f: the job as JSON (vtrain.v1.PredictRequest) instead of flags");
  p.AddValue("vtrain-config", "FILE", "the job from a vTrain configuration JSON file");
  p.AddValue("model", "PRESET", "model preset: gpt3-125m ... gpt3-175b, mtnlg-530b");
  p.AddValue("layers", "N", "decoder layers (model.num_layers); overrides the preset");
  p.AddValue("hidden", "N", "hidden size (model.hidden_size)");
  p.AddValue("heads", "N", "attention heads (model.num_heads)");
  p.AddValue("seq-len", "N", "sequence length (model.seq_len)");
  p.AddValue("vocab", "N", "vocabulary size (model.vocab_size, default 50257)");
  p.AddValue("ffn", "N", "FFN hidden size (model.ffn_hidden_size, default 4 x hidden)");
  p.AddValue("gpu", "NAME", "GPU model (default a100-sxm4-80gb); see 'vtrainctl presets'");
  p.AddValue("gpus", "N", "GPUs in the job (cluster.num_gpus; default tp x dp x pp)");
  p.AddValue("gpus-per-node", "N", "GPUs per node (cluster.gpus_per_node, default 8)");
  p.AddValue("intra-node-bandwidth", "BW", "per-GPU NVLink bandwidth with unit, e.g. 150GB/s");
  p.AddValue("inter-node-bandwidth", "BW", "per-node network bandwidth with unit, e.g. 800Gb/s");
  p.AddValue("price-usd-per-gpu-hour", "USD", "price of one GPU-hour, for the cost");
  p.AddValue("tp", "N", "tensor-parallel degree (plan.tensor_parallel, default 1)");
  p.AddValue("pp", "N", "pipeline-parallel degree (plan.pipeline_parallel, default 1)");
  p.AddValue("dp", "N", "data-parallel degree (plan.data_parallel, default GPUs / (tp x pp))");
  p.AddValue("micro-batch", "N", "micro-batch size (plan.micro_batch, default 1)");
  p.AddValue("global-batch", "N", "global batch in sequences (plan.global_batch)");
  p.AddValue("schedule", "S", "pipeline schedule: gpipe or 1f1b (default 1f1b)");
  p.AddValue("recompute", "R", "activation recomputation: none or full (default full)");
  p.AddValue("gradient-bucketing", "on|off", "overlap DP all-reduce with backward (default off)");
  p.AddValue("bucket-size", "SIZE", "gradient bucket size, e.g. 25MiB (default 25MiB)");
  p.AddValue("dtype", "T", "fp16 or bf16 (default fp16)");
}

absl::StatusOr<ClusterSpec> ClusterFromFlags(const FlagParser& flags) {
  VTRAIN_ASSIGN_OR_RETURN(GpuSpec gpu, GpuByName(flags.Get("gpu").value_or("a100-sxm4-80gb")));
  ClusterSpec cluster = DefaultCluster(gpu, 0);
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "gpus-per-node", &cluster.gpus_per_node));
  if (auto bw = flags.Get("intra-node-bandwidth")) {
    VTRAIN_ASSIGN_OR_RETURN(cluster.intra_node_bandwidth_bytes_per_s,
                            ParseBandwidth(*bw, "--intra-node-bandwidth"));
  }
  if (auto bw = flags.Get("inter-node-bandwidth")) {
    VTRAIN_ASSIGN_OR_RETURN(cluster.inter_node_bandwidth_bytes_per_s,
                            ParseBandwidth(*bw, "--inter-node-bandwidth"));
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> price, flags.GetDouble("price-usd-per-gpu-hour"));
  if (price) cluster.price_usd_per_gpu_hour = *price;
  return cluster;
}

absl::StatusOr<Job> JobFromFlags(const FlagParser& flags) {
  const bool from_file = flags.Has("job-file") || flags.Has("vtrain-config");
  if (from_file) {
    for (const char* other : {"model", "layers", "hidden", "heads", "seq-len", "gpus", "tp", "pp",
                              "dp", "micro-batch", "global-batch"}) {
      if (flags.Has(other)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", other, " cannot be combined with a job file; put it in the file"));
      }
    }
    if (flags.Has("job-file") && flags.Has("vtrain-config")) {
      return absl::InvalidArgumentError("give either -f/--job-file or --vtrain-config, not both");
    }
    const std::string path = *flags.Get(flags.Has("job-file") ? "job-file" : "vtrain-config");
    VTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    if (flags.Has("vtrain-config")) {
      absl::StatusOr<Job> job = convert::JobFromVtrainConfig(text);
      if (!job.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", job.status().message()));
      return job;
    }
    v1::PredictRequest request;
    if (absl::Status s = convert::FromJson(text, &request); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
    }
    absl::StatusOr<Job> job = convert::JobFromProto(request);
    if (!job.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", job.status().message()));
    return job;
  }
  Job job;
  if (std::optional<std::string> preset = flags.Get("model")) {
    VTRAIN_ASSIGN_OR_RETURN(job.model, ModelPreset(*preset));
  } else {
    job.model.name = "custom";
    if (!flags.Has("layers") || !flags.Has("hidden") || !flags.Has("heads") ||
        !flags.Has("seq-len")) {
      return absl::InvalidArgumentError(
          "no model given: use --model PRESET, or --layers, --hidden, --heads and --seq-len");
    }
  }
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "layers", &job.model.num_layers));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "hidden", &job.model.hidden_size));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "heads", &job.model.num_heads));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "seq-len", &job.model.seq_len));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "vocab", &job.model.vocab_size));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "ffn", &job.model.ffn_hidden_size));

  VTRAIN_ASSIGN_OR_RETURN(job.cluster, ClusterFromFlags(flags));

  ParallelPlan& plan = job.plan;
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "tp", &plan.tensor_parallel));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "pp", &plan.pipeline_parallel));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "micro-batch", &plan.micro_batch));
  if (!flags.Has("global-batch")) {
    return absl::InvalidArgumentError("--global-batch is required (plan.global_batch)");
  }
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "global-batch", &plan.global_batch));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> gpus, flags.GetInt("gpus"));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> dp, flags.GetInt("dp"));
  if (dp) {
    plan.data_parallel = *dp;
    job.cluster.num_gpus = gpus.value_or(plan.tensor_parallel * plan.data_parallel *
                                         plan.pipeline_parallel);
  } else if (gpus) {
    job.cluster.num_gpus = *gpus;
    const int64_t tp_pp = plan.tensor_parallel * plan.pipeline_parallel;
    if (tp_pp <= 0 || *gpus % tp_pp != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster.num_gpus=", *gpus, " (--gpus) is not divisible by --tp * --pp = ", tp_pp,
          "; choose a GPU count that is a multiple of it, or give --dp"));
    }
    plan.data_parallel = *gpus / tp_pp;
  } else {
    job.cluster.num_gpus = plan.tensor_parallel * plan.pipeline_parallel;
  }
  if (auto s = flags.Get("schedule")) {
    VTRAIN_ASSIGN_OR_RETURN(plan.schedule, ParseSchedule(*s));
  }
  if (auto r = flags.Get("recompute")) {
    VTRAIN_ASSIGN_OR_RETURN(plan.recompute, ParseRecompute(*r));
  }
  if (auto b = flags.Get("gradient-bucketing")) {
    if (*b != "on" && *b != "off") {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan.gradient_bucketing='", *b, "' (--gradient-bucketing) must be on or off"));
    }
    plan.gradient_bucketing = *b == "on";
  }
  if (auto size = flags.Get("bucket-size")) {
    VTRAIN_ASSIGN_OR_RETURN(plan.bucket_size_bytes, ParseBytes(*size, "plan.bucket_size_bytes"));
  }
  if (auto d = flags.Get("dtype")) {
    VTRAIN_ASSIGN_OR_RETURN(plan.dtype, ParseDType(*d));
  }
  VTRAIN_RETURN_IF_ERROR(ValidateJob(job));
  return job;
}

}  // namespace vtrain::cli
