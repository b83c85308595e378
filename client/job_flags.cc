#include "client/job_flags.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/fabric_flags.h"
#include "client/measurements.h"
#include "client/moe_flags.h"
#include "client/prediction_format.h"
#include "core/spec/settings.h"
#include "core/util/status_macros.h"
#include "proto/enum_convert.h"
#include "proto/job_convert.h"
#include "proto/json.h"
#include "proto/megatron_args.h"
#include "proto/megatron_bridge.h"
#include "proto/shell_words.h"
#include "proto/vtrain_config.h"

namespace vtrain::client {

namespace {

// Megatron-Core's switches, as they appear in a plan and in a plan space
// (the same flags, the same field names under `plan.` or `space.`).
struct Switches {
  std::optional<bool> gradient_bucketing, tp_comm_overlap, param_gather_overlap;
  std::optional<ContextParallelComm> cp_comm;
  std::optional<Fp8Recipe> fp8_recipe;
};

absl::StatusOr<Switches> SwitchesFromFlags(const common::FlagParser& flags,
                                           absl::string_view message) {
  auto field = [&](absl::string_view name) { return absl::StrCat(message, ".", name); };
  Switches s;
  VTRAIN_ASSIGN_OR_RETURN(s.gradient_bucketing,
                          flags.GetOnOff("gradient-bucketing", field("gradient_bucketing")));
  VTRAIN_ASSIGN_OR_RETURN(s.tp_comm_overlap,
                          flags.GetOnOff("tp-comm-overlap", field("tp_comm_overlap")));
  VTRAIN_ASSIGN_OR_RETURN(s.param_gather_overlap,
                          flags.GetOnOff("overlap-param-gather", field("param_gather_overlap")));
  VTRAIN_ASSIGN_OR_RETURN(s.cp_comm, flags.GetParsed("cp-comm", ParseCpComm));
  VTRAIN_ASSIGN_OR_RETURN(s.fp8_recipe, flags.GetParsed("fp8-recipe", ParseFp8Recipe));
  return s;
}

template <typename Message>
void SetSwitches(const Switches& s, Message& m) {
  if (s.gradient_bucketing) m.set_gradient_bucketing(*s.gradient_bucketing);
  if (s.tp_comm_overlap) m.set_tp_comm_overlap(*s.tp_comm_overlap);
  if (s.param_gather_overlap) m.set_param_gather_overlap(*s.param_gather_overlap);
  if (s.cp_comm) m.set_cp_comm(proto::ToProto(*s.cp_comm));
  if (s.fp8_recipe) m.set_fp8_recipe(proto::ToProto(*s.fp8_recipe));
}

// Calls `set` with the integer value of `flag` when present.
template <typename Setter>
absl::Status SetInt(const common::FlagParser& flags, absl::string_view flag, Setter set) {
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> v, flags.GetInt(flag));
  if (v) set(*v);
  return absl::OkStatus();
}

// "25MiB", "1GB", "1048576": a size in bytes.
absl::StatusOr<int64_t> ParseBytes(absl::string_view text, absl::string_view field) {
  // Reuse the bandwidth parser by appending "/s" to a plain size.
  if (!text.empty() && (text.back() == 'B')) {
    VTRAIN_ASSIGN_OR_RETURN(double bytes, ParseBandwidth(absl::StrCat(text, "/s"), field));
    // A double past 2^62 does not convert to int64_t: refuse it by name.
    constexpr double kMaxBytes = 4.0 * (int64_t{1} << 60);
    if (!(bytes >= 1 && bytes <= kMaxBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(field, "='", text,
                                                     "' is out of range; write a size from 1B "
                                                     "to 4EiB, e.g. 25MiB"));
    }
    return static_cast<int64_t>(bytes);
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "='", text, "' is not a size; write e.g. 25MiB or 26214400"));
  }
  return value;
}

absl::Status PlanFromFlags(const common::FlagParser& flags, v1::ParallelPlan& plan) {
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "tp", [&](int64_t v) { plan.set_tensor_parallel(v); }));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "pp", [&](int64_t v) { plan.set_pipeline_parallel(v); }));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "dp", [&](int64_t v) { plan.set_data_parallel(v); }));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "micro-batch", [&](int64_t v) { plan.set_micro_batch(v); }));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "cp", [&](int64_t v) { plan.set_context_parallel(v); }));
  VTRAIN_RETURN_IF_ERROR(
      SetInt(flags, "virtual-stages", [&](int64_t v) { plan.set_virtual_stages(v); }));
  if (auto layout = flags.Get("pipeline-layout")) plan.set_pipeline_layout(*layout);
  VTRAIN_RETURN_IF_ERROR(
      SetInt(flags, "first-stage-layers", [&](int64_t v) { plan.set_first_stage_layers(v); }));
  VTRAIN_RETURN_IF_ERROR(
      SetInt(flags, "last-stage-layers", [&](int64_t v) { plan.set_last_stage_layers(v); }));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<SettingsBase> settings,
                          flags.GetParsed("settings", ParseSettings));
  if (settings) plan.set_settings(proto::ToProto(*settings));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<bool> moments,
                          flags.GetOnOff("bf16-moments", "plan.bf16_moments"));
  if (moments) plan.set_bf16_moments(*moments);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<bool> fp32_grads,
                          flags.GetOnOff("fp32-grads", "plan.fp32_grads"));
  if (fp32_grads) plan.set_fp32_grads(*fp32_grads);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<bool> sp,
                          flags.GetOnOff("sequence-parallel", "plan.sequence_parallel"));
  if (sp) plan.set_sequence_parallel(*sp);
  if (auto sh = flags.Get("data-parallel-sharding")) {
    VTRAIN_ASSIGN_OR_RETURN(DataParallelSharding sharding, ParseSharding(*sh));
    plan.set_data_parallel_sharding(proto::ToProto(sharding));
  }
  VTRAIN_RETURN_IF_ERROR(
      SetInt(flags, "global-batch", [&](int64_t v) { plan.set_global_batch(v); }));
  if (auto s = flags.Get("schedule")) {
    VTRAIN_ASSIGN_OR_RETURN(PipelineSchedule schedule, ParseSchedule(*s));
    plan.set_schedule(proto::ToProto(schedule));
    // DualPipeV always runs two chunks per stage: the default follows it.
    if (schedule == PipelineSchedule::kDualPipeV && !flags.Get("virtual-stages")) {
      plan.set_virtual_stages(2);
    }
  }
  if (auto r = flags.Get("recompute")) {
    VTRAIN_ASSIGN_OR_RETURN(Recompute recompute, ParseRecompute(*r));
    plan.set_recompute(proto::ToProto(recompute));
  }
  if (auto modules = flags.Get("recompute-modules")) {
    // ',' or ':' (a measurements CSV cell cannot hold a comma).
    for (absl::string_view name : absl::StrSplit(*modules, absl::ByAnyChar(",:"))) {
      plan.add_recompute_modules(std::string(name));
    }
  }
  VTRAIN_ASSIGN_OR_RETURN(const Switches switches, SwitchesFromFlags(flags, "plan"));
  SetSwitches(switches, plan);
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "cp-a2a-size", [&](int64_t v) { plan.set_cp_a2a_size(v); }));
  if (auto size = flags.Get("bucket-size")) {
    VTRAIN_ASSIGN_OR_RETURN(int64_t bytes, ParseBytes(*size, "plan.bucket_size_bytes"));
    plan.set_bucket_size_bytes(bytes);
  }
  if (auto d = flags.Get("dtype")) {
    VTRAIN_ASSIGN_OR_RETURN(DType dtype, ParseDType(*d));
    plan.set_dtype(proto::ToProto(dtype));
  }
  return MoePlanFromFlags(flags, plan);
}

// The request the job flags alone describe (absent flags stay unset).
absl::StatusOr<v1::PredictRequest> OwnFlags(const common::FlagParser& flags) {
  v1::PredictRequest r;
  VTRAIN_ASSIGN_OR_RETURN(*r.mutable_model(), ModelSpecFromFlags(flags));
  VTRAIN_ASSIGN_OR_RETURN(*r.mutable_cluster(), ClusterSpecFromFlags(flags));
  VTRAIN_RETURN_IF_ERROR(
      SetInt(flags, "gpus", [&](int64_t v) { r.mutable_cluster()->set_num_gpus(v); }));
  VTRAIN_RETURN_IF_ERROR(PlanFromFlags(flags, *r.mutable_plan()));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> headroom, flags.GetDouble("memory-headroom"));
  if (headroom) r.set_memory_headroom(*headroom);
  return r;
}

// The request in -f FILE or --vtrain-config FILE, the job flags laid over
// it (they win).
absl::StatusOr<v1::PredictRequest> RequestFromFile(const common::FlagParser& flags) {
  if (flags.Has("job-file") && flags.Has("vtrain-config")) {
    return absl::InvalidArgumentError("give either -f/--job-file or --vtrain-config, not both");
  }
  const std::string path = *flags.Get(flags.Has("job-file") ? "job-file" : "vtrain-config");
  VTRAIN_ASSIGN_OR_RETURN(std::string text, common::ReadFile(path));
  absl::StatusOr<v1::PredictRequest> request;
  if (flags.Has("vtrain-config")) {
    request = proto::RequestFromVtrainConfig(text);
  } else {
    request.emplace();
    if (absl::Status s = proto::FromJson(text, &*request); !s.ok()) request = s;
  }
  if (!request.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", request.status().message()));
  }
  VTRAIN_ASSIGN_OR_RETURN(v1::PredictRequest over, OwnFlags(flags));
  proto::LayRequestOver(over, *request);
  return request;
}

// The request a Megatron-LM launch describes, with the other job flags laid
// over it (flags win).
absl::StatusOr<v1::PredictRequest> RequestFromMegatron(const common::FlagParser& flags,
                                                       std::vector<std::string>* notes) {
  const bool bridge = flags.Has("megatron-bridge-config");
  if (flags.Has("job-file") || flags.Has("vtrain-config") ||
      (bridge && flags.Has("megatron-args"))) {
    return absl::InvalidArgumentError(
        "give one of --megatron-args, --megatron-bridge-config, -f/--job-file and "
        "--vtrain-config");
  }
  const std::string path = *flags.Get(bridge ? "megatron-bridge-config" : "megatron-args");
  const size_t limit = bridge ? proto::kMaxBridgeConfigBytes : proto::kMaxShellBytes;
  absl::StatusOr<std::string> text =
      path == "-" ? common::ReadStdin(limit) : common::ReadFile(path, limit);
  if (!text.ok()) return text.status();
  const std::string name = path == "-" ? "stdin" : path;
  VTRAIN_ASSIGN_OR_RETURN(proto::MegatronJob job,
                          bridge ? proto::RequestFromBridgeConfig(*text, name)
                                 : proto::RequestFromMegatronArgs(*text, name));
  if (notes != nullptr) {
    if (!job.ignored.empty()) {
      // "--lr (learning rate)": the names, grouped by why.
      std::map<std::string, std::vector<std::string>> by_why;
      for (const std::string& i : job.ignored) {
        const size_t open = i.find(" (");
        by_why[open == std::string::npos ? "" : i.substr(open + 2, i.size() - open - 3)].push_back(
            i.substr(0, open));
      }
      // A config dump holds hundreds of fields: then the largest groups,
      // counted, stand for the rest.
      std::vector<std::string> groups;
      if (job.ignored.size() <= 40) {
        for (const auto& [why, names] : by_why) {
          groups.push_back(absl::StrCat(why, ": ", absl::StrJoin(names, " ")));
        }
      } else {
        std::vector<std::pair<size_t, std::string>> largest;
        for (const auto& [why, names] : by_why) largest.emplace_back(names.size(), why);
        std::sort(largest.begin(), largest.end(),
                  [](const auto& a, const auto& b) { return a.first > b.first; });
        for (size_t i = 0; i < largest.size() && i < 4; ++i) {
          groups.push_back(absl::StrCat(largest[i].second, ": ", largest[i].first));
        }
        if (largest.size() > 4) groups.push_back(absl::StrCat(largest.size() - 4, " more groups"));
      }
      notes->push_back(absl::StrCat("ignored, no step time: ", job.ignored.size(),
                                    job.ignored.size() == 1 ? " field (" : " fields (",
                                    absl::StrJoin(groups, "; "), ")"));
    }
    for (const std::string& n : job.notes) notes->push_back(n);
  }
  VTRAIN_ASSIGN_OR_RETURN(v1::PredictRequest over, OwnFlags(flags));
  return proto::LayOver(std::move(job), over);
}

}  // namespace

absl::Status ReliabilityFromFlags(const common::FlagParser& flags, v1::Reliability& r) {
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> rate, flags.GetDouble("node-failure-rate"));
  if (rate) r.set_node_failures_per_1000_node_days(*rate);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> gbps, flags.GetDouble("checkpoint-gbps"));
  if (gbps) r.set_checkpoint_gbps(*gbps);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<bool> async, flags.GetOnOff("async-checkpoint"));
  if (async) r.set_async_checkpoint(*async);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> restart, flags.GetDouble("restart-minutes"));
  if (restart) r.set_restart_minutes(*restart);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> interval, flags.GetDouble("checkpoint-interval"));
  if (interval) r.set_checkpoint_interval_s(*interval);
  return absl::OkStatus();
}

absl::StatusOr<v1::PlanSpace> PlanSpaceFromFlags(const common::FlagParser& flags) {
  v1::PlanSpace space;
  // Each item of a comma-separated flag, parsed by `add`.
  auto each = [&flags](const char* flag, auto add) -> absl::Status {
    if (auto list = flags.Get(flag)) {
      for (absl::string_view v : absl::StrSplit(*list, ',', absl::SkipEmpty())) {
        VTRAIN_RETURN_IF_ERROR(add(v));
      }
    }
    return absl::OkStatus();
  };
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> max_tp, flags.GetIntIn("max-tp", 1, 1024));
  if (max_tp) {
    for (int64_t t = 1; t <= *max_tp; t *= 2) space.add_tensor_parallel(t);
  }
  VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> tps, flags.GetIntList("tp-values"));
  space.mutable_tensor_parallel()->Add(tps.begin(), tps.end());
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> max_dp, flags.GetInt("max-dp"));
  if (max_dp) space.set_max_data_parallel(*max_dp);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> max_mb, flags.GetInt("max-micro-batch"));
  if (max_mb) space.set_max_micro_batch(*max_mb);
  for (const char* flag : {"schedule-values", "schedules"}) {
    VTRAIN_RETURN_IF_ERROR(each(flag, [&](absl::string_view v) -> absl::Status {
      VTRAIN_ASSIGN_OR_RETURN(PipelineSchedule x, ParseSchedule(v));
      space.add_schedules(proto::ToProto(x));
      return absl::OkStatus();
    }));
  }
  VTRAIN_RETURN_IF_ERROR(each("recompute-values", [&](absl::string_view v) -> absl::Status {
    VTRAIN_ASSIGN_OR_RETURN(Recompute x, ParseRecompute(v));
    space.add_recomputes(proto::ToProto(x));
    return absl::OkStatus();
  }));
  VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> cps, flags.GetIntList("cp-values"));
  space.mutable_context_parallel_values()->Add(cps.begin(), cps.end());
  VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> vs, flags.GetIntList("virtual-stages-values"));
  space.mutable_virtual_stages_values()->Add(vs.begin(), vs.end());
  VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> pps, flags.GetIntList("pp-values"));
  space.mutable_pipeline_parallel_values()->Add(pps.begin(), pps.end());
  VTRAIN_RETURN_IF_ERROR(each("sequence-parallel-values", [&](absl::string_view v) {
    if (v != "on" && v != "off") {
      return absl::InvalidArgumentError(
          absl::StrCat("--sequence-parallel-values item '", v, "' must be on or off, e.g. on,off"));
    }
    space.add_sequence_parallel_values(v == "on");
    return absl::OkStatus();
  }));
  VTRAIN_RETURN_IF_ERROR(each("sharding-values", [&](absl::string_view v) -> absl::Status {
    absl::StatusOr<DataParallelSharding> x = ParseSharding(v);
    if (!x.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--sharding-values: ", x.status().message()));
    }
    space.add_shardings(proto::ToProto(*x));
    return absl::OkStatus();
  }));
  VTRAIN_ASSIGN_OR_RETURN(const Switches switches, SwitchesFromFlags(flags, "space"));
  SetSwitches(switches, space);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<SettingsBase> settings,
                          flags.GetParsed("settings", ParseSettings));
  if (settings) space.set_settings(proto::ToProto(*settings));
  VTRAIN_RETURN_IF_ERROR(MoeSpaceFromFlags(flags, space));
  return space;
}

absl::StatusOr<v1::ModelSpec> ModelSpecFromFlags(const common::FlagParser& flags) {
  v1::ModelSpec m;
  if (auto preset = flags.Get("model")) m.set_preset(*preset);
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "layers", [&](int64_t v) { m.set_num_layers(v); }));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "hidden", [&](int64_t v) { m.set_hidden_size(v); }));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "heads", [&](int64_t v) { m.set_num_heads(v); }));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "seq-len", [&](int64_t v) { m.set_seq_len(v); }));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "vocab", [&](int64_t v) { m.set_vocab_size(v); }));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "ffn", [&](int64_t v) { m.set_ffn_hidden_size(v); }));
  VTRAIN_RETURN_IF_ERROR(SetInt(flags, "kv-heads", [&](int64_t v) { m.set_num_kv_heads(v); }));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<Architecture> arch,
                          flags.GetParsed("arch", ParseArchitecture));
  if (arch) m.set_arch(proto::ToProto(*arch));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<AttentionImpl> impl,
                          flags.GetParsed("attention-impl", ParseAttentionImpl));
  if (impl) m.set_attention_impl(proto::ToProto(*impl));
  VTRAIN_RETURN_IF_ERROR(MoeModelFromFlags(flags, m));
  return m;
}

absl::StatusOr<v1::ClusterSpec> ClusterSpecFromFlags(const common::FlagParser& flags) {
  v1::ClusterSpec c;
  if (auto gpu = flags.Get("gpu")) c.set_gpu(*gpu);
  VTRAIN_RETURN_IF_ERROR(
      SetInt(flags, "gpus-per-node", [&](int64_t v) { c.set_gpus_per_node(v); }));
  VTRAIN_RETURN_IF_ERROR(
      SetInt(flags, "nvlink-domain", [&](int64_t v) { c.set_nvlink_domain(v); }));
  if (auto bw = flags.Get("intra-node-bandwidth")) {
    VTRAIN_ASSIGN_OR_RETURN(double bytes_per_s, ParseBandwidth(*bw, "--intra-node-bandwidth"));
    c.set_intra_node_bandwidth_bytes_per_s(bytes_per_s);
  }
  if (auto bw = flags.Get("inter-node-bandwidth")) {
    VTRAIN_ASSIGN_OR_RETURN(double bytes_per_s, ParseBandwidth(*bw, "--inter-node-bandwidth"));
    c.set_inter_node_bandwidth_bytes_per_s(bytes_per_s);
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> price, flags.GetDouble("price-usd-per-gpu-hour"));
  if (price) c.set_price_usd_per_gpu_hour(*price);
  VTRAIN_RETURN_IF_ERROR(ReliabilityFromFlags(flags, *c.mutable_reliability()));
  VTRAIN_RETURN_IF_ERROR(FabricFromFlags(flags, *c.mutable_fabric()));
  if (c.fabric().ByteSizeLong() == 0) c.clear_fabric();
  return c;
}

bool HasLaunch(const common::FlagParser& flags) {
  return flags.Has("megatron-args") || flags.Has("megatron-bridge-config");
}

absl::StatusOr<v1::PredictRequest> RequestFromFlags(const common::FlagParser& flags,
                                                    std::vector<std::string>* notes) {
  if (HasLaunch(flags)) return RequestFromMegatron(flags, notes);
  if (flags.Has("job-file") || flags.Has("vtrain-config")) return RequestFromFile(flags);
  return OwnFlags(flags);
}

absl::StatusOr<Job> JobFromFlags(const common::FlagParser& flags) {
  VTRAIN_ASSIGN_OR_RETURN(v1::PredictRequest request, RequestFromFlags(flags, nullptr));
  absl::StatusOr<Job> job = proto::JobFromProto(request);
  if (!job.ok() && (flags.Has("job-file") || flags.Has("vtrain-config"))) {
    const std::string path = *flags.Get(flags.Has("job-file") ? "job-file" : "vtrain-config");
    return absl::Status(job.status().code(), absl::StrCat(path, ": ", job.status().message()));
  }
  return job;
}

}  // namespace vtrain::client
