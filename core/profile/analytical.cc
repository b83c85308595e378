#include "core/profile/analytical.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/profile/kernel_model.h"
#include "core/profile/llama_kernels.h"

namespace vtrain {
namespace {

constexpr double kElem = 2;  // fp16 / bf16 bytes per element

// Mixed-precision Adam over fp32 main grads and master weights for `p`
// parameters, as multi-tensor launches of ~65536 x 320 elements each
// (apex/Megatron): the gradient norm (which also finds inf/nan) reads the
// grads once, and the fused Adam step unscales them as it reads them (4
// reads, 3 writes).
void OptimizerStep(KernelSequence& seq, double p) {
  const int launches = static_cast<int>(std::max(1.0, std::ceil(p / (65536.0 * 320))));
  const double chunk = p / launches;
  for (int i = 0; i < launches; ++i) seq.Memory("grad_norm_inf_check", chunk * 4);
  for (int i = 0; i < launches; ++i) seq.Memory("adam_step", chunk * 28);
  for (int i = 0; i < launches; ++i) seq.Memory("master_to_half_copy", chunk * 6);
  seq.Memory("zero_main_grad", p * 4);
}

}  // namespace

namespace {

// The sizes a GPT operator's kernels are made of, per tensor-parallel rank.
struct GptDims {
  internal::Fp8Linear fp8;
  double t, h, s, tokens, norm_tokens, e, vocab_local, ffn_local;
};

GptDims DimsOf(const OperatorKey& key) {
  GptDims d;
  d.fp8 = internal::Fp8Of(key);
  d.t = static_cast<double>(key.tensor_parallel);
  d.h = static_cast<double>(key.hidden);
  d.s = static_cast<double>(key.seq);
  // Context parallelism: a rank holds s/c of the sequence (its queries) and
  // attends to all s keys; sequence parallelism runs layer norms and dropout
  // on tokens / t (Korthikanti et al. 2022, §4.2.2).
  const double c = static_cast<double>(std::max<int64_t>(1, key.context_parallel));
  d.tokens = static_cast<double>(key.micro_batch) * d.s / c;
  d.norm_tokens = key.sequence_parallel ? d.tokens / d.t : d.tokens;
  d.e = kElem;
  d.vocab_local = std::ceil(static_cast<double>(key.vocab) / d.t);
  d.ffn_local = static_cast<double>(key.ffn) / d.t;
  return d;
}

// The decoder layer's operators: attention and MLP, forward and backward.
void GptLayerKernels(KernelSequence& seq, const OperatorKey& key, const GptDims& d) {
  const auto& [fp8, t, h, s, tokens, norm_tokens, e, vocab_local, ffn_local] = d;
  const bool unfused = key.attention_impl == AttentionImpl::kUnfused;
  switch (key.op) {
    case OperatorKind::kAttentionFwd:
      if (!key.attention_core_only) {
        seq.Memory("layernorm_fwd", norm_tokens * h * 2 * e);
        internal::LinearForward(seq, fp8, "gemm_qkv_fwd", tokens, 3 * h / t, h);
      }
      // GPT recipes keep attention dropout (0.1): its own kernel unfused,
      // inside the kernel with flash.
      internal::AttentionCoreForward(seq, key, /*dropout=*/true);
      if (key.attention_core_only) break;
      if (unfused) seq.Memory("context_transpose_copy", tokens * h / t * 2 * e);
      internal::LinearForward(seq, fp8, "gemm_projection_fwd", tokens, h, h / t);
      seq.Memory("bias_dropout_add_fwd", norm_tokens * h * (3 * e + 1));
      internal::Fp8ScaleUpdate(seq, fp8);
      break;
    case OperatorKind::kMlpFwd:
      seq.Memory("layernorm_fwd", norm_tokens * h * 2 * e);
      internal::LinearForward(seq, fp8, "gemm_fc1_fwd", tokens, ffn_local, h);
      seq.Memory("bias_gelu_fwd", tokens * ffn_local * 2 * e);
      internal::LinearForward(seq, fp8, "gemm_fc2_fwd", tokens, h, ffn_local);
      seq.Memory("bias_dropout_add_fwd", norm_tokens * h * (3 * e + 1));
      internal::Fp8ScaleUpdate(seq, fp8);
      break;
    case OperatorKind::kAttentionBwd:
      seq.Memory("bias_dropout_add_bwd", norm_tokens * h * (2 * e + 1));
      internal::LinearBackward(seq, fp8, "gemm_projection_dgrad", "gemm_projection_wgrad", tokens,
                               h, h / t);
      if (unfused) seq.Memory("context_transpose_copy_bwd", tokens * h / t * 2 * e);
      internal::AttentionCoreBackward(seq, key, /*dropout=*/true);
      internal::LinearBackward(seq, fp8, "gemm_qkv_dgrad", "gemm_qkv_wgrad", tokens, 3 * h / t, h);
      seq.Memory("bias_grad_reduce", tokens * (3 * h / t + h) * e);
      seq.Memory("layernorm_bwd", norm_tokens * h * 4 * e);
      seq.Memory("residual_add_bwd", norm_tokens * h * 3 * e);
      internal::Fp8ScaleUpdate(seq, fp8);
      break;
    case OperatorKind::kMlpBwd:
      seq.Memory("bias_dropout_add_bwd", norm_tokens * h * (2 * e + 1));
      internal::LinearBackward(seq, fp8, "gemm_fc2_dgrad", "gemm_fc2_wgrad", tokens, h, ffn_local);
      seq.Memory("bias_grad_reduce", tokens * (ffn_local + h) * e);
      seq.Memory("bias_gelu_bwd", tokens * ffn_local * 3 * e);
      internal::LinearBackward(seq, fp8, "gemm_fc1_dgrad", "gemm_fc1_wgrad", tokens, ffn_local, h);
      seq.Memory("layernorm_bwd", norm_tokens * h * 4 * e);
      seq.Memory("residual_add_bwd", norm_tokens * h * 3 * e);
      internal::Fp8ScaleUpdate(seq, fp8);
      break;
    default:
      break;
  }
}

// The first and last stages' operators and the optimizer step.
void GptEdgeKernels(KernelSequence& seq, const OperatorKey& key, const GptDims& d) {
  const auto& [fp8, t, h, s, tokens, norm_tokens, e, vocab_local, ffn_local] = d;
  switch (key.op) {
    case OperatorKind::kEmbeddingFwd:
      seq.Memory("vocab_range_mask", tokens * 8 * 3);
      seq.Memory("word_embedding_gather", tokens * h * 2 * e);
      seq.Memory("position_embedding_gather", tokens * h * 2 * e);
      seq.Memory("embedding_add", tokens * h * 3 * e);
      seq.Memory("embedding_dropout_fwd", norm_tokens * h * (2 * e + 1));
      break;
    case OperatorKind::kEmbeddingBwd:
      seq.Memory("embedding_dropout_bwd", norm_tokens * h * (2 * e + 1));
      seq.Memory("word_embedding_dense_bwd", tokens * h * 2 * e + tokens * 8);
      // The dense word-embedding gradient is added into the fp32 main grad.
      seq.Memory("word_embedding_grad_accumulate", vocab_local * h * (e + 8));
      seq.Memory("position_embedding_bwd", tokens * h * e + s * h * (e + 8));
      break;
    case OperatorKind::kLogitFwd:
      seq.Memory("final_layernorm_fwd", norm_tokens * h * 2 * e);
      seq.Gemm("gemm_logit_fwd", tokens, vocab_local, h);
      break;
    case OperatorKind::kLogitBwd:
      seq.Gemm("gemm_logit_dgrad", tokens, h, vocab_local);
      seq.Gemm("gemm_logit_wgrad", vocab_local, h, tokens);
      seq.Memory("final_layernorm_bwd", norm_tokens * h * 4 * e);
      break;
    case OperatorKind::kLossFwd:
      // Megatron casts the logits to fp32 for the vocabulary-parallel loss.
      seq.Memory("logits_to_fp32", tokens * vocab_local * (e + 4));
      seq.Memory("cross_entropy_max", tokens * vocab_local * 4);
      seq.Memory("cross_entropy_sub_exp", tokens * vocab_local * 8);
      seq.Memory("cross_entropy_sum", tokens * vocab_local * 4);
      seq.Memory("cross_entropy_target_gather", tokens * 8 * 3);
      seq.Memory("cross_entropy_log", tokens * 4 * 4);
      break;
    case OperatorKind::kLossBwd:
      seq.Memory("cross_entropy_softmax_grad", tokens * vocab_local * 8);
      seq.Memory("cross_entropy_target_sub", tokens * 8 * 2);
      seq.Memory("logit_grad_to_half", tokens * vocab_local * (4 + e));
      break;
    case OperatorKind::kOptimizerStep:
      OptimizerStep(seq, static_cast<double>(key.num_parameters));
      break;
    default:
      break;
  }
}

bool IsLayerOperator(OperatorKind op) {
  return op == OperatorKind::kAttentionFwd || op == OperatorKind::kAttentionBwd ||
         op == OperatorKind::kMlpFwd || op == OperatorKind::kMlpBwd;
}

}  // namespace

// Kernel lists follow Megatron-LM's GPT layer (Shoeybi et al. 2019, Fig. 3;
// Narayanan et al. 2021): column-parallel QKV and FFN-up, row-parallel
// projection and FFN-down, fused scale-mask-softmax, fused bias-GeLU and
// bias-dropout-add, vocabulary-parallel embedding and cross-entropy.
// Under fp8 the linear layers run as Transformer Engine runs them
// (LinearForward/LinearBackward), everything else in bf16.
std::vector<KernelRecord> GenerateOperatorKernels(const GpuSpec& gpu, const OperatorKey& key,
                                                  const AnalyticalParams& params) {
  // MoE blocks are Llama-style (SwiGLU experts) whatever the key's arch.
  const bool moe = key.op == OperatorKind::kMoeFwd || key.op == OperatorKind::kMoeBwd;
  if (moe || (key.arch == Architecture::kLlama && key.op != OperatorKind::kLossFwd &&
              key.op != OperatorKind::kLossBwd && key.op != OperatorKind::kOptimizerStep)) {
    return internal::GenerateLlamaKernels(gpu, key, params);
  }
  KernelSequence seq(gpu, internal::ComputeDType(key.dtype), params);
  const GptDims dims = DimsOf(key);
  if (IsLayerOperator(key.op)) {
    GptLayerKernels(seq, key, dims);
  } else {
    GptEdgeKernels(seq, key, dims);
  }
  return std::move(seq).Finish();
}

namespace {

// All-to-all over `group`: each rank keeps 1/n of its `bytes` and sends
// 1/n to every other rank. Inside a node the (n-1)/n that leave go over the
// rank's NVLink; across nodes the (n - r)/n for ranks off its node (r ranks
// per node) go through the NIC, shared by the r ranks of the group on the
// node (and by the other groups there: nic_fraction), so a rank's own NIC
// share bounds it and more nodes do not make it faster (DeepEP's published
// H800 figures: ~153 GB/s per rank over NVLink at EP 8, 43-58 GB/s over RDMA
// at EP 16-64, the NIC's 50 GB/s). Each peer costs a message's latency.
double AllToAllNs(double bytes, const CommGroup& group, const LinkBandwidths& links,
                  const AnalyticalParams& params) {
  const double n = static_cast<double>(group.ranks);
  const double r = static_cast<double>(std::min(group.ranks, group.ranks_per_node));
  const double intra_ns =
      (r - 1) / n * bytes / (links.intra_node_bytes_per_s * params.intra_node_efficiency) * 1e9;
  const double peers_ns = params.intra_node_latency_per_rank_ns * n;
  if (group.nodes() <= 1) return params.intra_node_latency_ns + peers_ns + intra_ns;
  const double nic_bytes_per_s =
      links.inter_node_bytes_per_s * group.nic_fraction * params.inter_node_efficiency;
  const double inter_ns = r * (n - r) / n * bytes / nic_bytes_per_s * 1e9 * group.spine_slowdown;
  return params.inter_node_latency_ns + peers_ns + std::max(intra_ns, inter_ns);
}

}  // namespace

double AnalyticalCollectiveNs(Collective collective, double bytes, const CommGroup& group,
                              const LinkBandwidths& links, const AnalyticalParams& params) {
  const double n = static_cast<double>(group.ranks);
  if (collective == Collective::kAllToAll) return AllToAllNs(bytes, group, links, params);
  double factor = 1;
  switch (collective) {
    case Collective::kAllReduce:
      factor = 2 * (n - 1) / n;
      break;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      factor = (n - 1) / n;
      break;
    case Collective::kSendRecv:
    case Collective::kAllToAll:
      factor = 1;
      break;
  }
  // The TP factor is fitted on NVLink all-reduces (every calibration run but
  // one keeps t inside a node); a TP group across nodes is bound by the
  // network at inter_node_efficiency, as any group is.
  if (group.use == CommUse::kDataParallel) factor /= params.dp_bandwidth_factor;
  const double tp_factor = group.use == CommUse::kTensorParallel ? params.tp_bandwidth_factor : 1;
  const double intra_ns = factor / tp_factor * bytes /
                          (links.intra_node_bytes_per_s * params.intra_node_efficiency) * 1e9;
  const double p2p_ns = group.use == CommUse::kPipeline ? params.pipeline_p2p_latency_ns : 0;
  if (group.nodes() <= 1) {
    return p2p_ns + params.intra_node_latency_ns + params.intra_node_latency_per_rank_ns * n +
           intra_ns;
  }
  const double nic_bytes_per_s =
      links.inter_node_bytes_per_s * group.nic_fraction * params.inter_node_efficiency;
  const double inter_ns = factor * bytes / nic_bytes_per_s * 1e9 * group.spine_slowdown;
  return p2p_ns + params.inter_node_latency_ns + std::max(intra_ns, inter_ns);
}

}  // namespace vtrain
