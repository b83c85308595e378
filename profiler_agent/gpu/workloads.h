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
};

// Checks a shape before any allocation: every field positive, heads and ffn
// divisible by tensor_parallel, hidden divisible by heads; for Llama, kv_heads
// dividing heads and divisible by tensor_parallel and a head dim of at most
// 256; for fp8, bf16 set and every fp8 GEMM dimension a multiple of 16. Returns
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
  // GPT and Llama shapes).
  virtual std::vector<std::string> Operators() const = 0;

  // Enqueues one operator's kernels on the workload's stream (asynchronous;
  // call Synchronize to wait). Returns "" or an error message.
  virtual std::string Run(const std::string& op) = 0;

  // Waits for the stream; returns "" or the CUDA error.
  virtual std::string Synchronize() = 0;
};

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_WORKLOADS_H_
