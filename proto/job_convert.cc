#include "proto/job_convert.h"

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/spec/pipeline_layout.h"
#include "core/spec/settings.h"
#include "core/util/status_macros.h"
#include "proto/enum_convert.h"
#include "proto/megatron_args.h"
#include "proto/megatron_bridge.h"
#include "proto/moe_convert.h"
#include "proto/reliability_convert.h"

namespace vtrain::proto {

namespace {

// A field with explicit presence that was given must be at least 1 (or, for
// a double, positive): a 0 is never read as "the default".
// `has_default`: whether leaving the field out is an option to suggest.
template <typename T>
void CheckGiven(bool has, T value, const char* field, const char* flag,
                std::vector<std::string>& problems, bool has_default = true) {
  if (has && !(value >= 1 || (std::is_floating_point_v<T> && value > 0))) {
    problems.push_back(absl::StrCat(field, "=", value, " (", flag, ") must be ",
                                    std::is_floating_point_v<T> ? "positive" : "at least 1",
                                    has_default ? "; leave it out for the default" : ""));
  }
}

absl::Status Problems(const std::vector<std::string>& problems) {
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
}

}  // namespace

absl::StatusOr<ModelSpec> ModelFromProto(const v1::ModelSpec& m) {
  std::vector<std::string> problems;
  CheckGiven(m.has_num_layers(), m.num_layers(), "model.num_layers", "--layers", problems);
  CheckGiven(m.has_hidden_size(), m.hidden_size(), "model.hidden_size", "--hidden", problems);
  CheckGiven(m.has_num_heads(), m.num_heads(), "model.num_heads", "--heads", problems);
  CheckGiven(m.has_seq_len(), m.seq_len(), "model.seq_len", "--seq-len", problems);
  CheckGiven(m.has_vocab_size(), m.vocab_size(), "model.vocab_size", "--vocab", problems);
  CheckGiven(m.has_ffn_hidden_size(), m.ffn_hidden_size(), "model.ffn_hidden_size", "--ffn",
             problems);
  CheckGiven(m.has_num_kv_heads(), m.num_kv_heads(), "model.num_kv_heads", "--kv-heads", problems);
  VTRAIN_RETURN_IF_ERROR(Problems(problems));
  ModelSpec model;
  if (!m.preset().empty()) {
    absl::StatusOr<ModelSpec> preset = ModelPreset(m.preset());
    if (!preset.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("model.preset: ", preset.status().message()));
    }
    model = *preset;
  } else {
    model.name = "custom";
    if (!m.has_num_layers() || !m.has_hidden_size() || !m.has_num_heads() || !m.has_seq_len()) {
      return absl::InvalidArgumentError(
          "model: give model.preset (--model), or model.num_layers, model.hidden_size, "
          "model.num_heads and model.seq_len (--layers, --hidden, --heads, --seq-len)");
    }
  }
  if (m.has_num_layers()) model.num_layers = m.num_layers();
  if (m.has_hidden_size()) model.hidden_size = m.hidden_size();
  if (m.has_num_heads()) model.num_heads = m.num_heads();
  if (m.has_seq_len()) model.seq_len = m.seq_len();
  if (m.has_vocab_size()) model.vocab_size = m.vocab_size();
  if (m.has_ffn_hidden_size()) model.ffn_hidden_size = m.ffn_hidden_size();
  if (m.arch() != v1::ARCHITECTURE_UNSPECIFIED) {
    VTRAIN_ASSIGN_OR_RETURN(model.arch, FromProtoOr(m.arch(), model.arch, "model.arch"));
  }
  if (m.has_num_kv_heads()) model.num_kv_heads = m.num_kv_heads();
  MoeModelFromProto(m, model, problems);
  VTRAIN_RETURN_IF_ERROR(Problems(problems));
  return model;
}

absl::StatusOr<ClusterSpec> ClusterFromProto(const v1::ClusterSpec& c, GpuLookup gpus) {
  std::vector<std::string> problems;
  CheckGiven(c.has_num_gpus(), c.num_gpus(), "cluster.num_gpus", "--gpus", problems);
  CheckGiven(c.has_gpus_per_node(), c.gpus_per_node(), "cluster.gpus_per_node", "--gpus-per-node",
             problems);
  CheckGiven(c.has_nvlink_domain(), c.nvlink_domain(), "cluster.nvlink_domain", "--nvlink-domain",
             problems);
  CheckGiven(c.has_intra_node_bandwidth_bytes_per_s(), c.intra_node_bandwidth_bytes_per_s(),
             "cluster.intra_node_bandwidth_bytes_per_s", "--intra-node-bandwidth", problems);
  CheckGiven(c.has_inter_node_bandwidth_bytes_per_s(), c.inter_node_bandwidth_bytes_per_s(),
             "cluster.inter_node_bandwidth_bytes_per_s", "--inter-node-bandwidth", problems);
  VTRAIN_RETURN_IF_ERROR(Problems(problems));
  absl::StatusOr<GpuSpec> gpu = gpus(c.gpu().empty() ? kDefaultGpu : c.gpu());
  if (!gpu.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cluster.gpu: ", gpu.status().message()));
  }
  ClusterSpec cluster = DefaultCluster(*gpu, c.num_gpus());
  if (c.has_gpus_per_node()) cluster.gpus_per_node = c.gpus_per_node();
  if (c.has_nvlink_domain()) cluster.nvlink_domain = c.nvlink_domain();
  if (c.has_intra_node_bandwidth_bytes_per_s()) {
    cluster.intra_node_bandwidth_bytes_per_s = c.intra_node_bandwidth_bytes_per_s();
  }
  if (c.has_inter_node_bandwidth_bytes_per_s()) {
    cluster.inter_node_bandwidth_bytes_per_s = c.inter_node_bandwidth_bytes_per_s();
  }
  cluster.price_usd_per_gpu_hour = c.price_usd_per_gpu_hour();
  cluster.reliability = ReliabilityFromProto(c.reliability());
  const v1::Fabric& f = c.fabric();
  cluster.fabric.nodes_per_leaf = f.nodes_per_leaf();
  if (f.has_oversubscription()) cluster.fabric.oversubscription = f.oversubscription();
  cluster.fabric.cluster_nodes = f.cluster_nodes();
  cluster.fabric.nodes.assign(f.nodes().begin(), f.nodes().end());
  VTRAIN_ASSIGN_OR_RETURN(cluster.fabric.placement, FromProtoOr(f.placement(), Placement::kPacked,
                                                                "cluster.fabric.placement"));
  // Checked here too, not only by ValidateJob: a search, curve or model plan
  // would otherwise refuse every plan it considers for the same reason.
  std::vector<std::string> reliability;
  CheckReliability(cluster.reliability, reliability);
  VTRAIN_RETURN_IF_ERROR(Problems(reliability));
  return cluster;
}

namespace {

// plan.pipeline_layout, plan.first_stage_layers and plan.last_stage_layers.
void LayoutFromProto(const v1::ParallelPlan& p, ParallelPlan& plan,
                     std::vector<std::string>& problems) {
  CheckGiven(p.has_first_stage_layers(), p.first_stage_layers(), "plan.first_stage_layers",
             "--first-stage-layers", problems);
  CheckGiven(p.has_last_stage_layers(), p.last_stage_layers(), "plan.last_stage_layers",
             "--last-stage-layers", problems);
  if (p.has_first_stage_layers()) plan.layout.first_stage_layers = p.first_stage_layers();
  if (p.has_last_stage_layers()) plan.layout.last_stage_layers = p.last_stage_layers();
  if (p.pipeline_layout().empty() || p.pipeline_layout() == "auto") return;
  absl::StatusOr<std::vector<ChunkContent>> chunks =
      ParsePipelineLayout(p.pipeline_layout(), "plan.pipeline_layout (--pipeline-layout)");
  if (chunks.ok()) {
    plan.layout.chunks = *std::move(chunks);
  } else {
    problems.emplace_back(chunks.status().message());
  }
}

// The training settings `p` gives (the others come from its settings base).
GivenSettings GivenOf(const v1::ParallelPlan& p) {
  GivenSettings given;
  given.dtype = p.dtype() != v1::DTYPE_UNSPECIFIED;
  given.recompute = p.recompute() != v1::RECOMPUTE_UNSPECIFIED;
  given.recompute_modules = p.recompute_modules_size() > 0;
  given.sequence_parallel = p.has_sequence_parallel();
  given.sharding = p.data_parallel_sharding() != v1::DATA_PARALLEL_SHARDING_UNSPECIFIED;
  given.gradient_bucketing = p.has_gradient_bucketing();
  given.param_gather_overlap = p.has_param_gather_overlap();
  given.tp_comm_overlap = p.has_tp_comm_overlap();
  given.dispatcher = p.moe_dispatcher() != v1::MOE_DISPATCHER_UNSPECIFIED;
  given.moe_overlap = p.has_moe_overlap();
  given.bf16_moments = p.has_bf16_moments();
  given.fp32_grads = p.has_fp32_grads();
  return given;
}

// The plan's defaults; d comes from the GPU count when not given. The
// training settings are taken where given and listed in `given`; the rest
// are filled from plan.settings by FillSettings.
absl::Status PlanFromProto(const v1::ParallelPlan& p, Job& job, GivenSettings& given) {
  std::vector<std::string> problems;
  CheckGiven(p.has_tensor_parallel(), p.tensor_parallel(), "plan.tensor_parallel", "--tp",
             problems);
  CheckGiven(p.has_data_parallel(), p.data_parallel(), "plan.data_parallel", "--dp", problems);
  CheckGiven(p.has_pipeline_parallel(), p.pipeline_parallel(), "plan.pipeline_parallel", "--pp",
             problems);
  CheckGiven(p.has_micro_batch(), p.micro_batch(), "plan.micro_batch", "--micro-batch", problems);
  CheckGiven(p.has_global_batch(), p.global_batch(), "plan.global_batch", "--global-batch",
             problems, /*has_default=*/false);
  CheckGiven(p.has_bucket_size_bytes(), p.bucket_size_bytes(), "plan.bucket_size_bytes",
             "--bucket-size", problems);
  CheckGiven(p.has_context_parallel(), p.context_parallel(), "plan.context_parallel", "--cp",
             problems);
  CheckGiven(p.has_virtual_stages(), p.virtual_stages(), "plan.virtual_stages", "--virtual-stages",
             problems);
  VTRAIN_RETURN_IF_ERROR(Problems(problems));
  ParallelPlan& plan = job.plan;
  if (p.has_tensor_parallel()) plan.tensor_parallel = p.tensor_parallel();
  if (p.has_pipeline_parallel()) plan.pipeline_parallel = p.pipeline_parallel();
  if (p.has_micro_batch()) plan.micro_batch = p.micro_batch();
  if (p.has_context_parallel()) plan.context_parallel = p.context_parallel();
  if (p.has_virtual_stages()) plan.virtual_stages = p.virtual_stages();
  if (p.has_sequence_parallel()) plan.sequence_parallel = p.sequence_parallel();
  if (!p.has_global_batch()) {
    return absl::InvalidArgumentError(
        "plan.global_batch (--global-batch) is required; give the batch in sequences");
  }
  plan.global_batch = p.global_batch();
  const int64_t gpus = job.cluster.num_gpus;
  if (p.has_data_parallel()) {
    plan.data_parallel = p.data_parallel();
  } else if (gpus > 0 && plan.tensor_parallel > 0 && plan.pipeline_parallel > 0 &&
             plan.context_parallel > 0 && plan.tensor_parallel <= (int64_t{1} << 20) &&
             plan.pipeline_parallel <= (int64_t{1} << 20) &&
             plan.context_parallel <= (int64_t{1} << 20)) {
    const int64_t tp_pp = plan.tensor_parallel * plan.pipeline_parallel;
    // Checked in two steps so that t * p * c cannot overflow.
    if (gpus % tp_pp != 0 || (gpus / tp_pp) % plan.context_parallel != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster.num_gpus=", gpus, " (--gpus) is not divisible by plan.tensor_parallel * ",
          "plan.context_parallel * plan.pipeline_parallel (--tp * --cp * --pp) = ", tp_pp, " * ",
          plan.context_parallel,
          "; choose a GPU count that is a multiple of it, or set plan.data_parallel (--dp)"));
    }
    plan.data_parallel = gpus / tp_pp / plan.context_parallel;
  }
  constexpr int64_t kBound = int64_t{1} << 20;
  if (gpus == 0 && plan.tensor_parallel > 0 && plan.data_parallel > 0 &&
      plan.pipeline_parallel > 0 && plan.context_parallel > 0 && plan.tensor_parallel <= kBound &&
      plan.data_parallel <= kBound && plan.pipeline_parallel <= kBound &&
      plan.context_parallel <= kBound) {
    const int64_t tdp = plan.tensor_parallel * plan.data_parallel * plan.pipeline_parallel;
    // Beyond 2^24 GPUs ValidateJob refuses the count; keep it from overflowing.
    job.cluster.num_gpus = tdp > (int64_t{1} << 40) ? tdp : tdp * plan.context_parallel;
  }
  if (p.has_gradient_bucketing()) plan.gradient_bucketing = p.gradient_bucketing();
  if (p.has_tp_comm_overlap()) plan.tp_comm_overlap = p.tp_comm_overlap();
  if (p.has_param_gather_overlap()) plan.param_gather_overlap = p.param_gather_overlap();
  if (p.has_bf16_moments()) plan.bf16_moments = p.bf16_moments();
  if (p.has_fp32_grads()) plan.fp32_grads = p.fp32_grads();
  CheckGiven(p.has_cp_a2a_size(), p.cp_a2a_size(), "plan.cp_a2a_size", "--cp-a2a-size", problems);
  if (p.has_cp_a2a_size()) plan.cp_a2a_size = p.cp_a2a_size();
  if (p.has_bucket_size_bytes()) plan.bucket_size_bytes = p.bucket_size_bytes();
  // Enum fields: each problem is reported, not just the first.
  auto take = [&problems](auto status_or, auto& into) {
    if (status_or.ok()) {
      into = *status_or;
    } else {
      problems.emplace_back(status_or.status().message());
    }
  };
  take(FromProtoOr(p.schedule(), PipelineSchedule::k1F1B, "plan.schedule"), plan.schedule);
  take(FromProtoOr(p.recompute(), Recompute::kFull, "plan.recompute"), plan.recompute);
  take(FromProtoOr(p.dtype(), DType::kFp16, "plan.dtype"), plan.dtype);
  take(FromProtoOr(p.data_parallel_sharding(), DataParallelSharding::kNone,
                   "plan.data_parallel_sharding"),
       plan.data_parallel_sharding);
  take(FromProtoOr(p.cp_comm(), ContextParallelComm::kP2P, "plan.cp_comm"), plan.cp_comm);
  take(FromProtoOr(p.fp8_recipe(), Fp8Recipe::kDelayed, "plan.fp8_recipe"), plan.fp8_recipe);
  for (const std::string& name : p.recompute_modules()) {
    absl::StatusOr<RecomputeModule> module = ParseRecomputeModule(name);
    if (module.ok()) {
      plan.recompute_modules |= *module;
    } else {
      problems.emplace_back(module.status().message());
    }
  }
  take(FromProtoOr(p.settings(), SettingsBase::kTuned, "plan.settings"), plan.settings);
  MoePlanFromProto(p, plan, problems);
  LayoutFromProto(p, plan, problems);
  given = GivenOf(p);
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  return absl::OkStatus();
}

}  // namespace

void LayRequestOver(const v1::PredictRequest& over, v1::PredictRequest& base) {
  if (over.plan().recompute_modules_size() > 0) base.mutable_plan()->clear_recompute_modules();
  if (over.cluster().has_num_gpus()) base.mutable_plan()->clear_data_parallel();
  base.MergeFrom(over);
}

absl::StatusOr<Job> JobFromProto(const v1::PredictRequest& request, GpuLookup gpus) {
  // A Megatron-LM launch carried as text: its job, the fields laid over it.
  v1::PredictRequest expanded;
  const bool args = !request.megatron_args().empty();
  const bool bridge = !request.megatron_bridge_config().empty();
  if (args && bridge) {
    return absl::InvalidArgumentError(
        "megatron_args and megatron_bridge_config are both set: give one launch");
  }
  if (args || bridge) {
    absl::StatusOr<MegatronJob> launch =
        args ? RequestFromMegatronArgs(request.megatron_args(), "megatron_args")
             : RequestFromBridgeConfig(request.megatron_bridge_config(), "megatron_bridge_config");
    if (!launch.ok()) return launch.status();
    absl::StatusOr<v1::PredictRequest> laid = LayOver(*std::move(launch), request);
    if (!laid.ok()) return laid.status();
    expanded = *std::move(laid);
  }
  const v1::PredictRequest& r = args || bridge ? expanded : request;
  Job job;
  VTRAIN_ASSIGN_OR_RETURN(job.model, ModelFromProto(r.model()));
  VTRAIN_ASSIGN_OR_RETURN(job.cluster, ClusterFromProto(r.cluster(), gpus));
  if (r.has_memory_headroom()) job.cluster.memory_headroom = r.memory_headroom();
  GivenSettings given;
  VTRAIN_RETURN_IF_ERROR(PlanFromProto(r.plan(), job, given));
  given.attention_impl = r.model().attention_impl() != v1::ATTENTION_IMPL_UNSPECIFIED;
  FillSettings(given, job);
  VTRAIN_RETURN_IF_ERROR(ValidateJob(job));
  return job;
}

absl::StatusOr<PredictOptions> OptionsFromProto(const v1::PredictRequest& r) {
  PredictOptions o;
  VTRAIN_ASSIGN_OR_RETURN(o.granularity,
                          FromProtoOr(r.granularity(), Granularity::kOperator, "granularity"));
  if (!(r.train_tokens() >= 0 && r.train_tokens() <= kMaxTrainTokens)) {
    return absl::InvalidArgumentError(
        absl::StrCat("train_tokens=", r.train_tokens(), " (--tokens) must be a number in [0, ",
                     kMaxTrainTokens, "], e.g. 270e9 (0: per iteration only)"));
  }
  o.train_tokens = r.train_tokens();
  return o;
}

v1::PredictRequest JobToProto(const Job& job) {
  v1::PredictRequest r;
  v1::ModelSpec* m = r.mutable_model();
  // The preset's name only when it is one (custom and test models are not).
  if (ModelPreset(job.model.name).ok()) m->set_preset(job.model.name);
  m->set_num_layers(job.model.num_layers);
  m->set_hidden_size(job.model.hidden_size);
  m->set_num_heads(job.model.num_heads);
  m->set_seq_len(job.model.seq_len);
  m->set_vocab_size(job.model.vocab_size);
  m->set_ffn_hidden_size(job.model.ffn());
  if (job.model.arch != Architecture::kGpt) m->set_arch(ToProto(job.model.arch));
  if (job.model.kv_heads() != job.model.num_heads) m->set_num_kv_heads(job.model.kv_heads());
  MoeModelToProto(job.model, *m);
  v1::ClusterSpec* c = r.mutable_cluster();
  c->set_gpu(job.cluster.gpu.name);
  c->set_num_gpus(job.cluster.num_gpus);
  c->set_gpus_per_node(job.cluster.gpus_per_node);
  if (job.cluster.nvlink_domain > 0) c->set_nvlink_domain(job.cluster.nvlink_domain);
  c->set_intra_node_bandwidth_bytes_per_s(job.cluster.intra_node_bandwidth_bytes_per_s);
  c->set_inter_node_bandwidth_bytes_per_s(job.cluster.inter_node_bandwidth_bytes_per_s);
  c->set_price_usd_per_gpu_hour(job.cluster.price_usd_per_gpu_hour);
  ReliabilityToProto(job.cluster.reliability, c->mutable_reliability());
  if (!job.cluster.fabric.flat()) {
    v1::Fabric* f = c->mutable_fabric();
    f->set_nodes_per_leaf(job.cluster.fabric.nodes_per_leaf);
    f->set_oversubscription(job.cluster.fabric.oversubscription);
    f->set_placement(ToProto(job.cluster.fabric.placement));
    f->set_cluster_nodes(job.cluster.fabric.cluster_nodes);
    for (int64_t n : job.cluster.fabric.nodes) f->add_nodes(n);
  }
  r.set_memory_headroom(job.cluster.memory_headroom);
  v1::ParallelPlan* p = r.mutable_plan();
  p->set_tensor_parallel(job.plan.tensor_parallel);
  p->set_data_parallel(job.plan.data_parallel);
  p->set_pipeline_parallel(job.plan.pipeline_parallel);
  p->set_micro_batch(job.plan.micro_batch);
  p->set_global_batch(job.plan.global_batch);
  p->set_schedule(ToProto(job.plan.schedule));
  p->set_recompute(ToProto(job.plan.recompute));
  for (absl::string_view name : RecomputeModuleNames(job.plan.recompute_modules)) {
    p->add_recompute_modules(std::string(name));
  }
  p->set_gradient_bucketing(job.plan.gradient_bucketing);
  p->set_tp_comm_overlap(job.plan.tp_comm_overlap);
  p->set_param_gather_overlap(job.plan.param_gather_overlap);
  p->set_bf16_moments(job.plan.bf16_moments);
  p->set_fp32_grads(job.plan.fp32_grads);
  if (job.plan.cp_comm != ContextParallelComm::kP2P) p->set_cp_comm(ToProto(job.plan.cp_comm));
  if (job.plan.cp_a2a_size > 0) p->set_cp_a2a_size(job.plan.cp_a2a_size);
  if (job.plan.fp8_recipe != Fp8Recipe::kDelayed) p->set_fp8_recipe(ToProto(job.plan.fp8_recipe));
  p->set_bucket_size_bytes(job.plan.bucket_size_bytes);
  p->set_dtype(ToProto(job.plan.dtype));
  p->set_sequence_parallel(job.plan.sequence_parallel);
  p->set_context_parallel(job.plan.context_parallel);
  p->set_data_parallel_sharding(ToProto(job.plan.data_parallel_sharding));
  p->set_virtual_stages(job.plan.virtual_stages);
  MoePlanToProto(job.plan, *p);
  // Every setting is written, so that the job reads back as it is whatever
  // its settings base would fill.
  if (job.model.is_moe()) p->set_moe_dispatcher(ToProto(job.plan.moe.dispatcher));
  m->set_attention_impl(ToProto(job.model.attention_impl));
  p->set_settings(ToProto(job.plan.settings));
  const PipelineLayout& layout = job.plan.layout;
  if (layout.first_stage_layers > 0) p->set_first_stage_layers(layout.first_stage_layers);
  if (layout.last_stage_layers > 0) p->set_last_stage_layers(layout.last_stage_layers);
  // An explicit layout, written back in its normal form (resolving it keeps
  // its chunks as given).
  if (!layout.chunks.empty()) {
    if (absl::StatusOr<std::vector<ChunkLayers>> chunks = ResolvePipelineLayout(job); chunks.ok()) {
      p->set_pipeline_layout(FormatPipelineLayout(*chunks));
    }
  }
  return r;
}

}  // namespace vtrain::proto
