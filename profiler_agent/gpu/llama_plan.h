// The kernel plan of the Llama workload (and of fp8 linear layers): for each
// operator, the steps the workload launches, in order, each under the name
// core's analytical generator gives that kernel
// (core/profile/llama_kernels.cc), so a measured table lines up with the
// analytical one kernel for kernel. Plain C++: the CUDA workload runs these
// steps one by one (llama_workload.cu), and host tests compare the names with
// core's without a GPU.
#ifndef VTRAIN_PROFILER_AGENT_GPU_LLAMA_PLAN_H_
#define VTRAIN_PROFILER_AGENT_GPU_LLAMA_PLAN_H_

#include <string>
#include <vector>

namespace vtrain::gpu {

// What one step launches.
enum class StepKind {
  kVocabRangeMask,
  kWordEmbeddingGather,
  kWordEmbeddingDenseBwd,
  kWordEmbeddingGradAccumulate,
  kRmsNormFwd,  // index: a Norm
  kRmsNormBwd,
  kCastTranspose,      // index: a Linear; the input to fp8 E4M3 and its transpose
  kCastTransposeGrad,  // index: a Linear; the output gradient to fp8 E5M2 and its transpose
  kGemmFwd,            // index: a Linear
  kGemmDgrad,
  kGemmWgrad,
  kRotaryQFwd,
  kRotaryKFwd,
  kRotaryQBwd,
  kRotaryKBwd,
  kFlashAttentionFwd,
  kFlashAttentionBwdPreprocess,
  kFlashAttentionBwd,
  kFlashAttentionBwdDqConvert,
  kSwigluFwd,
  kSwigluBwd,
  kResidualAddFwd,     // index: a Module
  kResidualAddBwd,     // index: a Module
  kFp8AmaxScaleUpdate  // index: a Module
};

// The linear layers (index of the GEMM and cast steps).
enum Linear : int { kLinearQkv, kLinearProjection, kLinearFc1, kLinearFc2, kLinearLogit };
inline constexpr int kNumFp8Linears = 4;  // the logit layer stays in 16 bits

// The RMSNorms (index of the norm steps).
enum Norm : int { kNormAttention, kNormMlp, kNormFinal };

// The two blocks of a layer (index of residual and scale-update steps).
enum Module : int { kModuleAttention, kModuleMlp };

struct Step {
  StepKind kind;
  int index;         // a Linear, Norm or Module, as the kind says; 0 otherwise
  std::string name;  // core's kernel name
};

// The steps of a Llama-architecture operator (embedding_fwd, attention_fwd,
// mlp_fwd, logit_fwd and their backwards), with the linear layers of the
// attention and MLP blocks in fp8 when `fp8` (Transformer Engine). Empty for
// the loss and the optimizer step (shared with GPT, run by their own code)
// and for unknown names.
std::vector<Step> LlamaOperatorSteps(const std::string& op, bool fp8);

// The name of a linear layer's GEMM: pass 0 forward, 1 data gradient,
// 2 weight gradient (core's names; a static string).
const char* LinearGemmName(int linear, int pass);

// Just the names of a plan's steps (Step or MoeStep, moe_plan.h), in order.
template <class S>
std::vector<std::string> StepNames(const std::vector<S>& steps) {
  std::vector<std::string> names;
  names.reserve(steps.size());
  for (const S& s : steps) names.push_back(s.name);
  return names;
}

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_LLAMA_PLAN_H_
