// Operator workloads of one GPT or Llama decoder layer (plus embedding,
// logit, loss and the Adam step) on the current CUDA device, as Megatron-LM
// (Megatron-Core with Transformer Engine for Llama and fp8) runs them on one
// tensor-parallel rank: cuBLASLt GEMMs (fp8 ones under fp8) and our own
// kernels for everything else. Used by the agent's `profile` command, which
// records their kernels with CUPTI.
#ifndef VTRAIN_PROFILER_AGENT_GPU_WORKLOADS_H_
#define VTRAIN_PROFILER_AGENT_GPU_WORKLOADS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vtrain::gpu {

// The shape of one layer on one tensor-parallel rank. heads, ffn and vocab
// are the model's totals; the workload takes its 1/t share of each.
struct LayerShape {
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn = 0;  // 0: 4 x hidden
  int64_t seq = 0;
  int64_t micro_batch = 0;
  int64_t tensor_parallel = 1;
  int64_t vocab = 50257;
  bool bf16 = false;        // fp16 otherwise
  int64_t adam_params = 0;  // parameters of the optimizer_step workload; 0: skip it
  // The layer architecture: Megatron's GPT layer, or a Llama-style one
  // (RMSNorm, fused QKV at grouped-query width, rotary, causal flash-style
  // attention, SwiGLU, no biases, untied output layer; llama_plan.h).
  bool llama = false;
  int64_t kv_heads = 0;  // Llama: key/value heads (model total); 0: heads
  // Linear layers of the attention and MLP blocks in fp8 as Transformer
  // Engine runs them (cast-transpose, fp8 cuBLASLt GEMMs, amax/scale
  // update), everything else in bf16 (bf16 must be set too); for GPT and
  // Llama layers. The GEMMs need a GPU of compute capability 8.9 or newer.
  bool fp8 = false;
  // A Mixture-of-Experts block instead of a dense layer (experts > 0, Llama
  // layers in 16 bits, t = 1): the workload runs moe_fwd and moe_bwd only
  // (moe_plan.h). ffn is one routed expert's width, each token goes to
  // moe_top_k of the `experts`, and expert_parallel ranks split the experts.
  // Routing is forced balanced, as NVIDIA's MoE benchmarks run it: each local
  // expert computes micro_batch*seq*moe_top_k / (experts/expert_parallel)
  // token copies (the copies this rank receives from its EP group).
  int64_t experts = 0;
  int64_t moe_top_k = 0;
  int64_t expert_parallel = 1;
};

// The MoE workload's bounds: experts a router's top-k kernel scans, experts
// per token.
inline constexpr int64_t kMaxMoeExperts = 1024;
inline constexpr int64_t kMaxMoeTopK = 8;

// Checks a shape before any allocation: every field positive, heads and ffn
// divisible by tensor_parallel, hidden divisible by heads; for Llama, kv_heads
// dividing heads and divisible by tensor_parallel and a head dim of at most
// 256; for fp8, bf16 set and every fp8 GEMM dimension a multiple of 16; for
// MoE, a Llama layer in 16 bits at t = 1, top-k in [1, 8], expert_parallel
// dividing experts and the token copies dividing evenly over the local
// experts. Returns
// "" when valid, else a message that names the field and the fix.
std::string ValidateShape(const LayerShape& shape);

// Device memory a workload of `shape` allocates, in bytes (to refuse shapes
// that cannot fit before trying).
int64_t WorkloadBytes(const LayerShape& shape);

// Buffers, cuBLASLt handle and one stream for the operators of one shape.
// Not thread-safe; one per device.
class LayerWorkload {
 public:
  // Allocates and initialises every buffer (random-ish values, so no
  // kernel sees denormals or NaNs). On failure returns null and sets *error
  // (naming the CUDA or cuBLAS call and its error string).
  static std::unique_ptr<LayerWorkload> Create(const LayerShape& shape, std::string* error);
  virtual ~LayerWorkload() = default;

  // The operators this workload runs, in layer order, named like the
  // profile tables' operator keys: embedding_fwd, attention_fwd, mlp_fwd,
  // logit_fwd, loss_fwd, loss_bwd, logit_bwd, mlp_bwd, attention_bwd,
  // embedding_bwd, and optimizer_step when adam_params > 0 (the same for
  // GPT and Llama shapes); moe_fwd and moe_bwd for an MoE shape.
  virtual std::vector<std::string> Operators() const = 0;

  // Enqueues one operator's kernels on the workload's stream (asynchronous;
  // call Synchronize to wait). Returns "" or an error message.
  virtual std::string Run(const std::string& op) = 0;

  // Waits for the stream; returns "" or the CUDA error.
  virtual std::string Synchronize() = 0;
};

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_WORKLOADS_H_
