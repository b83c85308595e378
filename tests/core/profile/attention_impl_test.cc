// The attention core as its own choice (model.attention_impl): flash and
// unfused kernels for both architectures, FlashAttention's efficiency
// curve, operator keys that keep their meaning, memory and validation.
#include <string>
#include <vector>

#include "core/predict/memory.h"
#include "core/predict/predictor.h"
#include "core/profile/analytical.h"
#include "core/profile/default_profiles.h"
#include "core/profile/llama_kernels.h"
#include "core/spec/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> KernelNames(const std::vector<KernelRecord>& kernels) {
  std::vector<std::string> names;
  for (const KernelRecord& k : kernels) names.push_back(k.name);
  return names;
}

int64_t TotalNs(const std::vector<KernelRecord>& kernels) {
  int64_t ns = 0;
  for (const KernelRecord& k : kernels) ns += k.duration_ns;
  return ns;
}

// A 1.65B GPT layer (h 2304, 24 heads of 128) at sequence 4096 on an H100.
OperatorKey GptKey(OperatorKind op, AttentionImpl impl) {
  LayerShape shape;
  shape.attention_impl = impl;
  return WithLayerShape(MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, op, 2304, 24, 9216, 4096, 1,
                                        1, 50257, 0, Architecture::kGpt),
                        shape);
}

class AttentionImplTest : public ::testing::Test {
 protected:
  std::vector<KernelRecord> Kernels(const OperatorKey& key) {
    return GenerateOperatorKernels(gpu_, key, params_);
  }
  const GpuSpec gpu_ = *GpuByName("h100-sxm5-80gb");
  const AnalyticalParams params_ = DefaultAnalyticalParams();
};

TEST_F(AttentionImplTest, GptFlashRunsOneFusedKernelInsteadOfTheScoreKernels) {
  EXPECT_THAT(KernelNames(Kernels(GptKey(OperatorKind::kAttentionFwd, AttentionImpl::kFlash))),
              ElementsAre("layernorm_fwd", "gemm_qkv_fwd", "flash_attention_fwd",
                          "gemm_projection_fwd", "bias_dropout_add_fwd"));
  EXPECT_THAT(KernelNames(Kernels(GptKey(OperatorKind::kAttentionFwd, AttentionImpl::kUnfused))),
              ElementsAre("layernorm_fwd", "gemm_qkv_fwd", "bgemm_attention_scores_fwd",
                          "scaled_masked_softmax_fwd", "attention_dropout_fwd",
                          "bgemm_attention_context_fwd", "context_transpose_copy",
                          "gemm_projection_fwd", "bias_dropout_add_fwd"));
  EXPECT_THAT(KernelNames(Kernels(GptKey(OperatorKind::kAttentionBwd, AttentionImpl::kFlash))),
              ElementsAre("bias_dropout_add_bwd", "gemm_projection_dgrad", "gemm_projection_wgrad",
                          "flash_attention_bwd_preprocess", "flash_attention_bwd",
                          "flash_attention_bwd_dq_convert", "gemm_qkv_dgrad", "gemm_qkv_wgrad",
                          "bias_grad_reduce", "layernorm_bwd", "residual_add_bwd"));
  // At s = 4096 the unfused core moves 24 heads x 4096^2 scores through HBM
  // several times each way; flash does not.
  for (OperatorKind op : {OperatorKind::kAttentionFwd, OperatorKind::kAttentionBwd}) {
    const int64_t flash = TotalNs(Kernels(GptKey(op, AttentionImpl::kFlash)));
    const int64_t unfused = TotalNs(Kernels(GptKey(op, AttentionImpl::kUnfused)));
    EXPECT_LT(flash, unfused) << OperatorKindName(op);
  }
  // The MLP does not depend on it.
  EXPECT_EQ(TotalNs(Kernels(GptKey(OperatorKind::kMlpFwd, AttentionImpl::kFlash))),
            TotalNs(Kernels(GptKey(OperatorKind::kMlpFwd, AttentionImpl::kUnfused))));
}

TEST_F(AttentionImplTest, LlamaUnfusedRepeatsGroupedKeysAndKeepsNoDropout) {
  LayerShape shape;
  shape.attention_impl = AttentionImpl::kUnfused;
  const OperatorKey fwd = WithLayerShape(
      MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, OperatorKind::kAttentionFwd, 4096, 32, 14336,
                      8192, 1, 1, 128256, 0, Architecture::kLlama, 8),
      shape);
  EXPECT_THAT(KernelNames(Kernels(fwd)),
              ElementsAre("rmsnorm_fwd", "gemm_qkv_fwd", "rotary_q_fwd", "rotary_k_fwd",
                          "gqa_kv_repeat", "bgemm_attention_scores_fwd",
                          "scaled_masked_softmax_fwd", "bgemm_attention_context_fwd",
                          "context_transpose_copy", "gemm_projection_fwd", "residual_add_fwd"));
  OperatorKey bwd = fwd;
  bwd.op = OperatorKind::kAttentionBwd;
  const std::vector<std::string> names = KernelNames(Kernels(bwd));
  EXPECT_THAT(names, ::testing::Contains("gqa_kv_grad_reduce"));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("attention_dropout_bwd")));
  // Multi-head attention needs no repeat.
  OperatorKey mha = fwd;
  mha.kv_heads = 32;
  EXPECT_THAT(KernelNames(Kernels(mha)), ::testing::Not(::testing::Contains("gqa_kv_repeat")));
}

TEST(FlashAttentionEfficiencyTest, FollowsKeyLengthAndHeadWidthAroundItsAnchor) {
  using internal::FlashAttentionEfficiency;
  EXPECT_DOUBLE_EQ(FlashAttentionEfficiency(4096, 128, false), 0.60);
  EXPECT_DOUBLE_EQ(FlashAttentionEfficiency(4096, 128, true), 0.45);
  // n = keys / 128 blocks, efficiency as n / (n + 4): at 512 keys 4/8
  // against 32/36 at 4096, 0.5625 of it.
  EXPECT_DOUBLE_EQ(FlashAttentionEfficiency(512, 128, false), 0.60 * 0.5625);
  double last = 0;
  for (double keys : {256.0, 1024.0, 2048.0, 8192.0, 32768.0, 131072.0}) {
    const double e = FlashAttentionEfficiency(keys, 128, false);
    EXPECT_GT(e, last) << keys;
    last = e;
  }
  EXPECT_LT(last, 0.60 * 36.0 / 32.0);  // bounded by n / (n + 4) < 1
  // Head width: 1.25 d / (d + 32), 0.8333 at 64, capped at 1.1.
  EXPECT_NEAR(FlashAttentionEfficiency(4096, 64, false), 0.60 * 1.25 * 64 / 96, 1e-12);
  EXPECT_DOUBLE_EQ(FlashAttentionEfficiency(4096, 1024, false), 0.60 * 1.1);
}

TEST(FlashAttentionEfficiencyTest, ContextParallelismShortensEachRingStep) {
  LayerShape shape;
  OperatorKey key = MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, OperatorKind::kAttentionFwd,
                                    4096, 32, 0, 65536, 1, 1, 0, 0, Architecture::kLlama, 8);
  const double whole = internal::FlashAttentionEfficiency(key, 128, false);
  key = WithParallelSplits(key, false, 8, false);
  EXPECT_DOUBLE_EQ(internal::FlashAttentionEfficiency(key, 128, false),
                   internal::FlashAttentionEfficiency(8192, 128, false));
  EXPECT_LT(internal::FlashAttentionEfficiency(key, 128, false), whole);
}

TEST(AttentionImplKeyTest, TextNamesOnlyTheNonDefaultCoreAndRoundTrips) {
  const OperatorKey gpt_unfused = GptKey(OperatorKind::kAttentionFwd, AttentionImpl::kUnfused);
  const OperatorKey gpt_flash = GptKey(OperatorKind::kAttentionFwd, AttentionImpl::kFlash);
  // A GPT key written before the choice existed meant the unfused core.
  EXPECT_THAT(gpt_unfused.ToString(), ::testing::Not(HasSubstr("attn=")));
  EXPECT_THAT(gpt_flash.ToString(), HasSubstr(" attn=flash"));
  EXPECT_NE(gpt_flash, gpt_unfused);
  for (const OperatorKey& key : {gpt_unfused, gpt_flash}) {
    absl::StatusOr<OperatorKey> parsed = ParseOperatorKey(key.ToString());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, key);
  }
  LayerShape unfused;
  unfused.attention_impl = AttentionImpl::kUnfused;
  const OperatorKey llama =
      WithLayerShape(MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, OperatorKind::kAttentionBwd,
                                     4096, 32, 0, 8192, 1, 1, 0, 0, Architecture::kLlama, 8),
                     unfused);
  EXPECT_THAT(llama.ToString(), HasSubstr(" attn=unfused"));
  EXPECT_EQ(*ParseOperatorKey(llama.ToString()), llama);
  // Only attention keys take it; other keys are left as they are.
  const OperatorKey mlp =
      WithLayerShape(MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, OperatorKind::kMlpFwd, 4096, 0,
                                     14336, 8192, 1, 1, 0, 0, Architecture::kLlama),
                     unfused);
  EXPECT_THAT(mlp.ToString(), ::testing::Not(HasSubstr("attn=")));
  EXPECT_THAT(ParseOperatorKey("h100-sxm5-80gb/bf16/mlp_fwd h=4096 f=8 s=8 b=1 t=1 attn=flash")
                  .status()
                  .message(),
              HasSubstr("attention_fwd and attention_bwd only"));
  EXPECT_THAT(
      ParseOperatorKey("h100-sxm5-80gb/bf16/attention_fwd h=4096 a=32 s=8 b=1 t=1 attn=fused")
          .status()
          .message(),
      HasSubstr("attn=flash or unfused"));
}

TEST(AttentionImplJobTest, FlashIsTheDefaultAndFasterOnAGptJob) {
  Job job = testing::PresetJob("gpt3-1.3b", 1, 1, 1, 1, 8);
  job.model.seq_len = 4096;
  EXPECT_EQ(job.model.attention_impl, AttentionImpl::kFlash);
  const ProfileSet profiles = DefaultProfileSet(job.cluster.gpu);
  absl::StatusOr<Prediction> flash = Predict(job, profiles);
  ASSERT_TRUE(flash.ok()) << flash.status();
  job.model.attention_impl = AttentionImpl::kUnfused;
  absl::StatusOr<Prediction> unfused = Predict(job, profiles);
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  EXPECT_LT(flash->iteration_time_ns, unfused->iteration_time_ns);
  // Model FLOPs do not depend on how attention runs.
  EXPECT_DOUBLE_EQ(flash->model_flops, unfused->model_flops);
}

TEST(AttentionImplJobTest, MlaRefusesTheUnfusedCoreNamingTheField) {
  Job job = testing::PresetJob("deepseek-v3", 1, 1, 1, 1, 8);
  job.model.attention_impl = AttentionImpl::kUnfused;
  const absl::Status s = ValidateJob(job);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("model.attention_impl=unfused"));
}

TEST(AttentionImplJobTest, ParsesItsNamesAndNamesTheFieldOtherwise) {
  EXPECT_EQ(*ParseAttentionImpl("flash"), AttentionImpl::kFlash);
  EXPECT_EQ(*ParseAttentionImpl("unfused"), AttentionImpl::kUnfused);
  EXPECT_THAT(ParseAttentionImpl("sdpa").status().message(), HasSubstr("model.attention_impl"));
  EXPECT_EQ(AttentionImplName(AttentionImpl::kUnfused), "unfused");
}

}  // namespace
}  // namespace vtrain
