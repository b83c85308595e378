// Training settings (core/spec/settings.h): what each base fills, that
// given values always win, that a base never makes a valid plan invalid, and
// that the report names exactly what a job changed.
#include "core/spec/settings.h"

#include <string>
#include <vector>

#include "core/predict/memory.h"
#include "core/spec/job.h"
#include "core/spec/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

GpuSpec Gpu(const char* name) { return *GpuByName(name); }

Job PresetJob(const char* preset, int64_t t, int64_t p, int64_t d, int64_t ep = 1) {
  Job job;
  job.model = *ModelPreset(preset);
  job.cluster = DefaultCluster(Gpu("h100-sxm5-80gb"), t * p * d);
  job.plan.tensor_parallel = t;
  job.plan.pipeline_parallel = p;
  job.plan.data_parallel = d;
  job.plan.expert_parallel = ep;
  job.plan.global_batch = 8 * p * d;
  return job;
}

TEST(SettingsTest, TunedIsTheRecipesMegatronCoreRun) {
  const TrainingSettings s =
      SettingsFor(SettingsBase::kTuned, *ModelPreset("llama3-70b"), Gpu("h100-sxm5-80gb"));
  EXPECT_EQ(s.dtype, DType::kBf16);
  EXPECT_EQ(s.recompute, Recompute::kNone);
  EXPECT_TRUE(s.sequence_parallel);
  EXPECT_EQ(s.sharding, DataParallelSharding::kOptimizer);
  EXPECT_TRUE(s.gradient_bucketing && s.param_gather_overlap && s.tp_comm_overlap);
  EXPECT_EQ(s.attention_impl, AttentionImpl::kFlash);
  // A GPU without bf16 tensor cores trains in fp16.
  EXPECT_EQ(
      SettingsFor(SettingsBase::kTuned, *ModelPreset("gpt3-1.3b"), Gpu("v100-sxm2-32gb")).dtype,
      DType::kFp16);
}

TEST(SettingsTest, MegatronDefaultsTurnEverythingOffAndThePaperIsItsA100Run) {
  const ModelSpec m = *ModelPreset("gpt3-175b");
  const TrainingSettings mlm =
      SettingsFor(SettingsBase::kMegatronDefaults, m, Gpu("a100-sxm4-80gb"));
  EXPECT_EQ(mlm.recompute, Recompute::kNone);
  EXPECT_FALSE(mlm.sequence_parallel || mlm.gradient_bucketing || mlm.param_gather_overlap ||
               mlm.tp_comm_overlap);
  EXPECT_EQ(mlm.sharding, DataParallelSharding::kNone);
  const TrainingSettings paper = SettingsFor(SettingsBase::kPaper, m, Gpu("a100-sxm4-80gb"));
  EXPECT_EQ(paper.dtype, DType::kFp16);
  EXPECT_EQ(paper.recompute, Recompute::kFull);
  EXPECT_EQ(paper.attention_impl, AttentionImpl::kUnfused);
  EXPECT_FALSE(paper.sequence_parallel || paper.gradient_bucketing);
}

TEST(SettingsTest, MoePresetsCarryTheirRecipes) {
  const GpuSpec h100 = Gpu("h100-sxm5-80gb");
  const TrainingSettings ds = SettingsFor(SettingsBase::kTuned, *ModelPreset("deepseek-v3"), h100);
  EXPECT_EQ(ds.dispatcher, MoeDispatcher::kHybridEp);  // flex with the HybridEP backend
  EXPECT_EQ(ds.recompute, Recompute::kSelective);
  EXPECT_EQ(ds.recompute_modules, kRecomputeMlp | kRecomputeMlaUpProj);
  EXPECT_FALSE(ds.gradient_bucketing);  // the recipe's overlap_grad_reduce=False
  const TrainingSettings qwen =
      SettingsFor(SettingsBase::kTuned, *ModelPreset("qwen3-235b-a22b"), h100);
  EXPECT_EQ(qwen.dispatcher, MoeDispatcher::kAllToAll);
  EXPECT_TRUE(qwen.moe_overlap);
  const TrainingSettings oss =
      SettingsFor(SettingsBase::kTuned, *ModelPreset("gpt-oss-120b"), h100);
  EXPECT_FALSE(oss.moe_overlap);
  EXPECT_EQ(oss.recompute_modules, kRecomputeLayernorm | kRecomputeMoeAct);
  EXPECT_THAT(ds.source, HasSubstr("DeepSeek-V3"));
}

TEST(SettingsTest, GivenValuesWinAndDependentSwitchesFollowThem) {
  Job job = PresetJob("llama3-8b", 2, 1, 4);
  job.plan.sequence_parallel = false;
  job.plan.data_parallel_sharding = DataParallelSharding::kNone;
  job.plan.recompute = Recompute::kFull;
  GivenSettings given;
  given.sequence_parallel = given.sharding = given.recompute = true;
  FillSettings(given, job);
  EXPECT_FALSE(job.plan.sequence_parallel);
  EXPECT_EQ(job.plan.recompute, Recompute::kFull);
  // The TP overlap needs sequence parallelism; the parameter gather the
  // distributed optimizer: neither is turned on under the given values.
  EXPECT_FALSE(job.plan.tp_comm_overlap);
  EXPECT_FALSE(job.plan.param_gather_overlap);
  EXPECT_TRUE(job.plan.gradient_bucketing);
  EXPECT_EQ(job.plan.dtype, DType::kBf16);
  EXPECT_TRUE(ValidateJob(job).ok()) << ValidateJob(job);
}

TEST(SettingsTest, TheMoeOverlapIsTurnedOnOnlyWhereMegatronCoreAllowsIt) {
  // Qwen3-235B's recipe overlaps the all-to-all; with p > 1 it needs
  // interleaving, with EP 1 there is nothing to hide.
  Job flat = PresetJob("qwen3-235b-a22b", 2, 8, 4, 4);
  FillSettings(GivenSettings{}, flat);
  EXPECT_FALSE(flat.plan.moe.overlap);
  EXPECT_TRUE(ValidateJob(flat).ok()) << ValidateJob(flat);
  Job interleaved = PresetJob("qwen3-235b-a22b", 2, 8, 4, 4);
  interleaved.plan.virtual_stages = 2;
  interleaved.plan.layout.first_stage_layers = 0;
  FillSettings(GivenSettings{}, interleaved);
  EXPECT_TRUE(interleaved.plan.moe.overlap);
  Job no_ep = PresetJob("qwen3-235b-a22b", 2, 1, 4, 1);
  FillSettings(GivenSettings{}, no_ep);
  EXPECT_FALSE(no_ep.plan.moe.overlap);
}

// A plan valid under Megatron-LM's defaults stays valid under every base,
// for every preset: a base only turns a switch on where the plan allows it.
TEST(SettingsTest, NoBaseMakesAValidPlanInvalid) {
  for (const std::string& name : ModelPresetNames()) {
    SCOPED_TRACE(name);
    const ModelSpec model = *ModelPreset(name);
    const int64_t ep = model.is_moe() ? 8 : 1;
    for (int64_t t : {1, 2}) {
      Job job = PresetJob(name.c_str(), t, 1, 8, ep);
      // Expert and tensor parallelism together need sequence parallelism
      // under any base (Megatron-Core): given here.
      GivenSettings given;
      given.sequence_parallel = true;
      job.plan.sequence_parallel = t > 1 && ep > 1;
      job.plan.settings = SettingsBase::kMegatronDefaults;
      FillSettings(given, job);
      ASSERT_TRUE(ValidateJob(job).ok()) << ValidateJob(job);
      for (SettingsBase base : {SettingsBase::kTuned, SettingsBase::kPaper}) {
        Job other = job;
        other.plan.settings = base;
        FillSettings(given, other);
        EXPECT_TRUE(ValidateJob(other).ok()) << SettingsName(base) << ": " << ValidateJob(other);
      }
    }
  }
}

TEST(SettingsTest, TheReportNamesTheBaseAndExactlyWhatChanged) {
  Job job = PresetJob("llama3-70b", 4, 1, 2);
  FillSettings(GivenSettings{}, job);
  SettingsReport report = DescribeSettings(job);
  EXPECT_EQ(report.name, "tuned");
  EXPECT_THAT(report.changed, IsEmpty());
  EXPECT_THAT(report.assumed, ::testing::Contains("sequence parallel"));
  job.plan.recompute = Recompute::kFull;
  job.plan.dtype = DType::kFp8;
  report = DescribeSettings(job);
  EXPECT_THAT(report.changed, ElementsAre("fp8", "recompute full"));
  EXPECT_THAT(SettingsLine(report), HasSubstr("; changed: fp8, recompute full"));
  // A switch the plan cannot use is not a change: the TP overlap at t = 1.
  Job t1 = PresetJob("llama3-8b", 1, 1, 8);
  FillSettings(GivenSettings{}, t1);
  EXPECT_FALSE(t1.plan.tp_comm_overlap);
  EXPECT_THAT(DescribeSettings(t1).changed, IsEmpty());
}

TEST(SettingsTest, NamesRoundTripAndAnUnknownNameIsRefusedByField) {
  for (SettingsBase b :
       {SettingsBase::kTuned, SettingsBase::kMegatronDefaults, SettingsBase::kPaper}) {
    EXPECT_EQ(*ParseSettings(SettingsName(b)), b);
  }
  EXPECT_THAT(ParseSettings("nemo").status().message(),
              HasSubstr("plan.settings='nemo' is unknown; use tuned, megatron-defaults or paper"));
}

// DeepSeek-V3 at t = 2, p = 8, ep = 8 with sequence parallelism,
// recomputing `modules` selectively.
Job SelectiveDeepSeek(uint32_t modules) {
  Job job = PresetJob("deepseek-v3", 2, 8, 4, 8);
  job.plan.sequence_parallel = true;
  job.plan.recompute = Recompute::kSelective;
  job.plan.recompute_modules = modules;
  return job;
}

// What one of its layers keeps.
double LayerBytes(uint32_t modules, bool moe_layer) {
  const Job job = SelectiveDeepSeek(modules);
  return LayerActivationBytes(job.model, job.plan, moe_layer);
}

// Recomputing MLA's up-projections keeps less: Q, K and V are re-made from
// the latents in the backward.
TEST(SettingsTest, MlaUpProjRecomputationDropsQkvFromTheActivations) {
  const double mlp_only = LayerBytes(kRecomputeMlp, /*moe_layer=*/true);
  const double with_up = LayerBytes(kRecomputeMlp | kRecomputeMlaUpProj, /*moe_layer=*/true);
  EXPECT_LT(with_up, mlp_only);
  // mla_up_proj needs MLA.
  Job dense = PresetJob("llama3-8b", 1, 1, 8);
  dense.plan.recompute = Recompute::kSelective;
  dense.plan.recompute_modules = kRecomputeMlaUpProj;
  EXPECT_THAT(ValidateJob(dense).message(), HasSubstr("mla_up_proj needs multi-latent attention"));
}

// shared_experts checkpoints the shared experts: their activations go (6
// bytes of their width a token, / t), and a model without them is refused.
TEST(SettingsTest, SharedExpertsRecomputationDropsTheirActivations) {
  const uint32_t shared = kRecomputeCoreAttn | kRecomputeSharedExperts;
  const Job job = SelectiveDeepSeek(shared);
  const double dropped = LayerBytes(kRecomputeCoreAttn, true) - LayerBytes(shared, true);
  const double tokens = static_cast<double>(job.model.seq_len * job.plan.micro_batch);
  EXPECT_NEAR(dropped, tokens * 6 * static_cast<double>(job.model.moe.shared_width()) / 2, 1);
  // A dense layer keeps its MLP's.
  EXPECT_DOUBLE_EQ(LayerBytes(shared, false), LayerBytes(kRecomputeCoreAttn, false));
  EXPECT_TRUE(ValidateJob(job).ok()) << ValidateJob(job);
  Job qwen = PresetJob("qwen3-30b-a3b", 1, 1, 8);
  qwen.plan.expert_parallel = 8;
  qwen.plan.recompute = Recompute::kSelective;
  qwen.plan.recompute_modules = kRecomputeSharedExperts;
  EXPECT_THAT(ValidateJob(qwen).message(),
              HasSubstr("shared_experts needs a MoE model with shared experts"));
}

}  // namespace
}  // namespace vtrain

namespace vtrain {
namespace {

// The precision-aware optimizer's bf16 moments save 4 bytes of optimizer
// state a parameter (2 + 2 instead of 4 + 4), divided as the optimizer is.
TEST(SettingsTest, Bf16MomentsSaveFourBytesAParameter) {
  Job job = PresetJob("llama3-8b", 1, 1, 8);
  job.plan.data_parallel_sharding = DataParallelSharding::kNone;
  const MemoryEstimate fp32 = EstimateMemory(job);
  job.plan.bf16_moments = true;
  const MemoryEstimate bf16 = EstimateMemory(job);
  ASSERT_FALSE(fp32.stages.empty());
  EXPECT_NEAR(fp32.stages[0].model_states_bytes - bf16.stages[0].model_states_bytes,
              4 * fp32.stages[0].parameters, 1);
  // DeepSeek-V3's recipe uses them; the report names them.
  EXPECT_TRUE(
      SettingsFor(SettingsBase::kTuned, *ModelPreset("deepseek-v3"), *GpuByName("h100-sxm5-80gb"))
          .bf16_moments);
  EXPECT_THAT(DescribeSettings(job).changed, ::testing::Contains("bf16 optimizer moments"));
}

// Megatron-LM keeps bf16 gradients in an fp32 buffer: 2 more bytes a
// parameter, not sharded by the distributed optimizer. Its defaults turn it
// on with bf16 (not fp16); the tuned recipes (Megatron-Bridge) turn it off.
TEST(SettingsTest, Fp32GradientsCostTwoBytesAParameter) {
  Job job = PresetJob("llama3-8b", 1, 1, 8);
  job.plan.dtype = DType::kBf16;
  job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
  const MemoryEstimate bf16 = EstimateMemory(job);
  job.plan.fp32_grads = true;
  const MemoryEstimate fp32 = EstimateMemory(job);
  ASSERT_FALSE(fp32.stages.empty());
  EXPECT_NEAR(fp32.stages[0].model_states_bytes - bf16.stages[0].model_states_bytes,
              2 * fp32.stages[0].parameters, 1);
  Job defaults = PresetJob("llama3-8b", 1, 1, 8);
  defaults.plan.settings = SettingsBase::kMegatronDefaults;
  defaults.plan.dtype = DType::kBf16;
  FillSettings({.dtype = true}, defaults);
  EXPECT_TRUE(defaults.plan.fp32_grads);
  defaults.plan.dtype = DType::kFp16;
  FillSettings({.dtype = true}, defaults);
  EXPECT_FALSE(defaults.plan.fp32_grads);
  Job tuned = PresetJob("llama3-8b", 1, 1, 8);
  tuned.plan.dtype = DType::kBf16;
  FillSettings({.dtype = true}, tuned);
  EXPECT_FALSE(tuned.plan.fp32_grads);
  // Given, it stays.
  tuned.plan.fp32_grads = true;
  FillSettings({.dtype = true, .fp32_grads = true}, tuned);
  EXPECT_TRUE(tuned.plan.fp32_grads);
  EXPECT_THAT(DescribeSettings(tuned).changed, ::testing::Contains("fp32 gradient buffer"));
}

}  // namespace
}  // namespace vtrain
