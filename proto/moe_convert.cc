#include "proto/moe_convert.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "proto/enum_convert.h"

namespace vtrain::proto {
namespace {

// A given field that must be at least `min` (the core checks the upper bounds).
void TakeInt(bool has, int64_t value, int64_t min, const char* field, const char* flag,
             int64_t& into, std::vector<std::string>& problems) {
  if (!has) return;
  if (value < min) {
    problems.push_back(absl::StrCat(field, "=", value, " (", flag, ") must be at least ", min,
                                    "; leave it out for the preset's or the default"));
    return;
  }
  into = value;
}

template <typename ProtoEnum, typename CoreEnum>
void TakeEnum(ProtoEnum value, const char* field, CoreEnum& into,
              std::vector<std::string>& problems) {
  absl::StatusOr<CoreEnum> parsed = FromProtoOr(value, into, field);
  if (parsed.ok()) {
    into = *parsed;
  } else {
    problems.emplace_back(parsed.status().message());
  }
}

}  // namespace

void MoeModelFromProto(const v1::ModelSpec& m, ModelSpec& model,
                       std::vector<std::string>& problems) {
  TakeInt(m.has_head_dim(), m.head_dim(), 1, "model.head_dim", "--head-dim", model.head_dim,
          problems);
  TakeInt(m.has_mtp_layers(), m.mtp_layers(), 0, "model.mtp_layers", "--mtp-layers",
          model.mtp_layers, problems);
  TakeEnum(m.attention(), "model.attention", model.attention, problems);
  TakeEnum(m.attention_impl(), "model.attention_impl", model.attention_impl, problems);
  const v1::MlaDims& a = m.mla();
  TakeInt(a.has_q_lora_rank(), a.q_lora_rank(), 0, "model.mla.q_lora_rank", "--mla-q-lora-rank",
          model.mla.q_lora_rank, problems);
  TakeInt(a.has_kv_lora_rank(), a.kv_lora_rank(), 1, "model.mla.kv_lora_rank", "--mla-kv-lora-rank",
          model.mla.kv_lora_rank, problems);
  TakeInt(a.has_rope_head_dim(), a.rope_head_dim(), 1, "model.mla.rope_head_dim", "--mla-rope-dim",
          model.mla.rope_head_dim, problems);
  TakeInt(a.has_value_head_dim(), a.value_head_dim(), 1, "model.mla.value_head_dim", "--mla-v-dim",
          model.mla.value_head_dim, problems);
  const v1::MoeSpec& e = m.moe();
  MoeSpec& moe = model.moe;
  TakeInt(e.has_num_experts(), e.num_experts(), 1, "model.moe.num_experts", "--num-experts",
          moe.num_experts, problems);
  TakeInt(e.has_top_k(), e.top_k(), 1, "model.moe.top_k", "--moe-top-k", moe.top_k, problems);
  TakeInt(e.has_expert_ffn(), e.expert_ffn(), 1, "model.moe.expert_ffn", "--moe-ffn",
          moe.expert_ffn, problems);
  TakeInt(e.has_shared_experts(), e.shared_experts(), 0, "model.moe.shared_experts",
          "--shared-experts", moe.shared_experts, problems);
  TakeInt(e.has_shared_expert_ffn(), e.shared_expert_ffn(), 0, "model.moe.shared_expert_ffn",
          "--shared-expert-ffn", moe.shared_expert_ffn, problems);
  TakeInt(e.has_dense_layers(), e.dense_layers(), 0, "model.moe.dense_layers", "--dense-layers",
          moe.dense_layers, problems);
  TakeInt(e.has_layer_freq(), e.layer_freq(), 1, "model.moe.layer_freq", "--moe-layer-freq",
          moe.layer_freq, problems);
  TakeEnum(e.router(), "model.moe.router", moe.router, problems);
}

void MoePlanFromProto(const v1::ParallelPlan& p, ParallelPlan& plan,
                      std::vector<std::string>& problems) {
  TakeInt(p.has_expert_parallel(), p.expert_parallel(), 1, "plan.expert_parallel", "--ep",
          plan.expert_parallel, problems);
  TakeInt(p.has_expert_tensor_parallel(), p.expert_tensor_parallel(), 1,
          "plan.expert_tensor_parallel", "--etp", plan.expert_tensor_parallel, problems);
  TakeEnum(p.moe_dispatcher(), "plan.moe_dispatcher", plan.moe.dispatcher, problems);
  if (p.has_moe_overlap()) plan.moe.overlap = p.moe_overlap();
  // Ranges are the core's (ValidateJob names them); NaN is refused there too.
  if (p.has_capacity_factor()) plan.moe.capacity_factor = p.capacity_factor();
  if (p.has_routing_sigma()) plan.moe.routing_sigma = p.routing_sigma();
}

void MoeModelToProto(const ModelSpec& model, v1::ModelSpec& m) {
  if (model.head_dim > 0) m.set_head_dim(model.head_dim);
  if (model.mtp_layers > 0) m.set_mtp_layers(model.mtp_layers);
  if (model.attention_impl != AttentionImpl::kFlash) {
    m.set_attention_impl(ToProto(model.attention_impl));
  }
  if (model.attention == AttentionKind::kMla) {
    m.set_attention(ToProto(model.attention));
    v1::MlaDims* a = m.mutable_mla();
    a->set_q_lora_rank(model.mla.q_lora_rank);
    a->set_kv_lora_rank(model.mla.kv_lora_rank);
    a->set_rope_head_dim(model.mla.rope_head_dim);
    a->set_value_head_dim(model.mla.value_head_dim);
  }
  if (!model.moe.enabled()) return;
  v1::MoeSpec* e = m.mutable_moe();
  e->set_num_experts(model.moe.num_experts);
  e->set_top_k(model.moe.top_k);
  e->set_expert_ffn(model.moe.expert_ffn);
  e->set_shared_experts(model.moe.shared_experts);
  if (model.moe.shared_expert_ffn > 0) e->set_shared_expert_ffn(model.moe.shared_expert_ffn);
  e->set_dense_layers(model.moe.dense_layers);
  e->set_layer_freq(model.moe.layer_freq);
  e->set_router(ToProto(model.moe.router));
}

void MoePlanToProto(const ParallelPlan& plan, v1::ParallelPlan& p) {
  if (plan.expert_parallel != 1) p.set_expert_parallel(plan.expert_parallel);
  if (plan.expert_tensor_parallel != 1) p.set_expert_tensor_parallel(plan.expert_tensor_parallel);
  if (plan.moe.dispatcher != MoeDispatcher::kAllToAll)
    p.set_moe_dispatcher(ToProto(plan.moe.dispatcher));
  p.set_moe_overlap(plan.moe.overlap);
  if (plan.moe.capacity_factor != 0) p.set_capacity_factor(plan.moe.capacity_factor);
  if (plan.moe.routing_sigma != 0) p.set_routing_sigma(plan.moe.routing_sigma);
}

}  // namespace vtrain::proto
