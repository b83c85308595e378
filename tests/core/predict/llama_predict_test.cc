// Predictions for Llama-architecture models, fp8 and the Hopper GPUs.
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::vtrain::testing::StatusIs;
using ::vtrain::testing::TinyJob;
using ::vtrain::testing::WithPlan;

Job LlamaJob(const char* preset, const char* gpu, int64_t t, int64_t d, int64_t p,
             int64_t micro_batch, int64_t global_batch, DType dtype = DType::kBf16) {
  Job job;
  job.model = *ModelPreset(preset);
  job.cluster = DefaultCluster(*GpuByName(gpu), t * d * p);
  job = WithPlan(job, t, d, p, micro_batch, global_batch);
  job.plan.dtype = dtype;
  job.plan.recompute = Recompute::kNone;
  return job;
}

absl::StatusOr<Prediction> PredictAt(const Job& job, Granularity granularity) {
  PredictOptions options;
  options.granularity = granularity;
  return Predict(job, DefaultProfileSet(job.cluster.gpu), options);
}

TEST(LlamaFlopsTest, ModelFlopsFollowMegatronsCount) {
  // Llama 3 8B, one sequence of 8192 tokens, t = 1 (vocabulary 128256
  // unpadded at t = 1). Per token and layer: 4h^2 + 4h * kv_dim + 4sh + 6hf
  // = 67,108,864 + 16,777,216 + 134,217,728 + 352,321,536 = 570,425,344;
  // logit 2hV = 1,050,673,152; 3 * 8192 * (32 * 570,425,344 + 1,050,673,152)
  // = 474,422,087,516,160, which is Megatron-LM's
  // num_floating_point_operations: 12 b s L h^2 ((1 + g/a + s/h) + 3/2 f/h
  // + V / (2 L h)) with b = 1, g/a = 1/4.
  const Job job = LlamaJob("llama3-8b", "h100-sxm5-80gb", 1, 1, 1, 1, 1);
  EXPECT_DOUBLE_EQ(ModelFlopsPerIteration(job), 474'422'087'516'160.0);
  // With t = 8 the logit layer counts the padded 129,024 words.
  const Job t8 = LlamaJob("llama3-8b", "h100-sxm5-80gb", 8, 1, 1, 1, 1);
  EXPECT_DOUBLE_EQ(ModelFlopsPerIteration(t8) - ModelFlopsPerIteration(job),
                   3.0 * 8192 * 2 * 4096 * (129024 - 128256));
}

TEST(LlamaPredictTest, KernelAndOperatorGranularityAgreeExactly) {
  // A small Llama with grouped-query attention, in bf16 and in fp8, over
  // t, p and d: the operator fast path stays exact.
  for (DType dtype : {DType::kBf16, DType::kFp8}) {
    for (int64_t t : {1, 2}) {
      Job job = WithPlan(TinyJob(), t, 2, 2, 1, 8);
      job.model.arch = Architecture::kLlama;
      job.model.num_kv_heads = 2;
      job.cluster.gpu = *GpuByName("h100-sxm5-80gb");
      job.plan.dtype = dtype;
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " t=", t));
      VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction kernel, PredictAt(job, Granularity::kKernel));
      VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction op, PredictAt(job, Granularity::kOperator));
      EXPECT_GT(kernel.iteration_time_ns, 0);
      EXPECT_EQ(kernel.iteration_time_ns, op.iteration_time_ns);
    }
  }
}

TEST(LlamaPredictTest, UntiedEmbeddingsPutTheOutputLayerOnTheLastStage) {
  const Job job = LlamaJob("llama3-8b", "h100-sxm5-80gb", 2, 1, 4, 1, 8);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p, PredictAt(job, Granularity::kOperator));
  ASSERT_EQ(p.stages.size(), 4u);
  // 8 layers of 218,112,000 / 2 per stage; 128256 words / 2 = 64,128 rows
  // of 4096 on the first (input) and last (output, plus the final norm).
  const double layers = 8 * 218'112'000.0 / 2;
  EXPECT_DOUBLE_EQ(p.stages[0].parameters_per_gpu, layers + 64'128.0 * 4096);
  EXPECT_DOUBLE_EQ(p.stages[1].parameters_per_gpu, layers);
  EXPECT_DOUBLE_EQ(p.stages[3].parameters_per_gpu, layers + 64'128.0 * 4096 + 4096);
  EXPECT_DOUBLE_EQ(p.memory.stages[3].parameters, p.stages[3].parameters_per_gpu);
}

TEST(LlamaPredictTest, Fp8IsFasterThanBf16OnH100AndRefusedOnA100) {
  const Job bf16 = LlamaJob("llama3-8b", "h100-sxm5-80gb", 2, 4, 1, 1, 32);
  const Job fp8 = LlamaJob("llama3-8b", "h100-sxm5-80gb", 2, 4, 1, 1, 32, DType::kFp8);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction b, PredictAt(bf16, Granularity::kOperator));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction f, PredictAt(fp8, Granularity::kOperator));
  EXPECT_LT(f.iteration_time_ns, b.iteration_time_ns);
  // Attention, norms and communication stay: far from twice as fast.
  EXPECT_GT(f.iteration_time_ns, b.iteration_time_ns / 2);
  Job a100 = fp8;
  a100.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 8);
  EXPECT_THAT(PredictAt(a100, Granularity::kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("plan.dtype=fp8 is not supported by GPU 'a100-sxm4-80gb'")));
}

TEST(LlamaPredictTest, H200IsNotSlowerThanH100) {
  const Job h100 = LlamaJob("llama3-8b", "h100-sxm5-80gb", 1, 8, 1, 1, 64);
  const Job h200 = LlamaJob("llama3-8b", "h200-sxm-141gb", 1, 8, 1, 1, 64);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction a, PredictAt(h100, Granularity::kOperator));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction b, PredictAt(h200, Granularity::kOperator));
  EXPECT_LE(b.iteration_time_ns, a.iteration_time_ns);
}

TEST(UncalibratedGpuTest, IntervalIsWiderAndLabelled) {
  // The A100-40GB has no calibration of its own: the 80GB one's, widened.
  const Job a100 = LlamaJob("llama3-8b", "a100-sxm4-80gb", 1, 8, 1, 1, 64);
  const Job h100 = LlamaJob("llama3-8b", "a100-sxm4-40gb", 1, 8, 1, 1, 64);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction a, PredictAt(a100, Granularity::kOperator));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction h, PredictAt(h100, Granularity::kOperator));
  EXPECT_EQ(a.regime, RegimeOf(a100));
  EXPECT_EQ(h.regime, absl::StrCat("uncalibrated_gpu/", RegimeOf(h100)));
  auto relative_width = [](const Prediction& p) {
    return (p.interval_high_ns - p.interval_low_ns) / static_cast<double>(p.iteration_time_ns);
  };
  EXPECT_GT(relative_width(a), 0);
  EXPECT_GT(relative_width(h), 1.5 * relative_width(a));
  EXPECT_LT(h.interval_low_ns, h.iteration_time_ns);
  EXPECT_GT(h.interval_high_ns, h.iteration_time_ns);
}

TEST(PublishedRunsGpuTest, Fp8JobsOnHopperAndBlackwellUseTheirPublishedRunsBands) {
  // The H100 and B200 sets refit their GEMM efficiency on published fp8 runs
  // of their GPU: fp8 jobs get those runs' bands; the B200's bf16 jobs on one
  // node the bands of its errors on SimuMax's measured bf16 runs; other bf16
  // jobs the A100's, widened. The H200 carries the H100's fit and fp8 bands
  // over.
  struct Case {
    const char* gpu;
    const char* fp8_prefix;
    const char* bf16_prefix;
  };
  for (const Case& c : {Case{"h100-sxm5-80gb", "published_fp8_runs/", "uncalibrated_gpu/"},
                        Case{"b200-sxm-180gb", "published_fp8_runs/", "published_bf16_runs/"},
                        Case{"h200-sxm-141gb", "published_fp8_runs/", "uncalibrated_gpu/"}}) {
    const char* gpu = c.gpu;
    for (const DType dtype : {DType::kFp8, DType::kBf16}) {
      Job job = LlamaJob("llama3-8b", gpu, 1, 8, 1, 1, 64);
      job.plan.dtype = dtype;
      VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p, PredictAt(job, Granularity::kOperator));
      const char* prefix = dtype == DType::kFp8 ? c.fp8_prefix : c.bf16_prefix;
      EXPECT_TRUE(absl::StartsWith(p.regime, prefix)) << gpu << ": " << p.regime;
      EXPECT_LT(p.interval_low_ns, p.iteration_time_ns) << gpu;
      EXPECT_GT(p.interval_high_ns, p.iteration_time_ns) << gpu;
    }
  }
  // The refitted GEMM efficiency is the GPU's own; the H200 takes the H100's.
  const ProfileSet a100 = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  const ProfileSet h100 = DefaultProfileSet(*GpuByName("h100-sxm5-80gb"));
  const ProfileSet h200 = DefaultProfileSet(*GpuByName("h200-sxm-141gb"));
  const ProfileSet b200 = DefaultProfileSet(*GpuByName("b200-sxm-180gb"));
  EXPECT_LT(h100.params.gemm_max_efficiency, a100.params.gemm_max_efficiency);
  EXPECT_EQ(h200.params.gemm_max_efficiency, h100.params.gemm_max_efficiency);
  EXPECT_NE(b200.params.gemm_max_efficiency, h100.params.gemm_max_efficiency);
  EXPECT_EQ(h100.params.host_dispatch_ns, a100.params.host_dispatch_ns);  // the rest carried
  EXPECT_NE(h100.provenance.find("published"), std::string::npos);
  // The B200's bf16 bands are single-node only: a bf16 job on 4 nodes keeps
  // the widened A100 band; an fp16 job on one node too.
  Job multi = LlamaJob("llama3-8b", "b200-sxm-180gb", 1, 32, 1, 1, 64);
  multi.plan.dtype = DType::kBf16;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction m, PredictAt(multi, Granularity::kOperator));
  EXPECT_TRUE(absl::StartsWith(m.regime, "uncalibrated_gpu/")) << m.regime;
  Job fp16 = LlamaJob("llama3-8b", "b200-sxm-180gb", 1, 8, 1, 1, 64);
  fp16.plan.dtype = DType::kFp16;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction f, PredictAt(fp16, Granularity::kOperator));
  EXPECT_TRUE(absl::StartsWith(f.regime, "uncalibrated_gpu/")) << f.regime;
  EXPECT_NE(b200.provenance.find("simumax-b200-bf16.csv"), std::string::npos);
}

}  // namespace
}  // namespace vtrain
