// What follows from all of a launch's arguments, and the tables of the
// arguments that do not change the step time (proto/megatron_mapper.h).
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

namespace {

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
    {"main-params-dtype", "main gradients and parameters in fp32 (memory only)"},
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
    {"account-for-embedding-in-pipeline-split",
     "vtrain's automatic layout (docs/pipeline-layout.md)"},
    {"account-for-loss-in-pipeline-split", "vtrain's automatic layout (docs/pipeline-layout.md)"},
    {"microbatch-group-size-per-virtual-pipeline-stage", "Megatron's default grouping (p)"},
    {"megatron-fsdp-grad-comm-dtype", "gradients reduced in the job's dtype"},
    {"no-fp8-wgrad", "fp8 weight gradients"},
};

}  // namespace

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

void MegatronMapper::FinishModel(std::vector<std::string>& problems) {
  v1::ModelSpec& m = *job_.request.mutable_model();
  v1::ParallelPlan& p = *job_.request.mutable_plan();
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
      problems.push_back(
          absl::StrCat(name_,
                       ": --group-query-attention without --swiglu: vtrain's GPT layer has no "
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
          {"vocab",
           absl::StrCat(name_, ": the vocabulary size is not in the launch",
                        tokenizer_.empty() ? ""
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
          "routing: the launch does not force balanced routing; vtrain predicts forced-balance "
          "loads (uniform random) unless --routing lognormal:SIGMA is given");
    }
  } else if (!layer_freq_.empty()) {
    problems.push_back(absl::StrCat(name_, ": --moe-layer-freq without --num-experts"));
  }
}

void MegatronMapper::FinishOptimizer() {
  // The precision-aware optimizer: bf16 moments are what vtrain models.
  const bool bf16_moments = precision_aware_ && exp_avg_ == "bf16" && exp_avg_sq_ == "bf16";
  job_.request.mutable_plan()->set_bf16_moments(bf16_moments);
  // Megatron-LM's gradient buffer: fp32 with --bf16 unless turned off.
  const bool fp32_grads =
      grads_fp32_ || (bf16_ && !grads_bf16_ && !(precision_aware_ && main_grads_ == "bf16"));
  job_.request.mutable_plan()->set_fp32_grads(fp32_grads);
  if (!precision_aware_ && (exp_avg_ != "fp32" || exp_avg_sq_ != "fp32")) {
    job_.notes.push_back(
        "--exp-avg-dtype/--exp-avg-sq-dtype without "
        "--use-precision-aware-optimizer: not used (fp32 moments)");
  } else if (precision_aware_ && !bf16_moments) {
    job_.notes.push_back(absl::StrCat("the precision-aware optimizer with moments ", exp_avg_, "/",
                                      exp_avg_sq_, " is modelled as fp32 moments"));
  }
}

absl::Status MegatronMapper::Finish() {
  v1::ModelSpec& m = *job_.request.mutable_model();
  v1::ParallelPlan& p = *job_.request.mutable_plan();
  std::vector<std::string> problems;
  FinishModel(problems);
  // Interleaving.
  if (layers_per_virtual_stage_) {
    const int64_t pp = p.has_pipeline_parallel() ? p.pipeline_parallel() : 1;
    const int64_t layers = m.num_layers();
    if (pp <= 0 || layers % (pp * *layers_per_virtual_stage_) != 0) {
      problems.push_back(absl::StrCat(name_, ": --num-layers-per-virtual-pipeline-stage ",
                                      *layers_per_virtual_stage_, " does not divide the ", layers,
                                      " layers over ", pp, " stages"));
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
      problems.push_back(absl::StrCat(name_, ": --data-parallel-sharding-strategy ", fsdp_strategy_,
                                      " (gradients sharded, parameters not) is not modelled"));
    }
  }
  FinishOptimizer();
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
        {"global-batch", absl::StrCat(name_,
                                      ": --global-batch-size is not in the launch; give "
                                      "--global-batch N")});
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  return absl::OkStatus();
}

// --moe-layer-freq as vtrain's dense_layers and layer_freq.
absl::Status MegatronMapper::LayerFreq(int64_t layers, v1::MoeSpec& moe) {
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
    return Bad(*layer_freq_arg_, absl::StrCat("lists ", pattern->size(), " layers, not ", layers));
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
  return Bad(*layer_freq_arg_, absl::StrCat("'", layer_freq_,
                                            "' is not modelled: vtrain's MoE layers are the "
                                            "first N dense, then every k-th layer"));
}

}  // namespace vtrain::proto::internal
