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

MemoryEstimate EstimateMemory(const Job& job, const MemoryParams& params) {
  const ModelSpec& m = job.model;
  const ParallelPlan& plan = job.plan;
  const int64_t p = plan.pipeline_parallel;
  const int64_t micro_batches = plan.num_micro_batches();
  const double t = static_cast<double>(plan.tensor_parallel);
  const double h = static_cast<double>(m.hidden_size);
  const double s = static_cast<double>(m.seq_len);
  const double b = static_cast<double>(plan.micro_batch);
  const double vocab = static_cast<double>(PaddedVocab(m, plan.tensor_parallel));
  const double layers = static_cast<double>(m.num_layers / p);
  const double layer_activations = LayerActivationBytes(m, plan.micro_batch, plan.tensor_parallel);

  MemoryEstimate out;
  out.capacity_bytes = static_cast<double>(job.cluster.gpu.memory_bytes);
  for (int64_t stage = 0; stage < p; ++stage) {
    StageMemory sm;
    sm.stage = stage;
    sm.parameters = layers * LayerParameterCount(m) / t;
    if (stage == 0) sm.parameters += EmbeddingParametersPerGpu(m, plan.tensor_parallel);
    if (stage == p - 1) sm.parameters += OutputParametersPerGpu(m, plan.tensor_parallel, p);
    sm.model_states_bytes = sm.parameters * params.bytes_per_parameter;
    sm.micro_batches_in_flight = plan.schedule == PipelineSchedule::kGpipe
                                     ? micro_batches
                                     : std::min<int64_t>(p - stage, micro_batches);
    const double in_flight = static_cast<double>(sm.micro_batches_in_flight);
    if (plan.recompute == Recompute::kFull) {
      sm.activations_bytes = in_flight * layers * 2 * s * b * h + layer_activations;
    } else {
      sm.activations_bytes = in_flight * layers * layer_activations;
    }
    // Embedding output (fp16) on the first stage; fp32 logits of the
    // vocabulary-parallel loss and their gradient on the last.
    if (stage == 0) sm.logits_bytes += 2 * s * b * h;
    if (stage == p - 1) sm.logits_bytes += 2 * 4 * s * b * std::ceil(vocab / t);
    sm.reserve_bytes = params.reserve_bytes;
    sm.peak_bytes =
        sm.model_states_bytes + sm.activations_bytes + sm.logits_bytes + sm.reserve_bytes;
    out.peak_bytes = std::max(out.peak_bytes, sm.peak_bytes);
    out.stages.push_back(sm);
  }
  out.fits = out.peak_bytes <= out.capacity_bytes;
  return out;
}

}  // namespace vtrain
