#include "proto/megatron_args.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/spec/pipeline_layout.h"
#include "proto/shell_words.h"

namespace vtrain::proto {
namespace {

// One argument as Megatron's argparse would see it (the last occurrence
// wins): its values (the words up to the next option) and its line.
struct Arg {
  std::string name;  // without the leading "--"
  std::vector<std::string> values;
  int line = 0;
};

// Arguments that do not change the step time, by exact name or prefix, and
// why (Megatron-LM megatron/training/arguments.py).
struct Ignored {
  absl::string_view name;
  absl::string_view why;
  bool prefix = false;
};
constexpr Ignored kIgnored[] = {
    {"data-", "data", true},
    {"train-data-path", "data"},
    {"valid-data-path", "data"},
    {"test-data-path", "data"},
    {"split", "data"},
    {"mock-data", "data"},
    {"num-workers", "data loading"},
    {"vocab-file", "tokenizer file"},
    {"tokenizer-model", "tokenizer file"},
    {"tiktoken-", "tokenizer", true},
    {"no-mmap-bin-files", "data"},
    {"no-create-attention-mask-in-dataloader", "data"},
    {"train-iters", "run length"},
    {"train-samples", "run length"},
    {"exit-", "run length", true},
    {"lr", "learning rate"},
    {"lr-", "learning rate", true},
    {"min-lr", "learning rate"},
    {"decoupled-", "learning rate", true},
    {"weight-decay", "optimizer hyper-parameter"},
    {"start-weight-decay", "optimizer hyper-parameter"},
    {"end-weight-decay", "optimizer hyper-parameter"},
    {"weight-decay-incr-style", "optimizer hyper-parameter"},
    {"clip-grad", "optimizer hyper-parameter"},
    {"adam-", "optimizer hyper-parameter", true},
    {"init-method-std", "initialisation"},
    {"seed", "initialisation"},
    {"log-", "logging", true},
    {"logging-level", "logging"},
    {"tensorboard-", "logging", true},
    {"wandb-", "logging", true},
    {"timing-log-", "logging", true},
    {"save", "checkpoints"},
    {"save-interval", "checkpoints"},
    {"load", "checkpoints"},
    {"ckpt-", "checkpoints", true},
    {"no-load-", "checkpoints", true},
    {"no-save-", "checkpoints", true},
    {"async-save", "checkpoints"},
    {"dist-ckpt-", "checkpoints", true},
    {"auto-detect-ckpt-format", "checkpoints"},
    {"use-checkpoint-args", "checkpoints"},
    {"pretrained-checkpoint", "checkpoints"},
    {"finetune", "checkpoints"},
    {"eval-", "evaluation", true},
    {"skip-train", "evaluation"},
    {"distributed-backend", "process group setup"},
    {"distributed-timeout-minutes", "process group setup"},
    {"profile", "profiling window"},
    {"profile-", "profiling window", true},
    {"use-pytorch-profiler", "profiling window"},
    {"enable-experimental", "feature gate"},
    {"use-mcore-models", "deprecated no-op"},
    {"use-flash-attn", "read by nothing in Megatron-LM (the backend is --attention-backend)"},
    {"max-position-embeddings", "positions table size (the sequence is --seq-length)"},
    {"position-embedding-type", "position encoding (elementwise)"},
    {"rotary-", "position encoding (elementwise)", true},
    {"use-rope-scaling", "position encoding (elementwise)"},
    {"rope-", "position encoding (elementwise)", true},
    {"no-position-embedding", "position encoding (elementwise)"},
    {"mscale", "position encoding (elementwise)"},
    {"mscale-all-dim", "position encoding (elementwise)"},
    {"normalization", "norm kind (one elementwise kernel either way)"},
    {"norm-epsilon", "numerics"},
    {"apply-layernorm-1p", "numerics"},
    {"attention-dropout", "dropout (fused into the attention kernel)"},
    {"hidden-dropout", "dropout (elementwise, fused)"},
    {"attention-softmax-in-fp32", "numerics"},
    {"accumulate-allreduce-grads-in-fp32", "numerics"},
    {"grad-reduce-in-bf16", "numerics"},
    {"make-vocab-size-divisible-by", "vocabulary padding (vtrain does not pad)"},
    {"transformer-impl", "Transformer Engine (what vtrain models)"},
    {"no-masked-softmax-fusion", "kernel fusion (flash attention does not use it)"},
    {"no-bias-gelu-fusion", "kernel fusion"},
    {"no-bias-swiglu-fusion", "kernel fusion"},
    {"no-bias-dropout-fusion", "kernel fusion"},
    {"no-rope-fusion", "kernel fusion"},
    {"no-persist-layer-norm", "kernel fusion"},
    {"no-gradient-accumulation-fusion", "kernel fusion"},
    {"cross-entropy-loss-fusion", "kernel fusion"},
    {"cross-entropy-fusion-impl", "kernel fusion"},
    {"manual-gc", "host garbage collection"},
    {"manual-gc-interval", "host garbage collection"},
    {"manual-gc-eval", "host garbage collection"},
    {"empty-unused-memory-level", "allocator"},
    {"calculate-per-token-loss", "loss normalisation"},
    {"qk-layernorm", "two small norms"},
    {"disable-bias-linear", "bias adds (fused into the GEMMs)"},
    {"add-qkv-bias", "bias adds (fused into the GEMMs)"},
    {"untie-embeddings-and-output-weights", "weight tying (the GEMMs are the same)"},
    {"ddp-average-in-collective", "numerics"},
    {"ddp-num-buckets", "bucketing by size is --ddp-bucket-size"},
    {"ddp-pad-buckets-for-high-nccl-busbw", "padding"},
    {"no-align-param-gather", "bucket order"},
    {"check-for-nan-in-loss-and-grad", "numerics check"},
    {"no-check-for-nan-in-loss-and-grad", "numerics check"},
    {"fp8-amax-history-len", "fp8 scaling history"},
    {"fp8-amax-compute-algo", "fp8 scaling history"},
    {"fp8-margin", "fp8 scaling"},
    {"fp8-interval", "fp8 scaling"},
    {"moe-router-load-balancing-type", "router loss (its all-reduce is counted)"},
    {"moe-aux-loss-coeff", "router loss weight"},
    {"moe-z-loss-coeff", "router loss weight"},
    {"moe-grouped-gemm", "vtrain models the grouped GEMMs"},
    {"moe-permute-fusion", "the permutation is modelled fused"},
    {"moe-router-fusion", "router kernel fusion"},
    {"moe-router-dtype", "router numerics"},
    {"moe-router-enable-expert-bias", "router bias"},
    {"moe-router-bias-update-rate", "router bias"},
    {"moe-router-pre-softmax", "router numerics"},
    {"moe-router-topk-scaling-factor", "router numerics"},
    {"moe-router-num-groups", "group-limited routing (the same top-k)"},
    {"moe-router-group-topk", "group-limited routing (the same top-k)"},
    {"moe-token-drop-policy", "which tokens drop (the capacity is --moe-expert-capacity-factor)"},
    {"moe-router-padding-for-fp8", "padding"},
    {"moe-router-padding-for-quantization", "padding"},
    {"mtp-loss-scaling-factor", "loss weight"},
    {"overlap-p2p-communication-warmup-flush", "pipeline send/recv order"},
    {"no-overlap-p2p-communication", "pipeline send/recv order"},
    {"use-distributed-optimizer-instances", "optimizer replicas"},
    {"bf16-", "numerics", true},
    {"nccl-communicator-config-path", "NCCL tuning"},
};

// Arguments that change the step time a little and that vtrain does not
// model: read, and named in the notes with what is predicted instead.
constexpr Ignored kApproximated[] = {
    {"fp8-param-gather", "parameters are gathered in bf16 (the gather is overlapped or small)"},
    {"overlap-param-gather-with-optimizer-step", "the gather overlaps the next forward instead"},
    {"defer-embedding-wgrad-compute", "the embedding's weight gradient runs in place"},
    {"wgrad-deferral-limit", "the embedding's weight gradient runs in place"},
    {"moe-shared-expert-overlap", "the shared expert runs after the dispatch"},
    {"use-precision-aware-optimizer", "optimizer states are fp32 (memory only)"},
    {"main-grads-dtype", "optimizer states are fp32 (memory only)"},
    {"main-params-dtype", "optimizer states are fp32 (memory only)"},
    {"exp-avg-dtype", "optimizer states are fp32 (memory only)"},
    {"exp-avg-sq-dtype", "optimizer states are fp32 (memory only)"},
    {"tp-comm-overlap-cfg", "Transformer Engine's default userbuffer settings"},
    {"use-nccl-ub", "NCCL without user-buffer registration"},
    {"fsdp-double-buffer", "FSDP's default buffers"},
    {"keep-fp8-transpose-cache", "fp8 transposes recomputed"},
    {"cuda-graph-", "kernels launched one by one (host time as profiled)", true},
    {"enable-cuda-graph", "kernels launched one by one (host time as profiled)"},
    {"external-cuda-graph", "kernels launched one by one (host time as profiled)"},
    {"first-last-layers-bf16", "every layer in the job's dtype"},
    {"num-layers-at-start-in-bf16", "every layer in the job's dtype"},
    {"num-layers-at-end-in-bf16", "every layer in the job's dtype"},
    {"account-for-embedding-in-pipeline-split", "vtrain's automatic layout (docs/pipeline-layout.md)"},
    {"account-for-loss-in-pipeline-split", "vtrain's automatic layout (docs/pipeline-layout.md)"},
    {"microbatch-group-size-per-virtual-pipeline-stage", "Megatron's default grouping (p)"},
    {"megatron-fsdp-grad-comm-dtype", "gradients reduced in the job's dtype"},
    {"no-fp8-wgrad", "fp8 weight gradients"},
};

absl::string_view ApproximatedWhy(absl::string_view name) {
  for (const Ignored& i : kApproximated) {
    if (i.prefix ? absl::StartsWith(name, i.name) : name == i.name) return i.why;
  }
  return "";
}

absl::string_view IgnoredWhy(absl::string_view name) {
  for (const Ignored& i : kIgnored) {
    if (i.prefix ? absl::StartsWith(name, i.name) : name == i.name) return i.why;
  }
  return "";
}

// The arguments after the script: "--name v v2" and "--name=v".
std::vector<Arg> SplitArgs(const std::vector<std::string>& words, int line) {
  std::vector<Arg> args;
  for (const std::string& w : words) {
    const bool option = absl::StartsWith(w, "--") && w.size() > 2;
    if (option) {
      Arg a;
      a.line = line;
      const size_t eq = w.find('=');
      a.name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) a.values.push_back(w.substr(eq + 1));
      args.push_back(std::move(a));
    } else if (!args.empty()) {
      // Quote removal does not happen twice: "'99,1,0'" keeps its quotes.
      args.back().values.push_back(w);
    }
  }
  return args;
}

// Megatron's --moe-layer-freq list expression ("[0]*3+[1]*58",
// "([1]*3+[0]*1)*3") as a 0/1 vector.
absl::StatusOr<std::vector<int>> LayerPattern(absl::string_view e, size_t& i, int depth) {
  if (depth > 16) return absl::InvalidArgumentError("nested too deeply");
  std::vector<int> out;
  while (i < e.size()) {
    std::vector<int> term;
    if (e[i] == '(') {
      ++i;
      absl::StatusOr<std::vector<int>> inner = LayerPattern(e, i, depth + 1);
      if (!inner.ok()) return inner;
      if (i >= e.size() || e[i] != ')') return absl::InvalidArgumentError("an unclosed (");
      ++i;
      term = *inner;
    } else if (e[i] == '[') {
      const size_t end = e.find(']', i);
      if (end == absl::string_view::npos) return absl::InvalidArgumentError("an unclosed [");
      for (absl::string_view v : absl::StrSplit(e.substr(i + 1, end - i - 1), ',')) {
        int x = 0;
        if (!absl::SimpleAtoi(v, &x) || (x != 0 && x != 1)) {
          return absl::InvalidArgumentError("list items must be 0 or 1");
        }
        term.push_back(x);
      }
      i = end + 1;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unexpected '", e.substr(i, 1), "'"));
    }
    if (i < e.size() && e[i] == '*') {
      ++i;
      size_t j = i;
      while (j < e.size() && std::isdigit(static_cast<unsigned char>(e[j]))) ++j;
      int64_t n = 0;
      if (!absl::SimpleAtoi(e.substr(i, j - i), &n) || n < 0 || n > 100000) {
        return absl::InvalidArgumentError("a repeat count must be a number up to 100000");
      }
      i = j;
      std::vector<int> repeated;
      for (int64_t k = 0; k < n && repeated.size() <= 100000; ++k) {
        repeated.insert(repeated.end(), term.begin(), term.end());
      }
      term = std::move(repeated);
    }
    out.insert(out.end(), term.begin(), term.end());
    if (out.size() > 100000) return absl::InvalidArgumentError("longer than 100000 layers");
    if (i < e.size() && e[i] == '+') {
      ++i;
      continue;
    }
    break;
  }
  return out;
}

class Mapper {
 public:
  Mapper(absl::string_view name, MegatronJob& job) : name_(name), job_(job) {}

  absl::Status Map(const std::vector<Arg>& args) {
    // The last occurrence of an argument wins (argparse).
    std::map<std::string, const Arg*> last;
    for (const Arg& a : args) last[a.name] = &a;
    std::vector<const Arg*> order;
    for (const Arg& a : args) {
      if (last[a.name] == &a) order.push_back(&a);
    }
    std::vector<std::string> refused;
    for (const Arg* a : order) {
      absl::Status s = One(*a);
      if (!s.ok()) refused.push_back(std::string(s.message()));
    }
    if (!refused.empty()) return absl::InvalidArgumentError(absl::StrJoin(refused, "; "));
    return Finish();
  }

 private:
  std::string Where(const Arg& a) const {
    return absl::StrCat(name_, a.line > 0 ? absl::StrCat(":", a.line) : "", ": --", a.name);
  }
  absl::Status Bad(const Arg& a, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(Where(a), " ", what));
  }
  absl::StatusOr<int64_t> Int(const Arg& a, int64_t lo = 0) const {
    int64_t v = 0;
    if (a.values.size() != 1 || !absl::SimpleAtoi(a.values[0], &v) || v < lo) {
      return Bad(a, absl::StrCat("takes one integer of at least ", lo, ", got '",
                                 absl::StrJoin(a.values, " "), "'"));
    }
    return v;
  }
  absl::StatusOr<std::string> Text(const Arg& a) const {
    if (a.values.size() != 1) return Bad(a, "takes one value");
    return a.values[0];
  }
  absl::Status Flag(const Arg& a) const {
    if (!a.values.empty()) {
      return Bad(a, absl::StrCat("is a switch; '", absl::StrJoin(a.values, " "),
                                 "' after it is not an argument"));
    }
    return absl::OkStatus();
  }

  // Sets `set` from the integer value of `a`.
  template <typename F>
  absl::Status SetInt(const Arg& a, F set, int64_t lo = 1) {
    absl::StatusOr<int64_t> v = Int(a, lo);
    if (!v.ok()) return v.status();
    set(*v);
    return absl::OkStatus();
  }

  absl::Status One(const Arg& a) {
    v1::ModelSpec& m = *job_.request.mutable_model();
    v1::ParallelPlan& p = *job_.request.mutable_plan();
    const std::string& n = a.name;
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
    if (n == "q-lora-rank") return SetInt(a, [&](int64_t v) { m.mutable_mla()->set_q_lora_rank(v); }, 0);
    if (n == "kv-lora-rank") return SetInt(a, [&](int64_t v) { m.mutable_mla()->set_kv_lora_rank(v); });
    if (n == "qk-head-dim") return SetInt(a, [&](int64_t v) { qk_head_dim_ = v; });
    if (n == "qk-pos-emb-head-dim") {
      return SetInt(a, [&](int64_t v) { m.mutable_mla()->set_rope_head_dim(v); });
    }
    if (n == "v-head-dim") return SetInt(a, [&](int64_t v) { m.mutable_mla()->set_value_head_dim(v); });
    if (n == "num-experts") return SetInt(a, [&](int64_t v) { experts_ = v; }, 0);
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
    if (n == "mtp-num-layers") return SetInt(a, [&](int64_t v) { m.set_mtp_layers(v); }, 0);
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
    // Memory and overlaps.
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
    // MoE routing.
    if (n == "moe-token-dispatcher-type") {
      absl::StatusOr<std::string> t = Text(a);
      if (!t.ok()) return t.status();
      if (*t == "alltoall") {
        p.set_moe_dispatcher(v1::MOE_DISPATCHER_ALLTOALL);
      } else if (*t == "allgather") {
        p.set_moe_dispatcher(v1::MOE_DISPATCHER_ALLGATHER);
      } else if (*t == "flex") {
        p.set_moe_dispatcher(v1::MOE_DISPATCHER_FLEX);
      } else {
        return Bad(a, absl::StrCat("'", *t, "' is not a dispatcher; use alltoall, allgather or flex"));
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
      job_.notes.push_back(absl::StrCat("--moe-flex-dispatcher-backend ", *t,
                                        ": modelled as vtrain's flex dispatcher (DeepEP-style)"));
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
        return Bad(a, absl::StrCat("'", *t, "' is not modelled; use delayed, tensorwise, "
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
    if (n == "rampup-batch-size" || n == "step-batch-size-schedule") {
      job_.notes.push_back(absl::StrCat("--", n, ": the ramp-up is not simulated; the prediction "
                                        "is of an iteration at --global-batch-size"));
      return absl::OkStatus();
    }
    if (absl::string_view why = ApproximatedWhy(n); !why.empty()) {
      job_.notes.push_back(absl::StrCat("--", n, " is not modelled: ", why));
      return absl::OkStatus();
    }
    if (absl::string_view why = IgnoredWhy(n); !why.empty()) {
      job_.ignored.push_back(absl::StrCat("--", n, " (", why, ")"));
      return absl::OkStatus();
    }
    return Bad(a, "is not modelled by vtrain and may change the step time; remove it from the "
                  "launch to predict without it (docs/megatron.md lists what is read)");
  }

  absl::Status Finish() {
    v1::ModelSpec& m = *job_.request.mutable_model();
    v1::ParallelPlan& p = *job_.request.mutable_plan();
    std::vector<std::string> problems;
    // The layer architecture: SwiGLU is vtrain's llama layer.
    if (swiglu_) {
      m.set_arch(v1::ARCHITECTURE_LLAMA);
      if (!m.has_ffn_hidden_size() && m.has_hidden_size()) {
        // Megatron's default gated width: int(4h * 2/3 / 64) * 64.
        m.set_ffn_hidden_size(m.hidden_size() * 8 / 3 / 64 * 64);
      }
    } else {
      m.set_arch(v1::ARCHITECTURE_GPT);
    }
    if (gqa_) {
      if (!swiglu_) {
        problems.push_back(absl::StrCat(
            name_, ": --group-query-attention without --swiglu: vtrain's GPT layer has no "
                   "grouped-query attention"));
      }
      m.set_num_kv_heads(query_groups_.value_or(1));
    }
    if (m.attention() == v1::ATTENTION_KIND_MLA) {
      m.set_head_dim(qk_head_dim_.value_or(128));
      if (!m.mla().has_q_lora_rank()) m.mutable_mla()->set_q_lora_rank(0);
      if (!m.mla().has_kv_lora_rank()) m.mutable_mla()->set_kv_lora_rank(32);
      if (!m.mla().has_rope_head_dim()) m.mutable_mla()->set_rope_head_dim(64);
      if (!m.mla().has_value_head_dim()) m.mutable_mla()->set_value_head_dim(128);
    } else if (kv_channels_ && m.has_hidden_size() && m.has_num_heads() &&
               *kv_channels_ * m.num_heads() != m.hidden_size()) {
      m.set_head_dim(*kv_channels_);
    }
    if (!m.has_vocab_size()) {
      // GPT-2's BPE (its merge file given, or named): 50257 tokens.
      if (tokenizer_ == "GPT2BPETokenizer" || (tokenizer_.empty() && merge_file_)) {
        m.set_vocab_size(50257);
      } else {
        job_.missing.push_back(
            {"vocab", absl::StrCat(name_, ": the vocabulary size is not in the launch",
                                   tokenizer_.empty()
                                       ? ""
                                       : absl::StrCat(" (--tokenizer-type ", tokenizer_,
                                                      " reads it from a file)"),
                                   "; give --vocab N")});
      }
    }
    if (!m.has_seq_len()) {
      job_.missing.push_back(
          {"seq-len", absl::StrCat(name_, ": --seq-length is not in the launch; give --seq-len N")});
    }
    // MoE.
    if (experts_ > 0) {
      v1::MoeSpec& moe = *m.mutable_moe();
      moe.set_num_experts(experts_);
      if (!moe.has_expert_ffn() && m.has_ffn_hidden_size()) moe.set_expert_ffn(m.ffn_hidden_size());
      if (!moe.has_top_k()) moe.set_top_k(2);  // Megatron's default
      if (!layer_freq_.empty()) {
        absl::Status s = LayerFreq(m.has_num_layers() ? m.num_layers() : 0, moe);
        if (!s.ok()) problems.emplace_back(s.message());
      }
      // Megatron: the expert tensor-parallel size defaults to the TP size,
      // and the dispatcher to allgather.
      if (!p.has_expert_tensor_parallel()) {
        p.set_expert_tensor_parallel(p.has_tensor_parallel() ? p.tensor_parallel() : 1);
      }
      if (p.moe_dispatcher() == v1::MOE_DISPATCHER_UNSPECIFIED) {
        p.set_moe_dispatcher(v1::MOE_DISPATCHER_ALLGATHER);
      }
      if (!forced_balance_) {
        job_.notes.push_back(
            "routing: the launch does not force balanced routing; vtrain predicts balanced "
            "loads unless --routing lognormal:SIGMA is given");
      }
    } else if (!layer_freq_.empty()) {
      problems.push_back(absl::StrCat(name_, ": --moe-layer-freq without --num-experts"));
    }
    // Interleaving.
    if (layers_per_virtual_stage_) {
      const int64_t pp = p.has_pipeline_parallel() ? p.pipeline_parallel() : 1;
      const int64_t layers = m.num_layers();
      if (pp <= 0 || layers % (pp * *layers_per_virtual_stage_) != 0) {
        problems.push_back(absl::StrCat(
            name_, ": --num-layers-per-virtual-pipeline-stage ", *layers_per_virtual_stage_,
            " does not divide the ", layers, " layers over ", pp, " stages"));
      } else {
        p.set_virtual_stages(layers / pp / *layers_per_virtual_stage_);
      }
    }
    if (!p.pipeline_layout().empty()) {
      absl::StatusOr<std::vector<ChunkContent>> chunks =
          ParsePipelineLayout(p.pipeline_layout(), "--pipeline-model-parallel-layout");
      const int64_t pp = p.has_pipeline_parallel() ? p.pipeline_parallel() : 1;
      if (chunks.ok() && pp > 0 && static_cast<int64_t>(chunks->size()) % pp == 0) {
        p.set_virtual_stages(static_cast<int64_t>(chunks->size()) / pp);
      } else if (!chunks.ok()) {
        problems.emplace_back(chunks.status().message());
      }
    }
    // Recomputation.
    if (granularity_ == "full") {
      p.set_recompute(v1::RECOMPUTE_FULL);
      if (method_ == "block") {
        problems.push_back(absl::StrCat(
            name_, ": --recompute-method block (recomputing ", recompute_layers_.value_or(0),
            " layers of each stage) is not modelled; vtrain recomputes every layer (uniform)"));
      }
    } else if (granularity_ == "selective") {
      p.set_recompute(v1::RECOMPUTE_SELECTIVE);
      for (const std::string& module : modules_) p.add_recompute_modules(module);
    } else {
      p.set_recompute(v1::RECOMPUTE_NONE);
      if (!modules_.empty()) {
        job_.notes.push_back("--recompute-modules without --recompute-granularity: not used");
      }
    }
    // Precision: Megatron trains in fp32 without --bf16 or --fp16.
    if (fp8_) {
      p.set_dtype(v1::DTYPE_FP8);
    } else if (bf16_) {
      p.set_dtype(v1::DTYPE_BF16);
    } else if (fp16_) {
      p.set_dtype(v1::DTYPE_FP16);
    } else {
      problems.push_back(absl::StrCat(
          name_, ": neither --bf16 nor --fp16: fp32 training is not modelled; add --bf16"));
    }
    // Data-parallel sharding.
    if (fsdp_) {
      if (fsdp_strategy_.empty() || fsdp_strategy_ == "optim_grads_params") {
        p.set_data_parallel_sharding(v1::DATA_PARALLEL_SHARDING_FULL);
      } else if (fsdp_strategy_ == "optim") {
        p.set_data_parallel_sharding(v1::DATA_PARALLEL_SHARDING_OPTIMIZER);
      } else if (fsdp_strategy_ == "no_shard") {
        p.set_data_parallel_sharding(v1::DATA_PARALLEL_SHARDING_NONE);
      } else {
        problems.push_back(absl::StrCat(name_, ": --data-parallel-sharding-strategy ",
                                        fsdp_strategy_,
                                        " (gradients sharded, parameters not) is not modelled"));
      }
    }
    // Megatron-LM's argument defaults for everything else: explicit, so
    // that the job reads back as it was launched.
    p.set_settings(v1::SETTINGS_MEGATRON_DEFAULTS);
    if (!p.has_sequence_parallel()) p.set_sequence_parallel(false);
    if (p.data_parallel_sharding() == v1::DATA_PARALLEL_SHARDING_UNSPECIFIED) {
      p.set_data_parallel_sharding(v1::DATA_PARALLEL_SHARDING_NONE);
    }
    if (!p.has_gradient_bucketing()) p.set_gradient_bucketing(false);
    if (!p.has_param_gather_overlap()) p.set_param_gather_overlap(false);
    if (!p.has_tp_comm_overlap()) p.set_tp_comm_overlap(false);
    if (!p.has_moe_overlap()) p.set_moe_overlap(false);
    if (m.attention_impl() == v1::ATTENTION_IMPL_UNSPECIFIED) {
      m.set_attention_impl(v1::ATTENTION_IMPL_FLASH);  // --attention-backend auto
    }
    if (!p.has_global_batch()) {
      job_.missing.push_back(
          {"global-batch", absl::StrCat(name_, ": --global-batch-size is not in the launch; give "
                                               "--global-batch N")});
    }
    if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
    return absl::OkStatus();
  }

  // --moe-layer-freq as vtrain's dense_layers and layer_freq.
  absl::Status LayerFreq(int64_t layers, v1::MoeSpec& moe) {
    int64_t every = 0;
    if (absl::SimpleAtoi(layer_freq_, &every)) {
      if (every < 1) return Bad(*layer_freq_arg_, "must be at least 1");
      moe.set_layer_freq(every);
      moe.set_dense_layers(0);
      return absl::OkStatus();
    }
    size_t i = 0;
    absl::StatusOr<std::vector<int>> pattern = LayerPattern(layer_freq_, i, 0);
    if (!pattern.ok() || i != layer_freq_.size()) {
      return Bad(*layer_freq_arg_,
                 absl::StrCat("'", layer_freq_, "' is not a layer pattern such as [0]*3+[1]*58",
                              pattern.ok() ? "" : absl::StrCat(": ", pattern.status().message())));
    }
    if (layers > 0 && static_cast<int64_t>(pattern->size()) != layers) {
      return Bad(*layer_freq_arg_, absl::StrCat("lists ", pattern->size(), " layers, not ",
                                                layers));
    }
    const int64_t n = static_cast<int64_t>(pattern->size());
    for (int64_t freq = 1; freq <= std::max<int64_t>(1, n); ++freq) {
      for (int64_t dense = 0; dense <= n; ++dense) {
        bool same = true;
        for (int64_t l = 0; l < n && same; ++l) {
          same = ((*pattern)[static_cast<size_t>(l)] == 1) == (l >= dense && l % freq == 0);
        }
        if (same) {
          moe.set_dense_layers(dense);
          moe.set_layer_freq(freq);
          return absl::OkStatus();
        }
      }
    }
    return Bad(*layer_freq_arg_,
               absl::StrCat("'", layer_freq_, "' is not modelled: vtrain's MoE layers are the "
                            "first N dense, then every k-th layer"));
  }

  absl::string_view name_;
  MegatronJob& job_;
  bool merge_file_ = false;
  bool gqa_ = false, swiglu_ = false, fsdp_ = false, bf16_ = false, fp16_ = false, fp8_ = false,
       forced_balance_ = false;
  std::optional<int64_t> query_groups_, kv_channels_, qk_head_dim_, layers_per_virtual_stage_,
      recompute_layers_;
  int64_t experts_ = 0;
  std::string tokenizer_, layer_freq_, granularity_, method_, fsdp_strategy_;
  std::vector<std::string> modules_;
  std::optional<Arg> layer_freq_arg_, method_arg_, fsdp_strategy_arg_;
};

// The launcher's options before the script: the world size.
void WorldSize(const std::vector<std::string>& before, const ShellScript& script,
               MegatronJob& job) {
  std::optional<int64_t> per_node, nodes;
  for (size_t i = 0; i < before.size(); ++i) {
    std::string w = before[i];
    std::string value;
    const size_t eq = w.find('=');
    if (eq != std::string::npos) {
      value = w.substr(eq + 1);
      w = w.substr(0, eq);
    } else if (i + 1 < before.size()) {
      value = before[i + 1];
    }
    int64_t v = 0;
    if ((w == "--nproc_per_node" || w == "--nproc-per-node") && absl::SimpleAtoi(value, &v)) {
      per_node = v;
    }
    if (w == "--nnodes" && absl::SimpleAtoi(value, &v)) nodes = v;
  }
  auto var = [&](const char* name) -> std::optional<int64_t> {
    auto it = script.variables.find(name);
    int64_t v = 0;
    if (it != script.variables.end() && absl::SimpleAtoi(it->second, &v)) return v;
    return std::nullopt;
  };
  if (!per_node) per_node = var("GPUS_PER_NODE");
  if (!nodes) nodes = var("NUM_NODES");
  if (!nodes) nodes = var("NNODES");
  v1::ClusterSpec& c = *job.request.mutable_cluster();
  if (per_node && nodes && *per_node > 0 && *nodes > 0) {
    c.set_num_gpus(*per_node * *nodes);
    c.set_gpus_per_node(*per_node);
  } else if (std::optional<int64_t> world = var("WORLD_SIZE"); world && *world > 0) {
    c.set_num_gpus(*world);
  } else {
    job.notes.push_back("the world size is not in the launch: give --gpus (or --dp)");
  }
}

}  // namespace

absl::StatusOr<v1::PredictRequest> LayOver(MegatronJob job, const v1::PredictRequest& over) {
  for (const MegatronJob::Missing& m : job.missing) {
    const bool given = (m.flag == "vocab" && over.model().has_vocab_size()) ||
                       (m.flag == "seq-len" && over.model().has_seq_len()) ||
                       (m.flag == "global-batch" && over.plan().has_global_batch());
    if (!given) return absl::InvalidArgumentError(m.message);
  }
  v1::PredictRequest r = std::move(job.request);
  if (over.plan().recompute_modules_size() > 0) r.mutable_plan()->clear_recompute_modules();
  if (over.cluster().has_num_gpus()) r.mutable_plan()->clear_data_parallel();
  r.MergeFrom(over);
  r.clear_megatron_args();
  return r;
}

absl::StatusOr<MegatronJob> RequestFromMegatronArgs(absl::string_view text,
                                                    absl::string_view name) {
  absl::StatusOr<ShellScript> script = ReadShell(text, name);
  if (!script.ok()) return script.status();
  MegatronJob job;
  job.notes = script->notes;
  // The launch: the first command that runs a Python script with Megatron's
  // arguments after it; else every line that is an argument list.
  std::vector<std::string> words;
  int line = 0;
  bool launched = false;
  for (const ShellCommand& c : script->commands) {
    for (size_t i = 0; i < c.words.size(); ++i) {
      if (!absl::EndsWith(c.words[i], ".py")) continue;
      const bool args_follow = std::any_of(c.words.begin() + static_cast<long>(i) + 1,
                                           c.words.end(), [](const std::string& w) {
                                             return absl::StartsWith(w, "--");
                                           });
      if (!args_follow) continue;
      std::vector<std::string> before(c.words.begin(), c.words.begin() + static_cast<long>(i));
      WorldSize(before, *script, job);
      words.assign(c.words.begin() + static_cast<long>(i) + 1, c.words.end());
      line = c.line;
      launched = true;
      break;
    }
    if (launched) break;
  }
  if (!launched) {
    for (const ShellCommand& c : script->commands) {
      if (c.words.empty() || !absl::StartsWith(c.words.front(), "--")) continue;
      if (line == 0) line = c.line;
      words.insert(words.end(), c.words.begin(), c.words.end());
    }
    if (words.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": no launch found: neither a command running a Python script with Megatron "
                "arguments (torchrun ... pretrain_gpt.py --num-layers ...) nor an argument list"));
    }
    // A bare list may still say its world size in variables.
    WorldSize({}, *script, job);
  }
  Mapper mapper(name, job);
  absl::Status s = mapper.Map(SplitArgs(words, line));
  if (!s.ok()) return s;
  std::sort(job.ignored.begin(), job.ignored.end());
  return job;
}

}  // namespace vtrain::proto
