// Per-GPU memory of a training plan: weights, gradients and optimizer
// states, the activations of the micro-batches in flight, embedding and
// logit buffers, and a framework reserve.
#ifndef VTRAIN_CORE_PREDICT_MEMORY_H_
#define VTRAIN_CORE_PREDICT_MEMORY_H_

#include <cstdint>
#include <vector>

#include "core/spec/job.h"

namespace vtrain {

struct MemoryParams {
  // Mixed-precision Adam: fp16 weights (2) and gradients (2), fp32 master
  // weights and two moments (12) per parameter (Rajbhandari et al. 2020,
  // ZeRO, §3.1: 16 bytes per parameter).
  double bytes_per_parameter = 16;
  // CUDA context, NCCL buffers and allocator fragmentation.
  double reserve_bytes = 2.0 * (1 << 30);
};

struct StageMemory {
  int64_t stage = 0;
  double parameters = 0;          // on one GPU of the stage
  double model_states_bytes = 0;  // weights, gradients, optimizer states
  double activations_bytes = 0;   // micro-batches in flight, peak
  double logits_bytes = 0;        // embedding output / fp32 logits and their gradient
  double reserve_bytes = 0;
  double peak_bytes = 0;  // the sum
  int64_t micro_batches_in_flight = 0;
};

struct MemoryEstimate {
  std::vector<StageMemory> stages;
  double peak_bytes = 0;      // over all stages
  double capacity_bytes = 0;  // of the GPU
  bool fits = true;           // peak_bytes within capacity less cluster.memory_headroom
};

// Activation bytes of one transformer layer for one micro-batch with tensor
// parallelism and no sequence parallelism (Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", §4.2,
// Eq. 2 with t-way tensor parallelism): s*b*h*(10 + 24/t + 5*a*s/(h*t)).
double LayerActivationBytes(const ModelSpec& model, int64_t micro_batch, int64_t tensor_parallel);

// The per-GPU memory of every stage of `job` (which must be valid).
// With full recomputation a layer keeps only its input (2*s*b*h bytes) per
// micro-batch in flight, plus one layer's full activations while it is
// recomputed (Korthikanti et al. 2022, §4.1). 1F1B keeps up to p - stage
// micro-batches in flight, GPipe all m (Narayanan et al. 2021, §2.2).
MemoryEstimate EstimateMemory(const Job& job, const MemoryParams& params = {});

}  // namespace vtrain

#endif  // VTRAIN_CORE_PREDICT_MEMORY_H_
