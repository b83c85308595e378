#include "core/profile/llama_kernels.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/profile/analytical.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain {
namespace {

using ::testing::ElementsAre;

// Llama 3 8B's layer (h 4096, 32 heads, 8 KV heads, FFN 14336, s 8192) on
// one H100, micro-batch 1.
OperatorKey Llama3Key(OperatorKind op, DType dtype = DType::kBf16, int64_t t = 1,
                      int64_t kv_heads = 8, int64_t seq = 8192) {
  return MakeOperatorKey("h100-sxm5-80gb", dtype, op, 4096, 32, 14336, seq, 1, t, 128256, 0,
                         Architecture::kLlama, kv_heads);
}

std::vector<std::string> Names(const std::vector<KernelRecord>& kernels) {
  std::vector<std::string> names;
  for (const KernelRecord& k : kernels) names.push_back(k.name);
  return names;
}

std::vector<int64_t> Durations(const std::vector<KernelRecord>& kernels) {
  std::vector<int64_t> durations;
  for (const KernelRecord& k : kernels) durations.push_back(k.duration_ns);
  return durations;
}

const KernelRecord& Kernel(const std::vector<KernelRecord>& kernels, const std::string& name) {
  for (const KernelRecord& k : kernels) {
    if (k.name == name) return k;
  }
  ADD_FAILURE() << "no kernel " << name;
  static const KernelRecord kNone;
  return kNone;
}

class LlamaKernelsTest : public ::testing::Test {
 protected:
  std::vector<KernelRecord> Kernels(const OperatorKey& key) {
    return GenerateOperatorKernels(gpu_, key, params_);
  }
  const GpuSpec gpu_ = *GpuByName("h100-sxm5-80gb");
  const AnalyticalParams params_ = DefaultAnalyticalParams();
};

TEST_F(LlamaKernelsTest, AttentionIsRmsNormRotaryFlashAttentionWithoutSoftmaxOrBiases) {
  EXPECT_THAT(Names(Kernels(Llama3Key(OperatorKind::kAttentionFwd))),
              ElementsAre("rmsnorm_fwd", "gemm_qkv_fwd", "rotary_q_fwd", "rotary_k_fwd",
                          "flash_attention_fwd", "gemm_projection_fwd", "residual_add_fwd"));
  EXPECT_THAT(Names(Kernels(Llama3Key(OperatorKind::kAttentionBwd))),
              ElementsAre("gemm_projection_dgrad", "gemm_projection_wgrad",
                          "flash_attention_bwd_preprocess", "flash_attention_bwd",
                          "flash_attention_bwd_dq_convert", "rotary_q_bwd", "rotary_k_bwd",
                          "gemm_qkv_dgrad", "gemm_qkv_wgrad", "rmsnorm_bwd", "residual_add_bwd"));
}

TEST_F(LlamaKernelsTest, MlpIsSwiGluWithFusedGateAndUp) {
  EXPECT_THAT(Names(Kernels(Llama3Key(OperatorKind::kMlpFwd))),
              ElementsAre("rmsnorm_fwd", "gemm_fc1_gate_up_fwd", "swiglu_fwd", "gemm_fc2_fwd",
                          "residual_add_fwd"));
  EXPECT_THAT(Names(Kernels(Llama3Key(OperatorKind::kMlpBwd))),
              ElementsAre("gemm_fc2_dgrad", "gemm_fc2_wgrad", "swiglu_bwd", "gemm_fc1_dgrad",
                          "gemm_fc1_wgrad", "rmsnorm_bwd", "residual_add_bwd"));
}

TEST_F(LlamaKernelsTest, EmbeddingHasNoPositionTableAndLogitUsesRmsNorm) {
  EXPECT_THAT(Names(Kernels(Llama3Key(OperatorKind::kEmbeddingFwd))),
              ElementsAre("vocab_range_mask", "word_embedding_gather"));
  EXPECT_THAT(Names(Kernels(Llama3Key(OperatorKind::kLogitFwd))),
              ElementsAre("final_rmsnorm_fwd", "gemm_logit_fwd"));
  // The loss is the same for both architectures: its key has no arch.
  EXPECT_EQ(Llama3Key(OperatorKind::kLossFwd).arch, Architecture::kGpt);
}

TEST_F(LlamaKernelsTest, FlashAttentionFlopsCountTheCausalHalfAndTheBackwardRecompute) {
  // Forward: QK^T and PV, 4 s^2 d per head, halved by the causal mask:
  // 2 * 8192^2 * 128 * 32 heads = 549,755,813,888.
  EXPECT_DOUBLE_EQ(internal::FlashAttentionForwardFlops(Llama3Key(OperatorKind::kAttentionFwd)),
                   549'755'813'888.0);
  // Backward: recomputed QK^T, dV, dP, dQ and dK, 10 s^2 d halved: 5/2 of it.
  EXPECT_DOUBLE_EQ(internal::FlashAttentionBackwardFlops(Llama3Key(OperatorKind::kAttentionBwd)),
                   2.5 * 549'755'813'888.0);
  // Heads split over t = 4.
  EXPECT_DOUBLE_EQ(internal::FlashAttentionForwardFlops(
                       Llama3Key(OperatorKind::kAttentionFwd, DType::kBf16, /*t=*/4)),
                   549'755'813'888.0 / 4);
}

TEST_F(LlamaKernelsTest, FlashAttentionIsComputeBoundNotQuadraticInMemory) {
  // At s = 8192 the kernel is compute-bound: its time is its FLOPs at its
  // efficiency for 8192 keys of head width 128 plus the GEMM overhead,
  // although the s x s scores (4 GiB in 16 bits over 32 heads) would take
  // far longer to move through HBM.
  const OperatorKey key = Llama3Key(OperatorKind::kAttentionFwd);
  const double at_8k = internal::FlashAttentionEfficiency(8192, 128, /*backward=*/false);
  const double expected = internal::FlashAttentionForwardFlops(key) / (989.4e12 * at_8k) * 1e9 +
                          params_.gemm_overhead_ns;
  EXPECT_NEAR(static_cast<double>(Kernel(Kernels(key), "flash_attention_fwd").duration_ns),
              expected, 1.0);
  // Doubling the sequence doubles the tokens and the per-token work: 4x the
  // FLOPs, run a little more efficiently.
  const OperatorKey key_16k = Llama3Key(OperatorKind::kAttentionFwd, DType::kBf16, 1, 8, 16384);
  const double at_16k =
      static_cast<double>(Kernel(Kernels(key_16k), "flash_attention_fwd").duration_ns);
  const double eff_16k = internal::FlashAttentionEfficiency(16384, 128, false);
  EXPECT_GT(eff_16k, at_8k);
  EXPECT_NEAR(at_16k,
              internal::FlashAttentionForwardFlops(key_16k) / (989.4e12 * eff_16k) * 1e9 +
                  params_.gemm_overhead_ns,
              1.0);
  EXPECT_DOUBLE_EQ(internal::FlashAttentionForwardFlops(key_16k),
                   4 * internal::FlashAttentionForwardFlops(key));
  EXPECT_GT(at_16k / expected, 3.5);
  EXPECT_LT(at_16k / expected, 4.0);
}

TEST_F(LlamaKernelsTest, GroupedQueryAttentionShrinksTheKeyValueProjection) {
  const std::vector<KernelRecord> gqa = Kernels(Llama3Key(OperatorKind::kAttentionFwd));
  const std::vector<KernelRecord> mha =
      Kernels(Llama3Key(OperatorKind::kAttentionFwd, DType::kBf16, 1, /*kv_heads=*/32));
  // QKV width (32 + 2 * 8) * 128 = 6144 against 3 * 4096 = 12288.
  EXPECT_LT(Kernel(gqa, "gemm_qkv_fwd").duration_ns, Kernel(mha, "gemm_qkv_fwd").duration_ns);
  EXPECT_LT(Kernel(gqa, "rotary_k_fwd").duration_ns, Kernel(mha, "rotary_k_fwd").duration_ns);
  // The attention FLOPs depend on the query heads only.
  EXPECT_EQ(Kernel(gqa, "flash_attention_fwd").duration_ns,
            Kernel(mha, "flash_attention_fwd").duration_ns);
}

TEST_F(LlamaKernelsTest, Fp8RunsLinearGemmsAtTheFp8PeakWithCastsAndAttentionInBf16) {
  const std::vector<KernelRecord> bf16 = Kernels(Llama3Key(OperatorKind::kMlpFwd));
  const std::vector<KernelRecord> fp8 = Kernels(Llama3Key(OperatorKind::kMlpFwd, DType::kFp8));
  EXPECT_THAT(Names(fp8), ElementsAre("rmsnorm_fwd", "fp8_cast_transpose", "gemm_fc1_gate_up_fwd",
                                      "swiglu_fwd", "fp8_cast_transpose", "gemm_fc2_fwd",
                                      "residual_add_fwd", "fp8_amax_scale_update"));
  // A large GEMM at twice the peak: about half the time (the fixed GEMM
  // overhead keeps it above exactly half).
  const double ratio = static_cast<double>(Kernel(fp8, "gemm_fc1_gate_up_fwd").duration_ns) /
                       static_cast<double>(Kernel(bf16, "gemm_fc1_gate_up_fwd").duration_ns);
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 0.6);
  // Attention's core stays in bf16.
  EXPECT_EQ(
      Kernel(Kernels(Llama3Key(OperatorKind::kAttentionFwd, DType::kFp8)), "flash_attention_fwd")
          .duration_ns,
      Kernel(Kernels(Llama3Key(OperatorKind::kAttentionFwd)), "flash_attention_fwd").duration_ns);
  // The backward casts the output gradient before both fp8 GEMMs.
  EXPECT_THAT(
      Names(Kernels(Llama3Key(OperatorKind::kMlpBwd, DType::kFp8))),
      ElementsAre("fp8_cast_transpose_grad", "gemm_fc2_dgrad", "gemm_fc2_wgrad", "swiglu_bwd",
                  "fp8_cast_transpose_grad", "gemm_fc1_dgrad", "gemm_fc1_wgrad", "rmsnorm_bwd",
                  "residual_add_bwd", "fp8_amax_scale_update"));
  // The logit layer stays in 16 bits.
  EXPECT_EQ(Durations(Kernels(Llama3Key(OperatorKind::kLogitFwd, DType::kFp8))),
            Durations(Kernels(Llama3Key(OperatorKind::kLogitFwd))));
}

TEST_F(LlamaKernelsTest, GptLayersInFp8CastTheirLinearInputsToo) {
  const OperatorKey key = MakeOperatorKey("h100-sxm5-80gb", DType::kFp8, OperatorKind::kMlpFwd,
                                          4096, 32, 16384, 2048, 1, 1, 50257, 0);
  const std::vector<std::string> names = Names(Kernels(key));
  EXPECT_EQ(std::count(names.begin(), names.end(), "fp8_cast_transpose"), 2);
  EXPECT_EQ(names.back(), "fp8_amax_scale_update");
  // In 16 bits, nothing fp8.
  const std::vector<std::string> fp16 =
      Names(Kernels(MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, OperatorKind::kMlpFwd, 4096, 32,
                                    16384, 2048, 1, 1, 50257, 0)));
  EXPECT_EQ(std::count(fp16.begin(), fp16.end(), "fp8_cast_transpose"), 0);
}

// The fp8 recipes change only the casts, the scale kernels and (blockwise)
// the GEMM rate: current scaling reads each cast input once more for its
// amax; blockwise and MXFP8 write their block scales with the cast and need
// no amax-history update; blockwise GEMMs run at kBlockwiseGemmEfficiency.
TEST_F(LlamaKernelsTest, Fp8RecipesChangeCastsScalesAndTheBlockwiseGemmRate) {
  auto with = [](Fp8Recipe recipe, OperatorKind op = OperatorKind::kMlpFwd) {
    OperatorKey key = Llama3Key(op, DType::kFp8);
    LayerShape shape;
    shape.fp8_recipe = recipe;
    return WithLayerShape(key, shape);
  };
  const std::vector<KernelRecord> delayed = Kernels(with(Fp8Recipe::kDelayed));
  const std::vector<KernelRecord> current = Kernels(with(Fp8Recipe::kCurrent));
  const std::vector<KernelRecord> blockwise = Kernels(with(Fp8Recipe::kBlockwise));
  EXPECT_THAT(Names(current),
              ElementsAre("rmsnorm_fwd", "fp8_amax", "fp8_cast_transpose", "gemm_fc1_gate_up_fwd",
                          "swiglu_fwd", "fp8_amax", "fp8_cast_transpose", "gemm_fc2_fwd",
                          "residual_add_fwd"));
  EXPECT_THAT(Names(blockwise),
              ElementsAre("rmsnorm_fwd", "fp8_cast_transpose", "gemm_fc1_gate_up_fwd", "swiglu_fwd",
                          "fp8_cast_transpose", "gemm_fc2_fwd", "residual_add_fwd"));
  // The amax pass reads the 8,192 x 4,096 16-bit input: 64 MiB at the HBM
  // rate, about a third of the cast, which moves 4 bytes an element.
  const double amax = static_cast<double>(Kernel(current, "fp8_amax").duration_ns);
  const double cast = static_cast<double>(Kernel(delayed, "fp8_cast_transpose").duration_ns);
  EXPECT_GT(amax, 0.3 * cast);
  EXPECT_LT(amax, 0.7 * cast);
  // The blockwise GEMM at 0.9 of the fp8 rate: slower, by at most 1 / 0.9.
  const double fp8_gemm = static_cast<double>(Kernel(delayed, "gemm_fc1_gate_up_fwd").duration_ns);
  const double block_gemm =
      static_cast<double>(Kernel(blockwise, "gemm_fc1_gate_up_fwd").duration_ns);
  EXPECT_GT(block_gemm, fp8_gemm * 1.05);
  EXPECT_LE(block_gemm, fp8_gemm / internal::kBlockwiseGemmEfficiency + 1);
  // Block scales make the cast a little longer (fp32 per 128 both ways).
  EXPECT_GE(Kernel(blockwise, "fp8_cast_transpose").duration_ns,
            Kernel(delayed, "fp8_cast_transpose").duration_ns);
  // The recipe applies to keys with fp8 linear layers only.
  OperatorKey bf16 = Llama3Key(OperatorKind::kMlpFwd);
  LayerShape shape;
  shape.fp8_recipe = Fp8Recipe::kCurrent;
  EXPECT_EQ(WithLayerShape(bf16, shape).fp8_recipe, Fp8Recipe::kDelayed);
  EXPECT_EQ(WithLayerShape(Llama3Key(OperatorKind::kLogitFwd, DType::kFp8), shape).fp8_recipe,
            Fp8Recipe::kDelayed);
}

TEST(Fp8RecipeKeyTest, KeysSayTheRecipeOnlyWhenNotDelayedAndParseBack) {
  OperatorKey key = Llama3Key(OperatorKind::kAttentionBwd, DType::kFp8);
  EXPECT_EQ(key.ToString().find("fp8="), std::string::npos);
  LayerShape shape;
  shape.fp8_recipe = Fp8Recipe::kBlockwise;
  key = WithLayerShape(key, shape);
  const std::string text = key.ToString();
  EXPECT_NE(text.find(" fp8=blockwise"), std::string::npos);
  absl::StatusOr<OperatorKey> parsed = ParseOperatorKey(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, key);
  EXPECT_FALSE(ParseOperatorKey("h100-sxm5-80gb/bf16/mlp_fwd arch=llama h=4096 f=14336 s=8192 "
                                "b=1 t=1 fp8=current")
                   .ok());
  EXPECT_FALSE(ParseOperatorKey("h100-sxm5-80gb/fp8/mlp_fwd arch=llama h=4096 f=14336 s=8192 "
                                "b=1 t=1 fp8=delayed")
                   .ok());
  EXPECT_FALSE(ParseOperatorKey("h100-sxm5-80gb/fp8/logit_fwd arch=llama h=4096 s=8192 b=1 t=1 "
                                "v=128256 fp8=mxfp8")
                   .ok());
}

}  // namespace
}  // namespace vtrain
