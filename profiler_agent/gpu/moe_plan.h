// The kernel plan of the agent's MoE workload: the steps of one MoE block's
// forward and backward (moe_fwd, moe_bwd) on one rank, each under the name
// core's analytical generator gives that kernel (core/profile/moe_kernels.cc:
// RMSNorm, the router GEMM and top-k, the permutation of the token copies,
// the local experts' GEMMs one cuBLAS GEMM per expert on 4 streams as
// Transformer Engine's GroupedLinear runs them, SwiGLU, the unpermutation,
// the residual add), so a measured table lines up with the analytical one
// kernel for kernel. Plain C++: the CUDA workload (moe_workload.cu) runs
// these steps, and host tests compare the names with core's without a GPU.
// Covered: 16-bit routed experts, expert tensor parallel 1, no shared
// experts, no fp8 (MoeShapeProblem says so for a shape that asks).
#ifndef VTRAIN_PROFILER_AGENT_GPU_MOE_PLAN_H_
#define VTRAIN_PROFILER_AGENT_GPU_MOE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

namespace vtrain::gpu {

enum class MoeStepKind {
  kRmsNormFwd,
  kRouterGemmFwd,
  kRouterTopkFwd,
  kPermuteFwd,
  kExpertGemm,  // expert: which local expert; linear 0 fc1, 1 fc2; pass 0 fwd, 1 dgrad, 2 wgrad
  kSwigluFwd,
  kUnpermuteFwd,
  kResidualAddFwd,
  kUnpermuteBwd,
  kSwigluBwd,
  kPermuteBwd,
  kRouterTopkBwd,
  kRouterGemmDgrad,
  kRouterGemmWgrad,
  kRmsNormBwd,
  kResidualAddBwd,
  // A small memory-bound kernel around the router or the dispatch (the
  // auxiliary loss, the dispatch's count preprocessing, the fused
  // permutation's row map, the router's casts): `small` says its size
  // (MoeSmallKernelBytes).
  kSmallKernel,
};

// The sizes of kSmallKernel steps, as core/profile/moe_kernels.cc prices them.
enum MoeSmallSize { kSmallCounts = 0, kSmallRoutingMap, kSmallProbs, kSmallProbsCast };

struct MoeStep {
  MoeStepKind kind;
  std::string name;  // core's kernel name
  int linear = 0;    // kExpertGemm: 0 fc1, 1 fc2
  int pass = 0;      // kExpertGemm: 0 forward, 1 data gradient, 2 weight gradient
  int expert = 0;    // kExpertGemm: the local expert
  int small = 0;     // kSmallKernel: a MoeSmallSize
};

// The bytes a kSmallKernel step of size `small` moves for `tokens` routed
// tokens, `experts` experts and `local_experts` on the rank (the same bytes
// the analytical model charges).
int64_t MoeSmallKernelBytes(int small, int64_t tokens, int64_t experts, int64_t local_experts);

// The steps of moe_fwd or moe_bwd with `local_experts` experts on the rank
// (each projection's GEMMs one per expert, in expert order); empty for any
// other operator or local_experts < 1.
std::vector<MoeStep> MoeOperatorSteps(const std::string& op, int64_t local_experts);

// The name of a local expert's GEMM: linear 0 fc1, 1 fc2; pass 0 forward, 1
// data gradient, 2 weight gradient (core's names; a static string).
const char* MoeExpertGemmName(int linear, int pass);

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_MOE_PLAN_H_
