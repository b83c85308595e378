// Predictions under uneven pipeline layouts: the exact operator fast path and
// the periodic jump agree with the kernel graph and with stepping on random
// small jobs whose layers the chunks do not divide; an explicit layout equal
// to the even one predicts exactly the same; and the stage table, memory and
// time follow where the layers are.
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/predict/memory.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "core/spec/pipeline_layout.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::vtrain::testing::DescribeJob;
using ::vtrain::testing::RandomSmallJob;

absl::StatusOr<Prediction> LayoutPredictAt(const Job& job, Granularity granularity,
                                           bool periodic = true) {
  PredictOptions options;
  options.granularity = granularity;
  options.periodic = periodic;
  return Predict(job, DefaultProfileSet(job.cluster.gpu), options);
}

// RandomSmallJob with a layer count its p (and, sometimes, v) chunks do not
// divide, or first/last-stage layers; nullopt when the draw breaks a rule.
std::optional<Job> RandomUnevenJob(uint64_t seed) {
  Job job = RandomSmallJob(seed);
  const uint64_t r = seed * 0x9E3779B97F4A7C15ULL;
  auto pick = [&](int shift, int n) { return static_cast<int64_t>((r >> shift) % n); };
  ParallelPlan& plan = job.plan;
  if (plan.pipeline_parallel < 2) plan.pipeline_parallel = 2 + pick(0, 3);
  if (pick(4, 3) == 0 && plan.schedule == PipelineSchedule::k1F1B) plan.virtual_stages = 2;
  const int64_t chunks = plan.pipeline_parallel * plan.virtual_stages;
  job.model.num_layers = chunks * (1 + pick(8, 3)) + 1 + pick(12, chunks - 1);
  if (pick(16, 4) == 0 && plan.virtual_stages == 1) {
    plan.layout.first_stage_layers = 1;
    plan.layout.last_stage_layers =
        job.model.num_layers - 1 - (plan.pipeline_parallel - 2) * (1 + pick(20, 2));
  }
  job.cluster.num_gpus = JobGpus(job);
  if (!ValidateJob(job).ok()) return std::nullopt;
  return job;
}

TEST(PipelineLayoutDifferentialTest, KernelOperatorAndSteppingAgreeExactly) {
  int tried = 0, uneven = 0;
  for (uint64_t seed = 1; seed <= 200 && tried < 60; ++seed) {
    const std::optional<Job> job = RandomUnevenJob(seed);
    if (!job) continue;
    ++tried;
    VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<ChunkLayers> chunks, ResolvePipelineLayout(*job));
    uneven += !IsEvenLayout(chunks);
    SCOPED_TRACE(absl::StrCat("seed ", seed, ": ", DescribeJob(*job), " v=",
                              job->plan.virtual_stages, " layout ", FormatPipelineLayout(chunks)));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction kernel,
                                LayoutPredictAt(*job, Granularity::kKernel));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction op, LayoutPredictAt(*job, Granularity::kOperator));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction stepped,
                                LayoutPredictAt(*job, Granularity::kOperator, /*periodic=*/false));
    EXPECT_GT(kernel.iteration_time_ns, 0);
    EXPECT_EQ(kernel.iteration_time_ns, op.iteration_time_ns);
    EXPECT_EQ(stepped.iteration_time_ns, op.iteration_time_ns);
    ASSERT_EQ(op.stages.size(), static_cast<size_t>(job->plan.pipeline_parallel));
    int64_t layers = 0;
    for (size_t s = 0; s < op.stages.size(); ++s) {
      EXPECT_EQ(kernel.stages[s].compute_ns, op.stages[s].compute_ns);
      EXPECT_EQ(stepped.stages[s].idle_ns, op.stages[s].idle_ns);
      EXPECT_EQ(op.stages[s].first_layer, chunks[s].first_layer);
      layers += op.stages[s].num_layers;
    }
    EXPECT_EQ(layers, job->model.num_layers);
    if (HasFailure()) return;
  }
  EXPECT_GE(tried, 30);
  EXPECT_GE(uneven, 20);
}

Job LayoutGpt(int64_t layers, int64_t p) {
  Job job;
  job.model = *ModelPreset("gpt3-1.3b");
  job.model.num_layers = layers;
  job.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 2 * p);
  job.plan.tensor_parallel = 2;
  job.plan.pipeline_parallel = p;
  job.plan.global_batch = 32;
  return job;
}

TEST(PipelineLayoutPredictTest, AnExplicitEvenLayoutPredictsExactlyTheDefault) {
  const Job even = LayoutGpt(24, 4);
  Job spelled = even;
  VTRAIN_ASSERT_OK_AND_ASSIGN(spelled.plan.layout.chunks,
                              ParsePipelineLayout("Et*6|(t*6|)*2t*6L", "f"));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction a, LayoutPredictAt(even, Granularity::kOperator));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction b, LayoutPredictAt(spelled, Granularity::kOperator));
  EXPECT_EQ(a.iteration_time_ns, b.iteration_time_ns);
  EXPECT_EQ(a.memory.peak_bytes, b.memory.peak_bytes);
}

TEST(PipelineLayoutPredictTest, StagesFollowTheirLayers) {
  // 26 layers on 4 stages: the embedding and the loss count as a layer each
  // (7 per chunk), so the ends hold 6.
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p26,
                              LayoutPredictAt(LayoutGpt(26, 4), Granularity::kOperator));
  ASSERT_EQ(p26.stages.size(), 4u);
  EXPECT_EQ(p26.stages[0].num_layers, 6);
  EXPECT_EQ(p26.stages[1].num_layers, 7);
  EXPECT_EQ(p26.stages[1].first_layer, 6);
  EXPECT_EQ(p26.stages[3].num_layers, 6);
  // A middle stage's compute grows with its layers; it does 7 of 6's work.
  EXPECT_GT(p26.stages[1].compute_ns, p26.stages[0].compute_ns);
  // Between the even 24- and 28-layer models.
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p24,
                              LayoutPredictAt(LayoutGpt(24, 4), Granularity::kOperator));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p28,
                              LayoutPredictAt(LayoutGpt(28, 4), Granularity::kOperator));
  EXPECT_GT(p26.iteration_time_ns, p24.iteration_time_ns);
  EXPECT_LT(p26.iteration_time_ns, p28.iteration_time_ns);

  // Moving layers onto the first stage moves its parameters and memory.
  Job heavy = LayoutGpt(24, 2);
  heavy.plan.layout.first_stage_layers = 16;
  const MemoryEstimate even_memory = EstimateMemory(LayoutGpt(24, 2));
  const MemoryEstimate heavy_memory = EstimateMemory(heavy);
  EXPECT_GT(heavy_memory.stages[0].model_states_bytes, even_memory.stages[0].model_states_bytes);
  EXPECT_LT(heavy_memory.stages[1].model_states_bytes, even_memory.stages[1].model_states_bytes);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction a,
                              LayoutPredictAt(LayoutGpt(24, 2), Granularity::kOperator));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction b, LayoutPredictAt(heavy, Granularity::kOperator));
  EXPECT_EQ(b.stages[0].num_layers, 16);
  EXPECT_GT(b.stages[0].parameters_per_gpu, a.stages[0].parameters_per_gpu);
  // The busiest stage sets the pace: 16 of 24 layers is slower than 12.
  EXPECT_GT(b.iteration_time_ns, a.iteration_time_ns);
}

}  // namespace
}  // namespace vtrain
