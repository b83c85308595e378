// plan-model for today's families: the Llama family's shapes, the inverse
// question (the fewest GPUs for a model and a token count, expected with
// failures) and the warning when the global batch limits the efficiency.
#include <string>

#include "core/plan/model_design.h"
#include "core/profile/default_profiles.h"
#include "gtest/gtest.h"

namespace vtrain {
namespace {

TEST(LlamaFamilyTest, HoldsLlama3sOwnShapes) {
  const std::vector<ModelSpec> family = LlamaFamily(1e9, 1e12, 8192, 128256);
  ASSERT_FALSE(family.empty());
  auto find = [&](int64_t hidden) -> const ModelSpec* {
    for (const ModelSpec& m : family) {
      if (m.hidden_size == hidden) return &m;
    }
    return nullptr;
  };
  // Llama 3 8B, 70B and 405B: layers, FFN width, heads and KV heads.
  for (const auto& [preset, hidden] :
       {std::pair{"llama3-8b", 4096}, {"llama3-70b", 8192}, {"llama3.1-405b", 16384}}) {
    const ModelSpec* m = find(hidden);
    ASSERT_NE(m, nullptr) << preset;
    const ModelSpec card = *ModelPreset(preset);
    EXPECT_EQ(m->num_layers, card.num_layers) << preset;
    EXPECT_EQ(m->ffn(), card.ffn()) << preset;
    EXPECT_EQ(m->num_heads, card.num_heads) << preset;
    EXPECT_EQ(m->kv_heads(), card.kv_heads()) << preset;
    EXPECT_EQ(m->arch, Architecture::kLlama);
    EXPECT_NEAR(ModelParameterCount(*m), ModelParameterCount(card), 1) << preset;
  }
  for (size_t i = 1; i < family.size(); ++i) {
    EXPECT_GT(ModelParameterCount(family[i]), ModelParameterCount(family[i - 1]));
    EXPECT_EQ(family[i].num_heads % family[i].kv_heads(), 0);
  }
}

DesignSpec H100Llama(int64_t gpus, double days) {
  DesignSpec spec;
  spec.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 0);
  spec.max_gpus = gpus;
  spec.days = days;
  spec.global_batch = 2048;
  spec.plan_space.tensor_parallel = {1, 2, 4, 8};
  spec.plan_space.dtype = DType::kBf16;
  spec.candidates = LlamaFamily(1e8, 1e14, 8192, 128256);
  return spec;
}

TEST(DesignForModelTest, FindsTheFewestNodesThatTrainInTime) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("h100-sxm5-80gb"));
  absl::StatusOr<InverseResult> r = DesignForModel(H100Llama(2048, 30), 8e9, 1e12, profiles);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible) << r->reason;
  EXPECT_EQ(r->model.model.hidden_size, 4096);  // the 8B shape is nearest to 8e9
  EXPECT_LE(r->model.days_for_optimal, 30);
  EXPECT_GT(r->model.days_for_optimal, r->model.failure_free_days);  // expected, with failures
  EXPECT_EQ(r->gpus, JobGpus(r->model.job));
  EXPECT_NEAR(r->model.optimal_tokens, 1e12, 1);
  // One node fewer than the answer's allowance does not make it.
  const int64_t allowed = (r->gpus + 7) / 8 * 8;
  if (allowed > 8) {
    absl::StatusOr<InverseResult> fewer =
        DesignForModel(H100Llama(allowed - 8, 30), 8e9, 1e12, profiles);
    ASSERT_TRUE(fewer.ok()) << fewer.status();
    EXPECT_FALSE(fewer->feasible);
    EXPECT_NE(fewer->reason.find("more than 30"), std::string::npos) << fewer->reason;
  }
}

TEST(DesignForModelTest, SaysWhyWhenNoCountIsInTime) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("h100-sxm5-80gb"));
  absl::StatusOr<InverseResult> r = DesignForModel(H100Llama(64, 1), 70e9, 15e12, profiles);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->feasible);
  EXPECT_EQ(r->gpus, 0);
  EXPECT_NE(r->reason.find("allow more GPUs or days"), std::string::npos) << r->reason;
  EXPECT_FALSE(DesignForModel(H100Llama(64, 1), 0, 15e12, profiles).ok());
}

TEST(BatchWarningTest, WarnsWhenTheBubbleIsLarge) {
  Job job;
  job.plan.pipeline_parallel = 8;
  job.plan.data_parallel = 64;
  job.plan.micro_batch = 1;
  job.plan.global_batch = 512;  // 8 micro-batches on 8 stages: 7/15 bubble
  EXPECT_NE(BatchWarning(job).find("bubble of 47%"), std::string::npos) << BatchWarning(job);
  job.plan.global_batch = 4096;  // 64 micro-batches: 7/71
  EXPECT_EQ(BatchWarning(job), "");
  job.plan.global_batch = 512;
  job.plan.virtual_stages = 4;  // interleaving shrinks it: 7/39
  EXPECT_EQ(BatchWarning(job), "");
}

}  // namespace
}  // namespace vtrain
