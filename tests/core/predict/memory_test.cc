#include "core/predict/memory.h"

#include "gtest/gtest.h"

namespace vtrain {
namespace {

Job Gpt175B(int64_t t, int64_t d, int64_t p, int64_t mb, int64_t gb) {
  Job job;
  job.model = *ModelPreset("gpt3-175b");
  job.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), t * d * p);
  job.plan.tensor_parallel = t;
  job.plan.data_parallel = d;
  job.plan.pipeline_parallel = p;
  job.plan.micro_batch = mb;
  job.plan.global_batch = gb;
  return job;
}

TEST(MemoryTest, LayerActivationsFollowKorthikanti) {
  // s*b*h*(10 + 24/t + 5*a*s/(h*t)) for s=2048, b=1, h=12288, a=96, t=8:
  // 2,048 * 12,288 = 25,165,824; 10 + 3 + 5*96*2048/(12288*8) = 10 + 3 + 10
  // = 23; 25,165,824 * 23 = 578,813,952 bytes.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(*ModelPreset("gpt3-175b"), 1, 8), 578'813'952.0);
}

TEST(MemoryTest, StagesHoldTheirShareAndTheMicroBatchesInFlight) {
  const Job job = Gpt175B(8, 4, 16, 1, 1536);
  const MemoryEstimate m = EstimateMemory(job);
  ASSERT_EQ(m.stages.size(), 16u);
  // 1F1B: stage s keeps min(p - s, m) = 16 - s micro-batches.
  EXPECT_EQ(m.stages[0].micro_batches_in_flight, 16);
  EXPECT_EQ(m.stages[15].micro_batches_in_flight, 1);
  // A middle stage: 6 layers of (4h^2 + 2hf + 9h + f) / t parameters,
  // 16 bytes each. h = 12,288, f = 49,152: 4h^2 + 2hf = 1,811,939,328,
  // 9h + f = 159,744, so 1,812,099,072 per layer; * 6 / 8 = 1,359,074,304.
  EXPECT_DOUBLE_EQ(m.stages[5].parameters, 1'359'074'304.0);
  EXPECT_DOUBLE_EQ(m.stages[5].model_states_bytes, 16 * 1'359'074'304.0);
  // Full recomputation: 2*s*b*h per layer per micro-batch in flight, plus one
  // layer's activations: (16 - 5) * 6 * 2 * 2048 * 12288 + 578,813,952.
  EXPECT_DOUBLE_EQ(m.stages[5].activations_bytes, 11.0 * 6 * 2 * 2048 * 12288 + 578'813'952.0);
  EXPECT_TRUE(m.fits) << m.peak_bytes / (1 << 30) << " GiB";
  // The first stage holds the most micro-batches and the embedding.
  EXPECT_EQ(m.peak_bytes, m.stages[0].peak_bytes);
}

TEST(MemoryTest, TooLittleParallelismDoesNotFit) {
  // 175B parameters * 16 bytes / 8 GPUs = 350 GB per GPU.
  const MemoryEstimate m = EstimateMemory(Gpt175B(8, 1, 1, 1, 8));
  EXPECT_FALSE(m.fits);
  EXPECT_GT(m.peak_bytes, 300e9);
  EXPECT_EQ(m.capacity_bytes, 80.0 * (1 << 30));
}

TEST(MemoryTest, RecomputationAndSchedulesChangeActivations) {
  Job job = Gpt175B(8, 4, 16, 2, 1536);
  const double full = EstimateMemory(job).stages[0].activations_bytes;
  job.plan.recompute = Recompute::kNone;
  const double none = EstimateMemory(job).stages[0].activations_bytes;
  EXPECT_GT(none, 5 * full);
  job.plan.recompute = Recompute::kFull;
  job.plan.schedule = PipelineSchedule::kGpipe;
  const MemoryEstimate gpipe = EstimateMemory(job);
  EXPECT_EQ(gpipe.stages[0].micro_batches_in_flight, job.plan.num_micro_batches());
  EXPECT_GT(gpipe.stages[0].activations_bytes, full);
  // A bigger micro-batch never needs less memory.
  Job bigger = Gpt175B(8, 4, 16, 4, 1536);
  EXPECT_GT(EstimateMemory(bigger).stages[0].activations_bytes,
            EstimateMemory(Gpt175B(8, 4, 16, 2, 1536)).stages[0].activations_bytes);
}

}  // namespace
}  // namespace vtrain
