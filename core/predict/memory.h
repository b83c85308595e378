// Per-GPU memory of a training plan: weights, gradients and optimizer
// states, the activations of the micro-batches in flight, embedding and
// logit buffers, a framework reserve and the MoE dispatcher's buffers.
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
  // Of those, the fp32 master weights and Adam moments: the part the
  // distributed optimizer (ZeRO-1) divides over the data-parallel ranks.
  double optimizer_bytes_per_parameter = 12;
  // CUDA context, NCCL buffers and allocator fragmentation.
  double reserve_bytes = 2.0 * (1 << 30);
};

struct StageMemory {
  int64_t stage = 0;
  double parameters = 0;          // on one GPU of the stage
  double model_states_bytes = 0;  // weights, gradients, optimizer states (sharded share)
  double activations_bytes = 0;   // micro-batches in flight, peak
  double logits_bytes = 0;        // embedding output / fp32 logits and their gradient
  double reserve_bytes = 0;
  double peak_bytes = 0;  // the sum
  // Micro-batches whose activations are held at the peak; with interleaving,
  // model-chunk forwards (each of layers / (p * V) layers).
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

// The same for every option of `plan` (Korthikanti et al. 2022, Table 2):
//  - no recomputation:        s*b*h*(10 + 24/t + 5*a*s/(h*t));
//    with sequence parallelism s*b*h/t*(34 + 5*a*s/h);
//  - selective recomputation: s*b*h*(10 + 24/t), with SP s*b*h*34/t;
//  - full recomputation: the layer input alone, 2*s*b*h (2*s*b*h/t with SP).
// Context parallelism holds s/c of the sequence on each rank and divides each
// by c (a rank's attention scores are (s/c) x s).
// Llama layers (FlashAttention, SwiGLU, grouped-query attention) keep no
// s x s scores: s*b*h*(8 + (4 + 4*kv/a + 6*f/h)/t) without recomputation,
// the 8 divided by t too with SP; selective recomputation drops the
// attention output's 2.
double LayerActivationBytes(const ModelSpec& model, const ParallelPlan& plan);
// The same for a MoE layer (`moe_layer`): its attention, its shared experts
// in place of the MLP, and the routed token copies (top_k per token, the
// busiest rank's load, gathered over etp) with their expert activations.
double LayerActivationBytes(const ModelSpec& model, const ParallelPlan& plan, bool moe_layer);

// The communication buffers a MoE dispatcher allocates on every GPU, outside
// PyTorch's allocator: DeepEP's (the flex dispatcher) NVLink buffer and,
// past one node's 8 ranks, its RDMA buffer, sized by hidden size and
// EP x ETP ranks alone (0.2 GiB at EP 8 of hidden 4096, 0.7 GiB at EP 64 of
// 7168). 0 for the other dispatchers (NCCL's buffers are in the reserve).
// HybridEP (the hybridep dispatcher) sizes its buffers for the worst case,
// every rank's tokens landing on one: about 2h bytes a token times the
// rank's tokens times the ranks (2.5 GiB for DeepSeek-V3 at EP 64, t = 2).
double DispatcherBufferBytes(const Job& job);

// Micro-batch forwards `stage` holds at its peak. 1F1B: min(p - stage, m);
// GPipe: m; interleaved 1F1B (Megatron-LM's schedules.py): its warm-up of
// 2*(p - stage - 1) + (V - 1)*p chunk forwards plus the one of the steady
// state, at most m*V.
// The split-backward schedules (zb-h1, dualpipe, dualpipev): the chunk
// forwards whose backward or weight gradient has not run yet, at the peak of
// the stage's pass list (core/graph/schedule.h).
int64_t MicroBatchesInFlight(const ParallelPlan& plan, int64_t stage);

// Chunk activations `stage` holds at its peak under a split-backward
// schedule, counting a chunk whose B has run and whose W has not as
// `weight_share` of one (W keeps only the linear layers' inputs).
double SplitChunksInFlight(const ParallelPlan& plan, int64_t stage, double weight_share);

// The share of a layer's stored activations its weight-gradient pass still
// needs: the inputs of its linear layers, at most all of them.
double WeightGradientShare(const ModelSpec& model, const ParallelPlan& plan);

// The per-GPU memory of every stage of `job` (which must be valid).
// With full recomputation a layer keeps only its input (2*s*b*h bytes) per
// micro-batch in flight, plus one layer's full activations while it is
// recomputed (Korthikanti et al. 2022, §4.1). 1F1B keeps up to p - stage
// micro-batches in flight, GPipe all m (Narayanan et al. 2021, §2.2).
// Sharding over the d * c data-parallel ranks (ZeRO, Rajbhandari et al.
// 2020, §5.1): kOptimizer divides the optimizer bytes, kFull every byte and
// adds the gathered weights and unreduced gradients of two layers (the one
// running and the one prefetched).
MemoryEstimate EstimateMemory(const Job& job, const MemoryParams& params = {});

}  // namespace vtrain

#endif  // VTRAIN_CORE_PREDICT_MEMORY_H_
