#include "core/predict/memory.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/graph/schedule.h"
#include "core/spec/model.h"
#include "core/spec/moe.h"
#include "core/spec/pipeline_layout.h"

namespace vtrain {

double LayerActivationBytes(const ModelSpec& model, int64_t micro_batch, int64_t tensor_parallel) {
  const double s = static_cast<double>(model.seq_len);
  const double b = static_cast<double>(micro_batch);
  const double h = static_cast<double>(model.hidden_size);
  const double a = static_cast<double>(model.num_heads);
  const double t = static_cast<double>(tensor_parallel);
  return s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
}

namespace {

// Bytes per token and per hidden unit a layer keeps, split into the part
// only sequence parallelism divides by t (norm inputs, dropout masks, the
// inputs of the column-parallel GEMMs) and the part tensor parallelism
// divides; `core`: the attention core's share of the latter, which
// selective recomputation drops; `mlp`: the MLP's share of the split part
// (the shared experts' in a MoE layer), which recomputing mlp or moe drops.
// `mla_up`: under MLA, Q, K and V (the up-projections' outputs), which
// recomputing mla_up_proj drops (the latents they are made from are kept).
struct LayerActivationTerms {
  double replicated = 0, split = 0, core = 0, mlp = 0, mla_up = 0;
};

LayerActivationTerms Terms16(const ModelSpec& model, bool moe_layer) {
  const double h = static_cast<double>(model.hidden_size);
  const double a = static_cast<double>(model.num_heads);
  const double s = static_cast<double>(model.seq_len);
  const bool unfused = model.attention_impl == AttentionImpl::kUnfused;
  if (model.arch == Architecture::kLlama) {
    // FlashAttention keeps no s x s scores, only its output (and a row
    // log-sum-exp, negligible). The output is also the projection's input,
    // which the projection keeps whatever the core does: recomputing the
    // core (core_attn) drops only the unfused scores. Megatron-Core
    // checkpoints the core with Q, K and V as its inputs and warns that a
    // fused core has no need of it (transformer_config.py); under
    // FlashAttention it costs a forward and saves nothing vtrain counts.
    // Per token, in units of h bytes: two RMSNorm
    // inputs (2 + 2), the QKV and gate/up GEMM inputs (2 + 2); Q (2 qd/h),
    // K and V (2 * 2 kvd/h), the attention output (2 qd/h, the projection's
    // input), the gate and up outputs (2 * 2 * f/h) and the SwiGLU output
    // (2 * f/h); qd = heads * head_dim, kvd = kv_heads * head_dim. MLA keeps
    // its two latents (replicated), Q and K of heads * (d + rope), V and the
    // output of heads * v. A MoE layer's MLP terms are its shared experts';
    // the routed copies are counted apart (RoutedActivationBytes).
    const double d = static_cast<double>(model.head_width());
    const double f = static_cast<double>(moe_layer ? model.moe.shared_width() : model.ffn()) / h;
    if (model.attention == AttentionKind::kMla) {
      const MlaDims& m = model.mla;
      const double qk = a * (d + static_cast<double>(m.rope_head_dim)) / h;
      const double v = a * static_cast<double>(m.value_head_dim) / h;
      const double latents =
          2 * static_cast<double>(m.q_lora_rank + m.kv_lora_rank + m.rope_head_dim) / h;
      return {8 + latents, 4 * qk + 4 * v + 6 * f, 0, 6 * f, 4 * qk + 2 * v};
    }
    const double qd = a * d / h;
    const double kvd = static_cast<double>(model.kv_heads()) * d / h;
    // Unfused, the softmax output (2 bytes per score; no dropout in Llama
    // recipes) is kept for the weighted sum's and the softmax's backward.
    const double scores = unfused ? 2 * a * s / h : 0;
    return {8, 4 * qd + 4 * kvd + 6 * f + scores, scores, 6 * f};
  }
  // Korthikanti et al. 2022, §4.1: 10 replicated (layer-norm inputs 4, QKV
  // and MLP inputs 2 + 2, dropout masks 1 + 1), 24 split (Q, K 4, V 2,
  // projection input 2, GeLU input and output 8 + 8), and the attention
  // core's 5*a*s/h (scores 2, softmax dropout mask 1, its output 2).
  // FlashAttention keeps none of the s x s terms (its dropout mask is
  // regenerated from the RNG state), and its output is the projection's
  // input (in the 24): selective recomputation then drops nothing, as for
  // Llama.
  if (!unfused) return {10, 24, 0, 16};
  return {10, 24 + 5 * a * s / h, 5 * a * s / h, 16};
}

// Under fp8 Transformer Engine's linear layers keep their own fp8 copy of
// their input for the weight gradient, one byte an element, and the 16-bit
// input is freed unless something else keeps it (module/linear.py,
// layernorm_linear.py, grouped_linear.py: the row-wise data is dropped, the
// column-wise kept). In units of h bytes a token: a norm fused into QKV or
// fc1 keeps its output at 1, not 2 (a MoE layer's pre-MLP norm is its own
// module and the 16-bit router keeps its output; its shared experts' fc1
// adds an fp8 copy; MLA's input norm feeds two down-projections, a copy
// each: unchanged); the activation's output into fc2 halves; the attention
// output gains the projection's fp8 copy beside the 16-bit one
// FlashAttention keeps for its backward (unfused, the core keeps none, and
// it halves). fp8 attention (fp8_dpa) is not modelled.
LayerActivationTerms Terms(const ModelSpec& model, const ParallelPlan& plan, bool moe_layer) {
  LayerActivationTerms x = Terms16(model, moe_layer);
  if (plan.dtype != DType::kFp8) return x;
  const double h = static_cast<double>(model.hidden_size);
  const bool flash = model.attention_impl != AttentionImpl::kUnfused;
  if (model.arch != Architecture::kLlama) {
    // GPT: QKV and fc1 inputs 2 + 2 -> 1 + 1; the GeLU output 8 -> 4.
    x.replicated -= 2;
    x.split += (flash ? 1 : -1) - 4;
    x.mlp -= 4;
    return x;
  }
  const bool mla = model.attention == AttentionKind::kMla;
  const double heads = static_cast<double>(model.num_heads);
  const double output =
      heads * static_cast<double>(mla ? model.mla.value_head_dim : model.head_width()) / h;
  const double f = static_cast<double>(moe_layer ? model.moe.shared_width() : model.ffn()) / h;
  if (!mla) x.replicated -= 1;                // the fused QKV norm's output
  if (!moe_layer) x.replicated -= 1;          // the fused fc1 norm's output
  if (moe_layer && f > 0) x.replicated += 1;  // the shared experts' fc1 copy
  x.split += (flash ? 1 : -1) * output - f;   // projection input; SwiGLU output
  x.mlp -= f;
  return x;
}

}  // namespace

// The routed token copies a MoE layer keeps per micro-batch on one rank:
// per copy its permuted input and the fc2 output (2h each), the fc1 output
// (2 * 2 * expert_ffn / etp) and the SwiGLU output (2 * expert_ffn / etp),
// plus the fp32 router probabilities per token. Full recomputation, or
// recomputing the moe module, keeps none of it; recomputing moe_act drops
// the SwiGLU output. Under fp8 the grouped GEMMs keep fp8 copies of their
// inputs (Terms): the permuted input 2h -> h, the SwiGLU output halves.
double RoutedActivationBytes(const ModelSpec& model, const ParallelPlan& plan) {
  if (!model.is_moe() || plan.recompute == Recompute::kFull || plan.recomputes(kRecomputeMoe)) {
    return 0;
  }
  const double h = static_cast<double>(model.hidden_size);
  const double tokens = MoeTokensPerRank(model, plan);
  const ExpertLoad load = ExpectedExpertLoad(model, plan);
  const double etp = static_cast<double>(plan.expert_tensor_parallel);
  const double copies = tokens * static_cast<double>(model.moe.top_k) * etp * load.max_over_mean;
  const double fe = static_cast<double>(model.moe.expert_ffn) / etp;
  const bool fp8 = plan.dtype == DType::kFp8;
  const double swiglu_output = plan.recomputes(kRecomputeMoeAct) ? 0 : (fp8 ? 1 : 2);
  const double per_copy = (fp8 ? 3 : 4) * h + (4 + swiglu_output) * fe;
  return copies * per_copy + tokens * static_cast<double>(model.moe.num_experts) * 4;
}

double LayerActivationBytes(const ModelSpec& model, const ParallelPlan& plan) {
  return LayerActivationBytes(model, plan, /*moe_layer=*/false);
}

double LayerActivationBytes(const ModelSpec& model, const ParallelPlan& plan, bool moe_layer) {
  const double s = static_cast<double>(model.seq_len);
  const double b = static_cast<double>(plan.micro_batch);
  const double h = static_cast<double>(model.hidden_size);
  const double t = static_cast<double>(plan.tensor_parallel);
  const double c = static_cast<double>(plan.context_parallel);
  const bool sp = plan.sequence_parallel_active();
  const LayerActivationTerms terms = Terms(model, plan, moe_layer);
  const double replicated = sp ? terms.replicated / t : terms.replicated;
  double per_token = 0;
  switch (plan.recompute) {
    case Recompute::kFull:
      per_token = sp ? 2 / t : 2;  // the layer input alone
      break;
    case Recompute::kSelective: {
      // Megatron-Core's --recompute-modules (core_attn alone by default).
      double split = terms.split;
      if (plan.recomputes(kRecomputeCoreAttn)) split -= terms.core;
      // The MLP's share: a dense layer's under mlp, the shared experts' under
      // moe (the whole block) or shared_experts.
      if (plan.recomputes(moe_layer ? kRecomputeMoe : kRecomputeMlp) ||
          (moe_layer && plan.recomputes(kRecomputeSharedExperts))) {
        split -= terms.mlp;
      }
      if (plan.recomputes(kRecomputeMlaUpProj)) split -= terms.mla_up;
      // layernorm drops the outputs (2 each) of the norms that are modules
      // of their own: a MoE layer's pre-MLP norm and MLA's input norm.
      // Transformer Engine fuses a standard attention's and a dense MLP's
      // norm into their first GEMM, which keeps its input; Megatron-Core
      // recomputes neither (transformer_layer.py, gpt_layer_specs.py).
      const double own_norms =
          (moe_layer ? 2 : 0) + (model.attention == AttentionKind::kMla ? 2 : 0);
      const double norms =
          plan.recomputes(kRecomputeLayernorm) ? (sp ? own_norms / t : own_norms) : 0;
      per_token = replicated - norms + split / t;
      break;
    }
    case Recompute::kNone:
      per_token = replicated + terms.split / t;
      break;
  }
  return s * b * h * per_token / c + (moe_layer ? RoutedActivationBytes(model, plan) : 0);
}

double SplitChunksInFlight(const ParallelPlan& plan, int64_t stage, double weight_share) {
  // The lists repeat one steady pattern between warm-up and cool-down, whose
  // length alone grows with m: the peak of 4p + 4 micro-batches is that of
  // any more (and the list stays small for any m).
  ParallelPlan shorter = plan;
  const int64_t m = std::min(plan.num_micro_batches(), 4 * plan.pipeline_parallel + 4);
  shorter.global_batch = m * plan.data_parallel * plan.micro_batch;
  double held = 0, peak = 0;
  for (const ScheduledPass& pass : ScheduledPasses(shorter, stage)) {
    switch (pass.kind) {
      case PassKind::kForward:
        held += 1;
        break;
      case PassKind::kBackward:
        held -= 1;
        break;
      case PassKind::kInputGrad:
        held -= 1 - weight_share;
        break;
      case PassKind::kWeightGrad:
        held -= weight_share;
        break;
    }
    peak = std::max(peak, held);
  }
  return peak;
}

double WeightGradientShare(const ModelSpec& model, const ParallelPlan& plan) {
  // Per token: the inputs of QKV and FC1 (h wide, split over t under SP),
  // of the attention projection (heads x head width) and of FC2 (the FFN
  // width), over t; fp16.
  const double t = static_cast<double>(plan.tensor_parallel);
  const double h = static_cast<double>(model.hidden_size);
  const double split_h = plan.sequence_parallel_active() ? h / t : h;
  const double per_token =
      2 * (2 * split_h + static_cast<double>(model.num_heads * model.head_width()) / t +
           static_cast<double>(model.ffn()) / t);
  const double tokens = static_cast<double>(model.seq_len * plan.micro_batch) /
                        static_cast<double>(plan.context_parallel);
  const double layer = LayerActivationBytes(model, plan);
  return layer > 0 ? std::min(1.0, per_token * tokens / layer) : 1.0;
}

double DispatcherBufferBytes(const Job& job) {
  const ParallelPlan& plan = job.plan;
  if (!job.model.is_moe() || !IsFlex(plan.moe.dispatcher) || !ExchangesTokens(plan)) return 0;
  const double g = static_cast<double>(plan.expert_parallel * plan.expert_tensor_parallel);
  const double h = static_cast<double>(job.model.hidden_size);
  if (plan.moe.dispatcher == MoeDispatcher::kHybridEp) {
    // HybridEP (DeepEP's hybrid-ep branch, 94a9f8f; Megatron-Core's
    // init_hybrid_ep_buffer) sizes for every EP rank's tokens landing on
    // one: tokens a rank dispatches padded to 64 (at least 512) times the
    // ranks, each with 2h bytes, per-expert probabilities of the NVLink
    // domain's ranks and an fp32 scale per 128; the routing map's all-gather;
    // past one node an RDMA staging buffer per other node.
    const double t = 64 * std::ceil(std::max(MoeTokensPerRank(job.model, plan), 512.0) / 64);
    const double local =
        static_cast<double>(job.model.moe.num_experts) / static_cast<double>(plan.expert_parallel);
    const double r = std::min(g, static_cast<double>(NvlinkDomainGpus(job.cluster)));
    const double nodes = std::max(1.0, g / r);
    const double nvl = t * g * (2 * h + 4 * local * r + 4 * h / 128) + 8 * std::ceil(t / 64) * g;
    const double allgather = t * g * local * g;
    const double rdma = nodes <= 1 ? 0
                                   : t * ((2 * h + 4 * local * g + 4 * h / 128) +
                                          (nodes - 1) * (6 * h + 12 * local * r + 4 * h / 128)) +
                                         32 * (nodes - 1) * (std::ceil(t / 64) + 2);
    return nvl + allgather + rdma;
  }
  // DeepEP's Config::get_nvl_buffer_size_hint and get_rdma_buffer_size_hint
  // (csrc/config.hpp; the dispatch and combine configs of deep_ep/buffer.py,
  // hybrid-ep branch 94a9f8f) for Megatron-Core's one buffer a process
  // (fused_a2a.py, get_buffer): 10 channels (20 SMs), 8 NVLink peers at
  // most, 256 NVLink receive tokens up to 8 ranks, 288 to 64, 560 beyond;
  // 140 RDMA receive tokens; per token 2h bytes of bf16 and 2,056 (2,072 over
  // RDMA) of metadata (top-k indices, weights, scales); a 32 MiB workspace.
  const double h2 = 2 * h;
  const double nvl_ranks = std::min(g, 8.0), rdma_ranks = std::max(g / 8, 1.0);
  const double nvl_tokens = g <= 8 ? 256 : (g <= 64 ? 288 : 560);
  const double nvl = 10 * nvl_ranks * nvl_tokens * (h2 + 2056);
  const double rdma = g <= 8 ? 0 : 10 * rdma_ranks * 2 * 140 * (h2 + 2072);
  return nvl + rdma + 32.0 * (1 << 20);
}

int64_t MicroBatchesInFlight(const ParallelPlan& plan, int64_t stage) {
  const int64_t p = plan.pipeline_parallel, m = plan.num_micro_batches();
  if (plan.schedule == PipelineSchedule::kGpipe) return m;
  if (SplitsBackward(plan.schedule)) {
    return std::llround(std::ceil(SplitChunksInFlight(plan, stage, /*weight_share=*/1)));
  }
  const int64_t v = plan.virtual_stages;
  if (v == 1) return std::min<int64_t>(p - stage, m);
  const int64_t warmup = 2 * (p - stage - 1) + (v - 1) * p;
  return std::min<int64_t>(warmup + 1, m * v);
}

namespace {

// Each chunk's layers as the pipeline layout lays them; an unresolvable
// layout (which ValidateJob refuses) falls back to an even split.
std::vector<ChunkLayers> ChunksOf(const Job& job) {
  absl::StatusOr<std::vector<ChunkLayers>> layout = ResolvePipelineLayout(job);
  if (layout.ok()) return *std::move(layout);
  const int64_t chunks = std::max<int64_t>(1, job.plan.pipeline_parallel * job.plan.virtual_stages);
  std::vector<ChunkLayers> even(chunks);
  for (int64_t k = 0; k < chunks; ++k) {
    even[k].num_layers = job.model.num_layers / chunks;
    even[k].first_layer = k * even[k].num_layers;
  }
  even.back().mtp_layers = job.model.mtp_layers;
  return even;
}

// One layer's activations without recomputation (the largest kind of layer).
double UncomputedLayerBytes(const ModelSpec& m, ParallelPlan plan) {
  plan.recompute = Recompute::kNone;
  return std::max(LayerActivationBytes(m, plan),
                  m.is_moe() ? LayerActivationBytes(m, plan, true) : 0.0);
}

// Whether `stage` holds the model's first and last chunks: the first and
// last stages, or where the schedule places them (DualPipeV: both on stage
// 0; DualPipe: both on the first and the last).
std::pair<bool, bool> HoldsEnds(const ParallelPlan& plan, int64_t stage) {
  bool first = false, last = false;
  for (int64_t c = 0; c < plan.chunks_per_stage(); ++c) {
    first = first || plan.chunk_position(stage, c) == 0;
    last =
        last || plan.chunk_position(stage, c) == plan.pipeline_parallel * plan.virtual_stages - 1;
  }
  return {first, last};
}

}  // namespace

namespace {

// `given`, with the precision-aware optimizer's bf16 moments when the plan
// uses them: fp32 master weights (4) and two bf16 moments (2 + 2) instead of
// 4 + 4 + 4.
MemoryParams ParamsFor(const Job& job, MemoryParams params) {
  if (job.plan.bf16_moments) {
    params.bytes_per_parameter -= 4;
    params.optimizer_bytes_per_parameter -= 4;
  }
  // An fp32 gradient buffer: 4 bytes of gradient, not 2 (not sharded by the
  // distributed optimizer; FSDP shards it with the rest).
  if (job.plan.fp32_grads) params.bytes_per_parameter += 2;
  return params;
}

}  // namespace

MemoryEstimate EstimateMemory(const Job& job, const MemoryParams& given) {
  const MemoryParams params = ParamsFor(job, given);
  const ModelSpec& m = job.model;
  const ParallelPlan& plan = job.plan;
  const int64_t p = plan.pipeline_parallel;
  const double t = static_cast<double>(plan.tensor_parallel);
  const double c = static_cast<double>(plan.context_parallel);
  const double h = static_cast<double>(m.hidden_size);
  const double s = static_cast<double>(m.seq_len);
  const double b = static_cast<double>(plan.micro_batch);
  const double vocab = static_cast<double>(PaddedVocab(m, plan.tensor_parallel));
  const int64_t v = plan.chunks_per_stage();
  const std::vector<ChunkLayers> layout = ChunksOf(job);
  const double layer_params = LayerParameterCount(m) / t;
  // Routed experts spread over ep * etp ranks; their optimizer states over
  // the expert data-parallel group.
  const double expert_split =
      static_cast<double>(plan.expert_parallel * plan.expert_tensor_parallel);
  const double expert_shards = static_cast<double>(ExpertDataParallel(plan));
  // Megatron shards over the data-parallel group with the context-parallel
  // ranks in it (they hold the same parameters).
  const double shards = static_cast<double>(plan.data_parallel) * c;
  const bool sp = plan.sequence_parallel_active();
  const double per_layer = LayerActivationBytes(m, plan);
  const double per_moe_layer = m.is_moe() ? LayerActivationBytes(m, plan, true) : 0;
  const double full_layer = UncomputedLayerBytes(m, plan);
  const double reserve = params.reserve_bytes + DispatcherBufferBytes(job);  // every stage

  MemoryEstimate out;
  out.capacity_bytes = static_cast<double>(job.cluster.gpu.memory_bytes);
  for (int64_t stage = 0; stage < p; ++stage) {
    StageMemory sm;
    sm.stage = stage;
    double dense = 0, experts = 0, chunk_activations = 0;
    int64_t mtp_layers = 0;
    for (int64_t c = 0; c < v; ++c) {
      const ChunkLayers& k = layout[plan.chunk_position(stage, c)];
      const LayerParameters chunk = LayerParametersIn(m, k.first_layer, k.num_layers);
      dense += chunk.dense / t;
      experts += chunk.experts / expert_split;
      const int64_t moe_layers = m.MoeLayersIn(k.first_layer, k.num_layers);
      chunk_activations += static_cast<double>(k.num_layers - moe_layers) * per_layer +
                           static_cast<double>(moe_layers) * per_moe_layer;
      mtp_layers += k.mtp_layers;
    }
    chunk_activations /= static_cast<double>(v);
    if (mtp_layers > 0) {
      // DeepSeek's MTP modules: a layer of the last layer's kind each, plus
      // the 2h -> h projection.
      const LayerParameters last = LayerParametersIn(m, m.num_layers - 1, 1);
      const double mtp = static_cast<double>(mtp_layers);
      dense += mtp * (last.dense + 2 * h * h) / t;
      experts += mtp * last.experts / expert_split;
    }
    const auto [first, last] = HoldsEnds(plan, stage);
    if (first) dense += EmbeddingParametersPerGpu(m, plan.tensor_parallel);
    if (last) dense += OutputParametersPerGpu(m, plan.tensor_parallel, p);
    sm.parameters = dense + experts;
    switch (plan.data_parallel_sharding) {
      case DataParallelSharding::kNone:
        sm.model_states_bytes = sm.parameters * params.bytes_per_parameter;
        break;
      case DataParallelSharding::kOptimizer: {
        const double unsharded = params.bytes_per_parameter - params.optimizer_bytes_per_parameter;
        sm.model_states_bytes =
            dense * (unsharded + params.optimizer_bytes_per_parameter / shards) +
            experts * (unsharded + params.optimizer_bytes_per_parameter / expert_shards);
        break;
      }
      case DataParallelSharding::kFull: {
        // fp16 weights and gradients of two layers, gathered whole.
        const double working = shards > 1 ? 2 * layer_params * 4 : 0;
        sm.model_states_bytes = dense * params.bytes_per_parameter / shards +
                                experts * params.bytes_per_parameter / expert_shards + working;
        break;
      }
    }
    sm.micro_batches_in_flight = MicroBatchesInFlight(plan, stage);
    const double in_flight = static_cast<double>(sm.micro_batches_in_flight);
    sm.activations_bytes = (SplitsBackward(plan.schedule)
                                ? SplitChunksInFlight(plan, stage, WeightGradientShare(m, plan))
                                : in_flight) *
                           chunk_activations;
    // Recomputed layers rebuild one layer's activations at a time.
    if (plan.recompute == Recompute::kFull) sm.activations_bytes += full_layer;
    // Embedding output (fp16) on the first stage; fp32 logits of the
    // vocabulary-parallel loss and their gradient on the last. SP keeps the
    // embedding output split over t; CP holds s/c tokens.
    if (first) sm.logits_bytes += 2 * s * b * h / (sp ? t : 1) / c;
    if (last) sm.logits_bytes += 2 * 4 * s / c * b * std::ceil(vocab / t);
    sm.reserve_bytes = reserve;
    sm.peak_bytes =
        sm.model_states_bytes + sm.activations_bytes + sm.logits_bytes + sm.reserve_bytes;
    out.peak_bytes = std::max(out.peak_bytes, sm.peak_bytes);
    out.stages.push_back(sm);
  }
  out.fits = out.peak_bytes <= out.capacity_bytes * (1 - job.cluster.memory_headroom);
  return out;
}

}  // namespace vtrain
