#include "profiler_agent/gpu/llama_plan.h"

#include <string>
#include <vector>

namespace vtrain::gpu {
namespace {

// The GEMM names of each linear layer: forward, data gradient, weight
// gradient (core/profile/llama_kernels.cc).
struct LinearNames {
  const char* fwd;
  const char* dgrad;
  const char* wgrad;
};
constexpr LinearNames kLinearNames[] = {
    {"gemm_qkv_fwd", "gemm_qkv_dgrad", "gemm_qkv_wgrad"},
    {"gemm_projection_fwd", "gemm_projection_dgrad", "gemm_projection_wgrad"},
    {"gemm_fc1_gate_up_fwd", "gemm_fc1_dgrad", "gemm_fc1_wgrad"},
    {"gemm_fc2_fwd", "gemm_fc2_dgrad", "gemm_fc2_wgrad"},
    {"gemm_logit_fwd", "gemm_logit_dgrad", "gemm_logit_wgrad"},
};

class Plan {
 public:
  explicit Plan(bool fp8) : fp8_(fp8) {}

  void Add(StepKind kind, int index, const char* name) { steps_.push_back({kind, index, name}); }

  // core's LinearForward: with fp8, the input's cast-transpose first.
  void LinearFwd(Linear l) {
    if (fp8_) Add(StepKind::kCastTranspose, l, "fp8_cast_transpose");
    Add(StepKind::kGemmFwd, l, kLinearNames[l].fwd);
  }
  // core's LinearBackward: with fp8, the output gradient's cast-transpose.
  void LinearBwd(Linear l) {
    if (fp8_) Add(StepKind::kCastTransposeGrad, l, "fp8_cast_transpose_grad");
    Add(StepKind::kGemmDgrad, l, kLinearNames[l].dgrad);
    Add(StepKind::kGemmWgrad, l, kLinearNames[l].wgrad);
  }
  void ScaleUpdate(Module m) {
    if (fp8_) Add(StepKind::kFp8AmaxScaleUpdate, m, "fp8_amax_scale_update");
  }

  std::vector<Step> Take() { return std::move(steps_); }

 private:
  bool fp8_;
  std::vector<Step> steps_;
};

}  // namespace

std::vector<Step> LlamaOperatorSteps(const std::string& op, bool fp8) {
  Plan p(fp8);
  if (op == "embedding_fwd") {
    p.Add(StepKind::kVocabRangeMask, 0, "vocab_range_mask");
    p.Add(StepKind::kWordEmbeddingGather, 0, "word_embedding_gather");
  } else if (op == "embedding_bwd") {
    p.Add(StepKind::kWordEmbeddingDenseBwd, 0, "word_embedding_dense_bwd");
    p.Add(StepKind::kWordEmbeddingGradAccumulate, 0, "word_embedding_grad_accumulate");
  } else if (op == "attention_fwd") {
    p.Add(StepKind::kRmsNormFwd, kNormAttention, "rmsnorm_fwd");
    p.LinearFwd(kLinearQkv);
    p.Add(StepKind::kRotaryQFwd, 0, "rotary_q_fwd");
    p.Add(StepKind::kRotaryKFwd, 0, "rotary_k_fwd");
    p.Add(StepKind::kFlashAttentionFwd, 0, "flash_attention_fwd");
    p.LinearFwd(kLinearProjection);
    p.Add(StepKind::kResidualAddFwd, kModuleAttention, "residual_add_fwd");
    p.ScaleUpdate(kModuleAttention);
  } else if (op == "attention_bwd") {
    p.LinearBwd(kLinearProjection);
    p.Add(StepKind::kFlashAttentionBwdPreprocess, 0, "flash_attention_bwd_preprocess");
    p.Add(StepKind::kFlashAttentionBwd, 0, "flash_attention_bwd");
    p.Add(StepKind::kFlashAttentionBwdDqConvert, 0, "flash_attention_bwd_dq_convert");
    p.Add(StepKind::kRotaryQBwd, 0, "rotary_q_bwd");
    p.Add(StepKind::kRotaryKBwd, 0, "rotary_k_bwd");
    p.LinearBwd(kLinearQkv);
    p.Add(StepKind::kRmsNormBwd, kNormAttention, "rmsnorm_bwd");
    p.Add(StepKind::kResidualAddBwd, kModuleAttention, "residual_add_bwd");
    p.ScaleUpdate(kModuleAttention);
  } else if (op == "mlp_fwd") {
    p.Add(StepKind::kRmsNormFwd, kNormMlp, "rmsnorm_fwd");
    p.LinearFwd(kLinearFc1);
    p.Add(StepKind::kSwigluFwd, 0, "swiglu_fwd");
    p.LinearFwd(kLinearFc2);
    p.Add(StepKind::kResidualAddFwd, kModuleMlp, "residual_add_fwd");
    p.ScaleUpdate(kModuleMlp);
  } else if (op == "mlp_bwd") {
    p.LinearBwd(kLinearFc2);
    p.Add(StepKind::kSwigluBwd, 0, "swiglu_bwd");
    p.LinearBwd(kLinearFc1);
    p.Add(StepKind::kRmsNormBwd, kNormMlp, "rmsnorm_bwd");
    p.Add(StepKind::kResidualAddBwd, kModuleMlp, "residual_add_bwd");
    p.ScaleUpdate(kModuleMlp);
  } else if (op == "logit_fwd") {
    // The output layer stays in 16 bits under fp8 (as in core).
    p.Add(StepKind::kRmsNormFwd, kNormFinal, "final_rmsnorm_fwd");
    p.Add(StepKind::kGemmFwd, kLinearLogit, kLinearNames[kLinearLogit].fwd);
  } else if (op == "logit_bwd") {
    p.Add(StepKind::kGemmDgrad, kLinearLogit, kLinearNames[kLinearLogit].dgrad);
    p.Add(StepKind::kGemmWgrad, kLinearLogit, kLinearNames[kLinearLogit].wgrad);
    p.Add(StepKind::kRmsNormBwd, kNormFinal, "final_rmsnorm_bwd");
  }
  return p.Take();
}

const char* LinearGemmName(int linear, int pass) {
  const LinearNames& n = kLinearNames[linear];
  return pass == 0 ? n.fwd : pass == 1 ? n.dgrad : n.wgrad;
}

}  // namespace vtrain::gpu
