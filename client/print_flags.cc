// The job of a request as the vtrainctl flags that give it (predict
// --print-flags): declared in client/job_flags.h.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/job_flags.h"
#include "client/prediction_format.h"

namespace vtrain::client {

std::string FlagsOf(const v1::PredictRequest& r) {
  std::vector<std::string> f;
  auto add = [&f](absl::string_view flag, const auto& value) {
    f.push_back(absl::StrCat("--", flag, " ", value));
  };
  const v1::ModelSpec& m = r.model();
  if (!m.preset().empty()) add("model", m.preset());
  if (m.arch() != v1::ARCHITECTURE_UNSPECIFIED) add("arch", EnumName(m.arch()));
  if (m.has_num_layers()) add("layers", m.num_layers());
  if (m.has_hidden_size()) add("hidden", m.hidden_size());
  if (m.has_num_heads()) add("heads", m.num_heads());
  if (m.has_num_kv_heads()) add("kv-heads", m.num_kv_heads());
  if (m.has_head_dim()) add("head-dim", m.head_dim());
  if (m.has_ffn_hidden_size()) add("ffn", m.ffn_hidden_size());
  if (m.has_seq_len()) add("seq-len", m.seq_len());
  if (m.has_vocab_size()) add("vocab", m.vocab_size());
  if (m.attention_impl() != v1::ATTENTION_IMPL_UNSPECIFIED) {
    add("attention-impl", EnumName(m.attention_impl()));
  }
  if (m.attention() == v1::ATTENTION_KIND_MLA) {
    add("attention", "mla");
    add("mla-q-lora-rank", m.mla().q_lora_rank());
    add("mla-kv-lora-rank", m.mla().kv_lora_rank());
    add("mla-rope-dim", m.mla().rope_head_dim());
    add("mla-v-dim", m.mla().value_head_dim());
  }
  if (m.has_moe()) {
    const v1::MoeSpec& e = m.moe();
    if (e.has_num_experts()) add("num-experts", e.num_experts());
    if (e.has_top_k()) add("moe-top-k", e.top_k());
    if (e.has_expert_ffn()) add("moe-ffn", e.expert_ffn());
    if (e.has_shared_experts()) add("shared-experts", e.shared_experts());
    if (e.has_shared_expert_ffn()) add("shared-expert-ffn", e.shared_expert_ffn());
    if (e.has_dense_layers()) add("dense-layers", e.dense_layers());
    if (e.has_layer_freq()) add("moe-layer-freq", e.layer_freq());
    if (e.router() != v1::ROUTER_SCORE_UNSPECIFIED) add("router", EnumName(e.router()));
  }
  if (m.has_mtp_layers()) add("mtp-layers", m.mtp_layers());
  const v1::ClusterSpec& c = r.cluster();
  if (!c.gpu().empty()) add("gpu", c.gpu());
  if (c.has_num_gpus()) add("gpus", c.num_gpus());
  if (c.has_gpus_per_node()) add("gpus-per-node", c.gpus_per_node());
  const v1::ParallelPlan& p = r.plan();
  if (p.settings() != v1::SETTINGS_UNSPECIFIED) add("settings", EnumName(p.settings()));
  if (p.has_tensor_parallel()) add("tp", p.tensor_parallel());
  if (p.has_pipeline_parallel()) add("pp", p.pipeline_parallel());
  if (p.has_context_parallel()) add("cp", p.context_parallel());
  if (p.has_data_parallel()) add("dp", p.data_parallel());
  if (p.has_virtual_stages()) add("virtual-stages", p.virtual_stages());
  if (!p.pipeline_layout().empty())
    add("pipeline-layout", absl::StrCat("'", p.pipeline_layout(), "'"));
  if (p.has_first_stage_layers()) add("first-stage-layers", p.first_stage_layers());
  if (p.has_last_stage_layers()) add("last-stage-layers", p.last_stage_layers());
  if (p.has_expert_parallel()) add("ep", p.expert_parallel());
  if (p.has_expert_tensor_parallel()) add("etp", p.expert_tensor_parallel());
  if (p.has_micro_batch()) add("micro-batch", p.micro_batch());
  if (p.has_global_batch()) add("global-batch", p.global_batch());
  if (p.dtype() != v1::DTYPE_UNSPECIFIED) add("dtype", EnumName(p.dtype()));
  if (p.fp8_recipe() != v1::FP8_RECIPE_UNSPECIFIED) add("fp8-recipe", EnumName(p.fp8_recipe()));
  if (p.recompute() != v1::RECOMPUTE_UNSPECIFIED) add("recompute", EnumName(p.recompute()));
  if (p.recompute_modules_size() > 0) {
    add("recompute-modules", absl::StrJoin(p.recompute_modules(), ","));
  }
  auto on_off = [&](absl::string_view flag, bool has, bool v) {
    if (has) add(flag, v ? "on" : "off");
  };
  on_off("sequence-parallel", p.has_sequence_parallel(), p.sequence_parallel());
  if (p.data_parallel_sharding() != v1::DATA_PARALLEL_SHARDING_UNSPECIFIED) {
    add("data-parallel-sharding", EnumName(p.data_parallel_sharding()));
  }
  on_off("gradient-bucketing", p.has_gradient_bucketing(), p.gradient_bucketing());
  if (p.has_bucket_size_bytes()) add("bucket-size", p.bucket_size_bytes());
  on_off("overlap-param-gather", p.has_param_gather_overlap(), p.param_gather_overlap());
  on_off("tp-comm-overlap", p.has_tp_comm_overlap(), p.tp_comm_overlap());
  on_off("bf16-moments", p.has_bf16_moments(), p.bf16_moments());
  on_off("fp32-grads", p.has_fp32_grads(), p.fp32_grads());
  if (p.cp_comm() != v1::CONTEXT_PARALLEL_COMM_UNSPECIFIED) add("cp-comm", EnumName(p.cp_comm()));
  if (p.moe_dispatcher() != v1::MOE_DISPATCHER_UNSPECIFIED) {
    add("moe-dispatcher", EnumName(p.moe_dispatcher()));
  }
  on_off("moe-overlap", p.has_moe_overlap(), p.moe_overlap());
  if (p.has_capacity_factor()) add("capacity-factor", p.capacity_factor());
  return absl::StrJoin(f, " ");
}

}  // namespace vtrain::client
