// Each Megatron-LM argument mapped onto the request (proto/megatron_mapper.h).
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/spec/pipeline_layout.h"
#include "proto/megatron_mapper.h"

namespace vtrain::proto::internal {

absl::Status MegatronMapper::Map(const std::vector<MegatronArg>& args) {
  // The last occurrence of an argument wins (argparse).
  std::map<std::string, const MegatronArg*> last;
  for (const MegatronArg& a : args) last[a.name] = &a;
  std::vector<const MegatronArg*> order;
  for (const MegatronArg& a : args) {
    if (last[a.name] == &a) order.push_back(&a);
  }
  std::vector<std::string> refused;
  for (const MegatronArg* a : order) {
    absl::Status s = One(*a);
    if (!s.ok()) refused.push_back(std::string(s.message()));
  }
  if (!refused.empty()) return absl::InvalidArgumentError(absl::StrJoin(refused, "; "));
  return Finish();
}

absl::Status MegatronMapper::One(const MegatronArg& a) {
  for (auto part : {&MegatronMapper::ModelArg, &MegatronMapper::PlanArg, &MegatronMapper::MemoryArg,
                    &MegatronMapper::MoeArg, &MegatronMapper::PrecisionArg}) {
    if (std::optional<absl::Status> s = (this->*part)(a)) return *s;
  }
  const std::string& n = a.name;
  const std::string label = a.path.empty() ? absl::StrCat("--", n) : a.path;
  if (n == "rampup-batch-size" || n == "step-batch-size-schedule") {
    job_.notes.push_back(absl::StrCat(label,
                                      ": the ramp-up is not simulated; the prediction "
                                      "is of an iteration at --global-batch-size"));
    return absl::OkStatus();
  }
  if (absl::string_view why = ApproximatedWhy(n); !why.empty()) {
    job_.notes.push_back(absl::StrCat(label, " is not modelled: ", why));
    return absl::OkStatus();
  }
  if (absl::string_view why = IgnoredWhy(n); !why.empty()) {
    job_.ignored.push_back(absl::StrCat(label, " (", why, ")"));
    return absl::OkStatus();
  }
  return Bad(a,
             "is not modelled by vtrain and may change the step time; remove it from the "
             "launch to predict without it (docs/megatron.md lists what is read)");
}

std::optional<absl::Status> MegatronMapper::ModelArg(const MegatronArg& a) {
  v1::ModelSpec& m = *job_.request.mutable_model();
  v1::ParallelPlan& p = *job_.request.mutable_plan();
  const std::string& n = a.name;
  (void)m;
  (void)p;
  // Model shape.
  if (n == "num-layers") return SetInt(a, [&](int64_t v) { m.set_num_layers(v); });
  if (n == "hidden-size") return SetInt(a, [&](int64_t v) { m.set_hidden_size(v); });
  if (n == "ffn-hidden-size") return SetInt(a, [&](int64_t v) { m.set_ffn_hidden_size(v); });
  if (n == "num-attention-heads") return SetInt(a, [&](int64_t v) { m.set_num_heads(v); });
  if (n == "num-query-groups") return SetInt(a, [&](int64_t v) { query_groups_ = v; });
  if (n == "group-query-attention") {
    gqa_ = true;
    return Flag(a);
  }
  if (n == "kv-channels") return SetInt(a, [&](int64_t v) { kv_channels_ = v; });
  if (n == "seq-length" || n == "encoder-seq-length" || n == "decoder-seq-length") {
    return SetInt(a, [&](int64_t v) { m.set_seq_len(v); });
  }
  if (n == "swiglu") {
    swiglu_ = true;
    return Flag(a);
  }
  if (n == "vocab-size" || n == "padded-vocab-size") {
    return SetInt(a, [&](int64_t v) { m.set_vocab_size(v); });
  }
  if (n == "merge-file") {
    merge_file_ = true;
    job_.ignored.push_back("--merge-file (tokenizer file: GPT-2 BPE, 50257 tokens)");
    return absl::OkStatus();
  }
  if (n == "tokenizer-type") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    tokenizer_ = *t;
    return absl::OkStatus();
  }
  if (n == "multi-latent-attention") {
    m.set_attention(v1::ATTENTION_KIND_MLA);
    return Flag(a);
  }
  if (n == "q-lora-rank")
    return SetInt(
        a, [&](int64_t v) { m.mutable_mla()->set_q_lora_rank(v); }, 0);
  if (n == "kv-lora-rank")
    return SetInt(a, [&](int64_t v) { m.mutable_mla()->set_kv_lora_rank(v); });
  if (n == "qk-head-dim") return SetInt(a, [&](int64_t v) { qk_head_dim_ = v; });
  if (n == "qk-pos-emb-head-dim") {
    return SetInt(a, [&](int64_t v) { m.mutable_mla()->set_rope_head_dim(v); });
  }
  if (n == "v-head-dim")
    return SetInt(a, [&](int64_t v) { m.mutable_mla()->set_value_head_dim(v); });
  if (n == "num-experts")
    return SetInt(
        a, [&](int64_t v) { experts_ = v; }, 0);
  if (n == "moe-ffn-hidden-size") {
    return SetInt(a, [&](int64_t v) { m.mutable_moe()->set_expert_ffn(v); });
  }
  if (n == "moe-shared-expert-intermediate-size") {
    return SetInt(a, [&](int64_t v) {
      m.mutable_moe()->set_shared_experts(1);
      m.mutable_moe()->set_shared_expert_ffn(v);
    });
  }
  if (n == "moe-router-topk") return SetInt(a, [&](int64_t v) { m.mutable_moe()->set_top_k(v); });
  if (n == "moe-layer-freq") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    layer_freq_ = *t;
    layer_freq_arg_ = a;
    return absl::OkStatus();
  }
  if (n == "moe-router-score-function") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    if (*t == "softmax") {
      m.mutable_moe()->set_router(v1::ROUTER_SCORE_SOFTMAX);
    } else if (*t == "sigmoid") {
      m.mutable_moe()->set_router(v1::ROUTER_SCORE_SIGMOID);
    } else {
      return Bad(a, absl::StrCat("'", *t, "' is not modelled; vtrain has softmax and sigmoid"));
    }
    return absl::OkStatus();
  }
  if (n == "mtp-num-layers")
    return SetInt(
        a, [&](int64_t v) { m.set_mtp_layers(v); }, 0);
  return std::nullopt;
}

std::optional<absl::Status> MegatronMapper::PlanArg(const MegatronArg& a) {
  v1::ModelSpec& m = *job_.request.mutable_model();
  v1::ParallelPlan& p = *job_.request.mutable_plan();
  const std::string& n = a.name;
  (void)m;
  (void)p;
  // The plan.
  if (n == "tensor-model-parallel-size") {
    return SetInt(a, [&](int64_t v) { p.set_tensor_parallel(v); });
  }
  if (n == "pipeline-model-parallel-size") {
    return SetInt(a, [&](int64_t v) { p.set_pipeline_parallel(v); });
  }
  if (n == "context-parallel-size") return SetInt(a, [&](int64_t v) { p.set_context_parallel(v); });
  if (n == "expert-model-parallel-size") {
    return SetInt(a, [&](int64_t v) { p.set_expert_parallel(v); });
  }
  if (n == "expert-tensor-parallel-size") {
    return SetInt(a, [&](int64_t v) { p.set_expert_tensor_parallel(v); });
  }
  if (n == "num-layers-per-virtual-pipeline-stage") {
    return SetInt(a, [&](int64_t v) { layers_per_virtual_stage_ = v; });
  }
  if (n == "num-virtual-stages-per-pipeline-rank") {
    return SetInt(a, [&](int64_t v) { p.set_virtual_stages(v); });
  }
  if (n == "pipeline-model-parallel-layout") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    p.set_pipeline_layout(*t);
    return absl::OkStatus();
  }
  if (n == "decoder-first-pipeline-num-layers") {
    return SetInt(a, [&](int64_t v) { p.set_first_stage_layers(v); });
  }
  if (n == "decoder-last-pipeline-num-layers") {
    return SetInt(a, [&](int64_t v) { p.set_last_stage_layers(v); });
  }
  if (n == "sequence-parallel") {
    p.set_sequence_parallel(true);
    return Flag(a);
  }
  if (n == "micro-batch-size") return SetInt(a, [&](int64_t v) { p.set_micro_batch(v); });
  if (n == "global-batch-size") return SetInt(a, [&](int64_t v) { p.set_global_batch(v); });
  if (n == "cp-comm-type") {
    if (a.values.size() != 1) return Bad(a, "one type per layer is not modelled; give one type");
    const std::string& t = a.values[0];
    if (t == "p2p") {
      p.set_cp_comm(v1::CONTEXT_PARALLEL_COMM_P2P);
    } else if (t == "a2a") {
      p.set_cp_comm(v1::CONTEXT_PARALLEL_COMM_A2A);
    } else if (t == "a2a+p2p") {
      p.set_cp_comm(v1::CONTEXT_PARALLEL_COMM_A2A_P2P);
    } else {
      return Bad(a, absl::StrCat("'", t, "' is not modelled; vtrain has p2p, a2a and a2a+p2p"));
    }
    return absl::OkStatus();
  }
  return std::nullopt;
}

std::optional<absl::Status> MegatronMapper::MemoryArg(const MegatronArg& a) {
  v1::ModelSpec& m = *job_.request.mutable_model();
  v1::ParallelPlan& p = *job_.request.mutable_plan();
  const std::string& n = a.name;
  (void)m;
  (void)p;
  // Memory and overlaps.
  if (n == "use-precision-aware-optimizer") {
    precision_aware_ = true;
    return Flag(a);
  }
  // Gradients in fp32 (arguments.py: with --bf16 unless --grad-reduce-in-bf16
  // or a bf16 --main-grads-dtype).
  if (n == "accumulate-allreduce-grads-in-fp32") {
    grads_fp32_ = true;
    return Flag(a);
  }
  if (n == "grad-reduce-in-bf16") {
    grads_bf16_ = true;
    return Flag(a);
  }
  if (n == "main-grads-dtype") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    main_grads_ = *t;
    return absl::OkStatus();
  }
  if (n == "exp-avg-dtype" || n == "exp-avg-sq-dtype") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    (n == "exp-avg-dtype" ? exp_avg_ : exp_avg_sq_) = *t;
    return absl::OkStatus();
  }
  if (n == "use-distributed-optimizer") {
    if (p.data_parallel_sharding() != v1::DATA_PARALLEL_SHARDING_FULL) {
      p.set_data_parallel_sharding(v1::DATA_PARALLEL_SHARDING_OPTIMIZER);
    }
    return Flag(a);
  }
  if (n == "use-torch-fsdp2" || n == "use-megatron-fsdp") {
    fsdp_ = true;
    return Flag(a);
  }
  if (n == "data-parallel-sharding-strategy") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    fsdp_strategy_ = *t;
    fsdp_strategy_arg_ = a;
    return absl::OkStatus();
  }
  if (n == "overlap-grad-reduce") {
    p.set_gradient_bucketing(true);
    return Flag(a);
  }
  if (n == "overlap-param-gather") {
    p.set_param_gather_overlap(true);
    return Flag(a);
  }
  if (n == "tp-comm-overlap") {
    p.set_tp_comm_overlap(true);
    return Flag(a);
  }
  if (n == "ddp-bucket-size") {
    // Megatron's bucket size counts parameters; their fp32 gradients are
    // reduced (4 bytes each).
    return SetInt(a, [&](int64_t v) { p.set_bucket_size_bytes(4 * v); });
  }
  if (n == "recompute-granularity") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    if (*t != "full" && *t != "selective") return Bad(a, "must be full or selective");
    granularity_ = *t;
    return absl::OkStatus();
  }
  if (n == "recompute-activations") {
    if (granularity_.empty()) granularity_ = "selective";
    return Flag(a);
  }
  if (n == "recompute-modules") {
    if (a.values.empty()) return Bad(a, "needs at least one module");
    modules_ = a.values;
    return absl::OkStatus();
  }
  if (n == "recompute-method") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    method_ = *t;
    method_arg_ = a;
    return absl::OkStatus();
  }
  if (n == "recompute-num-layers") return SetInt(a, [&](int64_t v) { recompute_layers_ = v; });
  return std::nullopt;
}

std::optional<absl::Status> MegatronMapper::MoeArg(const MegatronArg& a) {
  v1::ModelSpec& m = *job_.request.mutable_model();
  v1::ParallelPlan& p = *job_.request.mutable_plan();
  const std::string& n = a.name;
  (void)m;
  (void)p;
  // MoE routing.
  if (n == "moe-token-dispatcher-type") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    if (*t == "alltoall") {
      p.set_moe_dispatcher(v1::MOE_DISPATCHER_ALLTOALL);
    } else if (*t == "allgather") {
      p.set_moe_dispatcher(v1::MOE_DISPATCHER_ALLGATHER);
    } else if (*t == "flex") {
      p.set_moe_dispatcher(hybridep_ ? v1::MOE_DISPATCHER_HYBRIDEP : v1::MOE_DISPATCHER_FLEX);
    } else {
      return Bad(a,
                 absl::StrCat("'", *t, "' is not a dispatcher; use alltoall, allgather or flex"));
    }
    return absl::OkStatus();
  }
  if (n == "moe-enable-deepep") {
    p.set_moe_dispatcher(v1::MOE_DISPATCHER_FLEX);
    return Flag(a);
  }
  if (n == "moe-flex-dispatcher-backend") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    // Either order: the backend applies to a flex dispatcher given before or after.
    hybridep_ = *t == "hybridep";
    if (hybridep_ && p.moe_dispatcher() == v1::MOE_DISPATCHER_FLEX) {
      p.set_moe_dispatcher(v1::MOE_DISPATCHER_HYBRIDEP);
    } else if (!hybridep_ && p.moe_dispatcher() == v1::MOE_DISPATCHER_HYBRIDEP) {
      p.set_moe_dispatcher(v1::MOE_DISPATCHER_FLEX);
    }
    if (*t != "hybridep" && *t != "deepep") {
      job_.notes.push_back(absl::StrCat("--moe-flex-dispatcher-backend ", *t,
                                        ": modelled as DeepEP (the flex dispatcher)"));
    }
    return absl::OkStatus();
  }
  if (n == "overlap-moe-expert-parallel-comm") {
    p.set_moe_overlap(true);
    return Flag(a);
  }
  if (n == "moe-expert-capacity-factor") {
    double v = 0;
    if (a.values.size() != 1 || !absl::SimpleAtod(a.values[0], &v) || !(v > 0)) {
      return Bad(a, "takes one positive number");
    }
    p.set_capacity_factor(v);
    return absl::OkStatus();
  }
  if (n == "moe-router-force-load-balancing") {
    forced_balance_ = true;
    return Flag(a);
  }
  if (n == "moe-pad-expert-input-to-capacity") return Flag(a);
  return std::nullopt;
}

std::optional<absl::Status> MegatronMapper::PrecisionArg(const MegatronArg& a) {
  v1::ModelSpec& m = *job_.request.mutable_model();
  v1::ParallelPlan& p = *job_.request.mutable_plan();
  const std::string& n = a.name;
  (void)m;
  (void)p;
  // Precision and kernels.
  if (n == "bf16") {
    bf16_ = true;
    return Flag(a);
  }
  if (n == "fp16") {
    fp16_ = true;
    return Flag(a);
  }
  if (n == "fp8-format") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    if (*t != "e4m3" && *t != "hybrid") return Bad(a, "must be e4m3 or hybrid");
    fp8_ = true;
    return absl::OkStatus();
  }
  if (n == "fp8-recipe") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    if (*t == "delayed") {
      p.set_fp8_recipe(v1::FP8_RECIPE_DELAYED);
    } else if (*t == "tensorwise") {
      p.set_fp8_recipe(v1::FP8_RECIPE_CURRENT);
    } else if (*t == "blockwise") {
      p.set_fp8_recipe(v1::FP8_RECIPE_BLOCKWISE);
    } else if (*t == "mxfp8") {
      p.set_fp8_recipe(v1::FP8_RECIPE_MXFP8);
    } else {
      return Bad(a, absl::StrCat("'", *t,
                                 "' is not modelled; use delayed, tensorwise, "
                                 "blockwise or mxfp8"));
    }
    return absl::OkStatus();
  }
  if (n == "attention-backend") {
    absl::StatusOr<std::string> t = Text(a);
    if (!t.ok()) return t.status();
    if (*t == "unfused" || *t == "local") {
      m.set_attention_impl(v1::ATTENTION_IMPL_UNFUSED);
    } else if (*t == "flash" || *t == "fused" || *t == "auto") {
      m.set_attention_impl(v1::ATTENTION_IMPL_FLASH);
    } else {
      return Bad(a, absl::StrCat("'", *t, "' is not an attention backend"));
    }
    return absl::OkStatus();
  }
  return std::nullopt;
}

}  // namespace vtrain::proto::internal
