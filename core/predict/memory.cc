#include "core/predict/memory.h"

#include <algorithm>
#include <cmath>

#include "core/spec/model.h"

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
// selective recomputation drops.
struct LayerActivationTerms {
  double replicated = 0, split = 0, core = 0;
};

LayerActivationTerms Terms(const ModelSpec& model) {
  const double h = static_cast<double>(model.hidden_size);
  const double a = static_cast<double>(model.num_heads);
  const double s = static_cast<double>(model.seq_len);
  if (model.arch == Architecture::kLlama) {
    // FlashAttention keeps no s x s scores, only its output (and a row
    // log-sum-exp, negligible). Per token, in units of h bytes: two RMSNorm
    // inputs (2 + 2), the QKV and gate/up GEMM inputs (2 + 2); Q (2), K and
    // V (2 * 2 * kv/a), the attention output (2, the projection's input),
    // the gate and up outputs (2 * 2 * f/h) and the SwiGLU output (2 * f/h).
    const double kv = static_cast<double>(model.kv_heads()) / a;
    const double f = static_cast<double>(model.ffn()) / h;
    return {8, 4 + 4 * kv + 6 * f, 2};
  }
  // Korthikanti et al. 2022, §4.1: 10 replicated (layer-norm inputs 4, QKV
  // and MLP inputs 2 + 2, dropout masks 1 + 1), 24 split (Q, K 4, V 2,
  // projection input 2, GeLU input and output 8 + 8), and the attention
  // core's 5*a*s/h (scores 2, softmax dropout mask 1, its output 2).
  return {10, 24 + 5 * a * s / h, 5 * a * s / h};
}

}  // namespace

double LayerActivationBytes(const ModelSpec& model, const ParallelPlan& plan) {
  const double s = static_cast<double>(model.seq_len);
  const double b = static_cast<double>(plan.micro_batch);
  const double h = static_cast<double>(model.hidden_size);
  const double t = static_cast<double>(plan.tensor_parallel);
  const double c = static_cast<double>(plan.context_parallel);
  const bool sp = plan.sequence_parallel_active();
  const LayerActivationTerms terms = Terms(model);
  const double replicated = sp ? terms.replicated / t : terms.replicated;
  double per_token = 0;
  switch (plan.recompute) {
    case Recompute::kFull:
      per_token = sp ? 2 / t : 2;  // the layer input alone
      break;
    case Recompute::kSelective:
      per_token = replicated + (terms.split - terms.core) / t;
      break;
    case Recompute::kNone:
      per_token = replicated + terms.split / t;
      break;
  }
  return s * b * h * per_token / c;
}

int64_t MicroBatchesInFlight(const ParallelPlan& plan, int64_t stage) {
  const int64_t p = plan.pipeline_parallel, m = plan.num_micro_batches();
  if (plan.schedule == PipelineSchedule::kGpipe) return m;
  const int64_t v = plan.virtual_stages;
  if (v == 1) return std::min<int64_t>(p - stage, m);
  const int64_t warmup = 2 * (p - stage - 1) + (v - 1) * p;
  return std::min<int64_t>(warmup + 1, m * v);
}

MemoryEstimate EstimateMemory(const Job& job, const MemoryParams& params) {
  const ModelSpec& m = job.model;
  const ParallelPlan& plan = job.plan;
  const int64_t p = plan.pipeline_parallel;
  const double t = static_cast<double>(plan.tensor_parallel);
  const double c = static_cast<double>(plan.context_parallel);
  const double h = static_cast<double>(m.hidden_size);
  const double s = static_cast<double>(m.seq_len);
  const double b = static_cast<double>(plan.micro_batch);
  const double vocab = static_cast<double>(PaddedVocab(m, plan.tensor_parallel));
  const double layers = static_cast<double>(m.num_layers / p);
  const double layers_per_chunk = layers / static_cast<double>(plan.virtual_stages);
  const double layer_params = LayerParameterCount(m) / t;
  // Megatron shards over the data-parallel group with the context-parallel
  // ranks in it (they hold the same parameters).
  const double shards = static_cast<double>(plan.data_parallel) * c;
  const bool sp = plan.sequence_parallel_active();
  const double per_layer = LayerActivationBytes(m, plan);
  Job uncomputed = job;
  uncomputed.plan.recompute = Recompute::kNone;
  const double full_layer = LayerActivationBytes(m, uncomputed.plan);

  MemoryEstimate out;
  out.capacity_bytes = static_cast<double>(job.cluster.gpu.memory_bytes);
  for (int64_t stage = 0; stage < p; ++stage) {
    StageMemory sm;
    sm.stage = stage;
    sm.parameters = layers * layer_params;
    if (stage == 0) sm.parameters += EmbeddingParametersPerGpu(m, plan.tensor_parallel);
    if (stage == p - 1) sm.parameters += OutputParametersPerGpu(m, plan.tensor_parallel, p);
    switch (plan.data_parallel_sharding) {
      case DataParallelSharding::kNone:
        sm.model_states_bytes = sm.parameters * params.bytes_per_parameter;
        break;
      case DataParallelSharding::kOptimizer:
        sm.model_states_bytes =
            sm.parameters * (params.bytes_per_parameter - params.optimizer_bytes_per_parameter +
                             params.optimizer_bytes_per_parameter / shards);
        break;
      case DataParallelSharding::kFull: {
        // fp16 weights and gradients of two layers, gathered whole.
        const double working = shards > 1 ? 2 * layer_params * 4 : 0;
        sm.model_states_bytes = sm.parameters * params.bytes_per_parameter / shards + working;
        break;
      }
    }
    sm.micro_batches_in_flight = MicroBatchesInFlight(plan, stage);
    const double in_flight = static_cast<double>(sm.micro_batches_in_flight);
    sm.activations_bytes = in_flight * layers_per_chunk * per_layer;
    // Recomputed layers rebuild one layer's activations at a time.
    if (plan.recompute == Recompute::kFull) sm.activations_bytes += full_layer;
    // Embedding output (fp16) on the first stage; fp32 logits of the
    // vocabulary-parallel loss and their gradient on the last. SP keeps the
    // embedding output split over t; CP holds s/c tokens.
    if (stage == 0) sm.logits_bytes += 2 * s * b * h / (sp ? t : 1) / c;
    if (stage == p - 1) sm.logits_bytes += 2 * 4 * s / c * b * std::ceil(vocab / t);
    sm.reserve_bytes = params.reserve_bytes;
    sm.peak_bytes =
        sm.model_states_bytes + sm.activations_bytes + sm.logits_bytes + sm.reserve_bytes;
    out.peak_bytes = std::max(out.peak_bytes, sm.peak_bytes);
    out.stages.push_back(sm);
  }
  out.fits = out.peak_bytes <= out.capacity_bytes * (1 - job.cluster.memory_headroom);
  return out;
}

}  // namespace vtrain
