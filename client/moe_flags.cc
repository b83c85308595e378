#include "client/moe_flags.h"

#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/spec/job.h"
#include "core/util/status_macros.h"
#include "proto/enum_convert.h"

namespace vtrain::client {
namespace {

template <typename Setter>
absl::Status Int(const common::FlagParser& flags, absl::string_view flag, Setter set) {
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> v, flags.GetInt(flag));
  if (v) set(*v);
  return absl::OkStatus();
}

// The routing flags, as they appear in a plan and in a plan space.
struct Routing {
  std::optional<v1::MoeDispatcher> dispatcher;
  std::optional<bool> overlap;
  std::optional<double> capacity_factor, routing_sigma;
};

absl::StatusOr<Routing> RoutingFromFlags(const common::FlagParser& flags) {
  Routing r;
  VTRAIN_ASSIGN_OR_RETURN(std::optional<MoeDispatcher> dispatcher,
                          flags.GetParsed("moe-dispatcher", ParseDispatcher));
  if (dispatcher) r.dispatcher = proto::ToProto(*dispatcher);
  VTRAIN_ASSIGN_OR_RETURN(r.overlap, flags.GetOnOff("moe-overlap", "plan.moe_overlap"));
  VTRAIN_ASSIGN_OR_RETURN(r.capacity_factor, flags.GetDouble("capacity-factor"));
  if (auto routing = flags.Get("routing")) {
    double sigma = 0;
    if (*routing == "balanced") {
      r.routing_sigma = 0;
    } else if (absl::StartsWith(*routing, "lognormal:") &&
               absl::SimpleAtod(routing->substr(10), &sigma) && sigma > 0) {
      r.routing_sigma = sigma;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.routing_sigma: --routing '", *routing,
                       "' must be balanced or lognormal:SIGMA with SIGMA > 0, e.g. "
                       "lognormal:0.5"));
    }
  }
  return r;
}

template <typename Message>
void SetRouting(const Routing& r, Message& m) {
  if (r.dispatcher) m.set_moe_dispatcher(*r.dispatcher);
  if (r.overlap) m.set_moe_overlap(*r.overlap);
  if (r.capacity_factor) m.set_capacity_factor(*r.capacity_factor);
  if (r.routing_sigma) m.set_routing_sigma(*r.routing_sigma);
}

void AddRoutingFlags(common::FlagParser& p) {
  p.AddValue("moe-dispatcher", "D",
             "MoE token dispatcher: alltoall, allgather, flex (DeepEP) or hybridep (flex with "
             "the HybridEP backend); default alltoall");
  p.AddValue("moe-overlap", "on|off",
             "hide MoE dispatch/combine behind another micro-batch's compute (default off)");
  p.AddValue("capacity-factor", "X",
             "tokens an expert takes, times the mean; drops beyond it (default: dropless)");
  p.AddValue("routing", "R",
             "per-expert loads: balanced (default: forced balance, uniform random each "
             "micro-batch) or lognormal:SIGMA (slowest EP rank sets the pace)");
}

}  // namespace

void AddMoeModelFlags(common::FlagParser& p) {
  p.AddValue("num-experts", "N", "routed experts per MoE layer (model.moe.num_experts)");
  p.AddValue("moe-top-k", "K", "experts per token (model.moe.top_k)");
  p.AddValue("moe-ffn", "N", "one routed expert's FFN width (model.moe.expert_ffn)");
  p.AddValue("shared-experts", "N", "always-on shared experts (model.moe.shared_experts)");
  p.AddValue("shared-expert-ffn", "N", "a shared expert's FFN width (default --moe-ffn)");
  p.AddValue("dense-layers", "N", "the first N layers keep a dense MLP (model.moe.dense_layers)");
  p.AddValue("moe-layer-freq", "N", "layer i is MoE when i % N == 0 (default 1)");
  p.AddValue("router", "R", "router scores: softmax or sigmoid (model.moe.router)");
  p.AddValue("attention", "A", "mha, gqa or mla (DeepSeek's Multi-head Latent Attention)");
  p.AddValue("head-dim", "N", "head width when not hidden / heads (model.head_dim)");
  p.AddValue("mla-q-lora-rank", "N", "MLA query LoRA rank (0: uncompressed queries)");
  p.AddValue("mla-kv-lora-rank", "N", "MLA key/value latent width");
  p.AddValue("mla-rope-dim", "N", "MLA rotary part of a query/key head");
  p.AddValue("mla-v-dim", "N", "MLA value head width");
  p.AddValue("mtp-layers", "N", "multi-token-prediction modules (model.mtp_layers)");
}

void AddMoePlanFlags(common::FlagParser& p) {
  p.AddValue("ep", "N", "expert-parallel degree (plan.expert_parallel, default 1)");
  p.AddValue("etp", "N", "expert tensor-parallel degree (plan.expert_tensor_parallel, default 1)");
  AddRoutingFlags(p);
}

void AddMoeSpaceFlags(common::FlagParser& p) {
  p.AddValue("ep-values", "A,B,..", "expert-parallel degrees to try (MoE models; default 1)");
  p.AddValue("etp-values", "A,B,..", "expert tensor-parallel degrees to try (default 1)");
  AddRoutingFlags(p);
}

absl::Status MoeModelFromFlags(const common::FlagParser& flags, v1::ModelSpec& m) {
  v1::MoeSpec& e = *m.mutable_moe();
  VTRAIN_RETURN_IF_ERROR(Int(flags, "num-experts", [&](int64_t v) { e.set_num_experts(v); }));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "moe-top-k", [&](int64_t v) { e.set_top_k(v); }));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "moe-ffn", [&](int64_t v) { e.set_expert_ffn(v); }));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "shared-experts", [&](int64_t v) { e.set_shared_experts(v); }));
  VTRAIN_RETURN_IF_ERROR(
      Int(flags, "shared-expert-ffn", [&](int64_t v) { e.set_shared_expert_ffn(v); }));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "dense-layers", [&](int64_t v) { e.set_dense_layers(v); }));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "moe-layer-freq", [&](int64_t v) { e.set_layer_freq(v); }));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<RouterScore> score,
                          flags.GetParsed("router", ParseRouterScore));
  if (score) e.set_router(proto::ToProto(*score));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<AttentionKind> kind,
                          flags.GetParsed("attention", ParseAttention));
  if (kind) m.set_attention(proto::ToProto(*kind));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "head-dim", [&](int64_t v) { m.set_head_dim(v); }));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "mtp-layers", [&](int64_t v) { m.set_mtp_layers(v); }));
  v1::MlaDims& a = *m.mutable_mla();
  VTRAIN_RETURN_IF_ERROR(Int(flags, "mla-q-lora-rank", [&](int64_t v) { a.set_q_lora_rank(v); }));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "mla-kv-lora-rank", [&](int64_t v) { a.set_kv_lora_rank(v); }));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "mla-rope-dim", [&](int64_t v) { a.set_rope_head_dim(v); }));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "mla-v-dim", [&](int64_t v) { a.set_value_head_dim(v); }));
  if (m.moe().ByteSizeLong() == 0) m.clear_moe();
  if (m.mla().ByteSizeLong() == 0) m.clear_mla();
  return absl::OkStatus();
}

absl::Status MoePlanFromFlags(const common::FlagParser& flags, v1::ParallelPlan& p) {
  VTRAIN_RETURN_IF_ERROR(Int(flags, "ep", [&](int64_t v) { p.set_expert_parallel(v); }));
  VTRAIN_RETURN_IF_ERROR(Int(flags, "etp", [&](int64_t v) { p.set_expert_tensor_parallel(v); }));
  VTRAIN_ASSIGN_OR_RETURN(Routing r, RoutingFromFlags(flags));
  SetRouting(r, p);
  return absl::OkStatus();
}

absl::Status MoeSpaceFromFlags(const common::FlagParser& flags, v1::PlanSpace& s) {
  VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> eps, flags.GetIntList("ep-values"));
  s.mutable_expert_parallel_values()->Add(eps.begin(), eps.end());
  VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> etps, flags.GetIntList("etp-values"));
  s.mutable_expert_tensor_parallel_values()->Add(etps.begin(), etps.end());
  VTRAIN_ASSIGN_OR_RETURN(Routing r, RoutingFromFlags(flags));
  SetRouting(r, s);
  return absl::OkStatus();
}

}  // namespace vtrain::client
