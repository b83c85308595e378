#include "profiler_agent/gpu/moe_plan.h"

#include <algorithm>

namespace vtrain::gpu {

const char* MoeExpertGemmName(int linear, int pass) {
  static const char* const kNames[2][3] = {
      {"grouped_gemm_fc1_fwd", "grouped_gemm_fc1_dgrad", "grouped_gemm_fc1_wgrad"},
      {"grouped_gemm_fc2_fwd", "grouped_gemm_fc2_dgrad", "grouped_gemm_fc2_wgrad"}};
  return kNames[linear][pass];
}

namespace {

// One projection's GEMMs of one pass, one per local expert.
void ExpertGemms(std::vector<MoeStep>& steps, int linear, int pass, int64_t local_experts) {
  for (int64_t e = 0; e < local_experts; ++e) {
    steps.push_back({MoeStepKind::kExpertGemm, MoeExpertGemmName(linear, pass), linear, pass,
                     static_cast<int>(e)});
  }
}

void Small(std::vector<MoeStep>& steps, const char* name, int size, int count) {
  for (int i = 0; i < count; ++i) steps.push_back({MoeStepKind::kSmallKernel, name, 0, 0, 0, size});
}

}  // namespace

int64_t MoeSmallKernelBytes(int small, int64_t tokens, int64_t experts, int64_t local_experts) {
  switch (small) {
    case kSmallCounts:
      return experts * 8 * std::max<int64_t>(1, local_experts);
    case kSmallRoutingMap:
      return tokens * experts;
    case kSmallProbs:
      return tokens * experts * 4;
    default:
      return tokens * experts * 6;
  }
}

std::vector<MoeStep> MoeOperatorSteps(const std::string& op, int64_t local_experts) {
  std::vector<MoeStep> s;
  if (local_experts < 1) return s;
  if (op == "moe_fwd") {
    s.push_back({MoeStepKind::kRmsNormFwd, "rmsnorm_fwd"});
    s.push_back({MoeStepKind::kRouterGemmFwd, "gemm_router_fwd"});
    s.push_back({MoeStepKind::kRouterTopkFwd, "router_topk_fwd"});
    Small(s, "router_aux_loss_fwd", kSmallProbs, 1);
    Small(s, "router_aux_loss_fwd", kSmallCounts, 5);
    Small(s, "moe_dispatch_preprocess", kSmallCounts, 8);
    Small(s, "moe_permute_row_map_fwd", kSmallRoutingMap, 3);
    s.push_back({MoeStepKind::kPermuteFwd, "moe_permute_fwd"});
    ExpertGemms(s, 0, 0, local_experts);
    s.push_back({MoeStepKind::kSwigluFwd, "swiglu_fwd"});
    ExpertGemms(s, 1, 0, local_experts);
    s.push_back({MoeStepKind::kUnpermuteFwd, "moe_unpermute_fwd"});
    s.push_back({MoeStepKind::kResidualAddFwd, "residual_add_fwd"});
  } else if (op == "moe_bwd") {
    s.push_back({MoeStepKind::kUnpermuteBwd, "moe_unpermute_bwd"});
    ExpertGemms(s, 1, 1, local_experts);
    ExpertGemms(s, 1, 2, local_experts);
    s.push_back({MoeStepKind::kSwigluBwd, "swiglu_bwd"});
    ExpertGemms(s, 0, 1, local_experts);
    ExpertGemms(s, 0, 2, local_experts);
    s.push_back({MoeStepKind::kPermuteBwd, "moe_permute_bwd"});
    s.push_back({MoeStepKind::kRouterTopkBwd, "router_topk_bwd"});
    Small(s, "router_aux_loss_bwd", kSmallProbs, 1);
    Small(s, "router_aux_loss_bwd", kSmallCounts, 4);
    Small(s, "router_fp32_cast_bwd", kSmallProbsCast, 4);
    Small(s, "router_probs_grad_bwd", kSmallProbs, 2);
    s.push_back({MoeStepKind::kRouterGemmDgrad, "gemm_router_dgrad"});
    s.push_back({MoeStepKind::kRouterGemmWgrad, "gemm_router_wgrad"});
    s.push_back({MoeStepKind::kRmsNormBwd, "rmsnorm_bwd"});
    s.push_back({MoeStepKind::kResidualAddBwd, "residual_add_bwd"});
  }
  return s;
}

}  // namespace vtrain::gpu
