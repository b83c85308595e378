// The periodic fast path (core/engine/periodic.h) against stepping every
// action, and against the kernel-granularity graph and engine: the same
// iteration time and the same accounting of every stream, to the
// nanosecond, with thousands of micro-batches, both schedules, with and
// without gradient bucketing, 1 to 105 stages.
#include "core/engine/periodic.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/streaming.h"
#include "core/graph/builder.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::vtrain::testing::DescribeJob;
using ::vtrain::testing::RandomSmallJob;
using ::vtrain::testing::TinyJob;
using ::vtrain::testing::WithPlan;

absl::StatusOr<IterationSimulation> Streamed(const Job& job, Granularity granularity,
                                             bool periodic) {
  const ProfileSet set = DefaultProfileSet(job.cluster.gpu);
  ProfileLookup lookup(
      set, job.cluster.gpu,
      {job.cluster.intra_node_bandwidth_bytes_per_s, job.cluster.inter_node_bandwidth_bytes_per_s});
  BuildOptions options;
  options.granularity = granularity;
  options.periodic = periodic;
  return SimulateIteration(job, lookup, options);
}

// Stepping and jumping must agree on everything the simulation reports.
void ExpectIdentical(const IterationSimulation& jumped, const IterationSimulation& stepped) {
  EXPECT_EQ(jumped.result.makespan_ns, stepped.result.makespan_ns);
  EXPECT_EQ(jumped.num_tasks, stepped.num_tasks);
  EXPECT_EQ(jumped.actions_stepped + jumped.actions_skipped, stepped.actions_stepped);
  EXPECT_EQ(stepped.actions_skipped, 0);
  ASSERT_EQ(jumped.result.streams.size(), stepped.result.streams.size());
  for (size_t i = 0; i < stepped.result.streams.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("stream ", i));
    const StreamStats& a = jumped.result.streams[i];
    const StreamStats& b = stepped.result.streams[i];
    EXPECT_EQ(a.busy_ns, b.busy_ns);
    EXPECT_EQ(a.gap_ns, b.gap_ns);
    EXPECT_EQ(a.exposed_wait_ns, b.exposed_wait_ns);
    EXPECT_EQ(a.idle_ns, b.idle_ns);
    EXPECT_EQ(a.last_finish_ns, b.last_finish_ns);
    EXPECT_EQ(a.num_tasks, b.num_tasks);
  }
}

Job Shape(Job job, PipelineSchedule schedule, bool bucketing) {
  job.plan.schedule = schedule;
  job.plan.gradient_bucketing = bucketing;
  return job;
}

TEST(PeriodicTest, EqualsSteppingForRandomJobsWithManyMicroBatches) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Job job = RandomSmallJob(seed);
    // Thousands of micro-batches, or just around the pipeline depth.
    const int64_t p = job.plan.pipeline_parallel;
    int64_t m = seed % 3 == 0 ? p + static_cast<int64_t>(seed % 4) : 1000 + 37 * seed;
    // Interleaved 1F1B needs a multiple of the pipeline depth.
    if (job.plan.virtual_stages > 1 && job.plan.schedule == PipelineSchedule::k1F1B) {
      m = (m + p - 1) / p * p;
    }
    job.plan.global_batch = m * job.plan.micro_batch * job.plan.data_parallel;
    for (Granularity granularity : {Granularity::kKernel, Granularity::kOperator}) {
      SCOPED_TRACE(
          absl::StrCat("seed ", seed, " ", GranularityName(granularity), ": ", DescribeJob(job)));
      VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation jumped,
                                  Streamed(job, granularity, true));
      VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation stepped,
                                  Streamed(job, granularity, false));
      ExpectIdentical(jumped, stepped);
      if (HasFailure()) return;
    }
  }
}

TEST(PeriodicTest, EqualsSteppingWithTodaysTrainingOptions) {
  // Sequence and context parallelism, sharded data parallelism, selective
  // recomputation, Llama layers and interleaving (which is stepped) change
  // the templates and the collectives but not the periodicity.
  int checked = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Job job = RandomSmallJob(seed);
    job.plan.global_batch =
        (400 + 13 * static_cast<int64_t>(seed)) * job.plan.micro_batch * job.plan.data_parallel;
    switch (seed % 6) {
      case 0:
        job.plan.sequence_parallel = true;
        break;
      case 1:
        job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
        break;
      case 2:
        job.plan.data_parallel_sharding = DataParallelSharding::kFull;
        break;
      case 3:
        job.plan.recompute = Recompute::kSelective;
        break;
      case 4:
        job.model.arch = Architecture::kLlama;
        job.plan.sequence_parallel = true;
        break;
      case 5:
        job.plan.context_parallel = 2;
        job.cluster.num_gpus *= 2;
        break;
    }
    if (!ValidateJob(job).ok()) continue;
    ++checked;
    SCOPED_TRACE(absl::StrCat("seed ", seed, ": ", DescribeJob(job)));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation jumped,
                                Streamed(job, Granularity::kOperator, true));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation stepped,
                                Streamed(job, Granularity::kOperator, false));
    ExpectIdentical(jumped, stepped);
    if (HasFailure()) return;
  }
  EXPECT_GE(checked, 20);
}

TEST(PeriodicTest, EqualsTheKernelGraphWithThousandsOfMicroBatches) {
  // The operator path with jumps against the materialised kernel graph run
  // by the engine: same makespan and same stream timelines.
  for (const int64_t p : {1, 2, 4, 8}) {
    for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B}) {
      for (bool bucketing : {false, true}) {
        const Job job = Shape(WithPlan(TinyJob(), 2, 2, p, 1, 2 * 2000), schedule, bucketing);
        SCOPED_TRACE(DescribeJob(job));
        VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation jumped,
                                    Streamed(job, Granularity::kOperator, true));
        const ProfileSet set = DefaultProfileSet(job.cluster.gpu);
        ProfileLookup lookup(set, job.cluster.gpu,
                             {job.cluster.intra_node_bandwidth_bytes_per_s,
                              job.cluster.inter_node_bandwidth_bytes_per_s});
        BuildOptions options;
        options.granularity = Granularity::kKernel;
        VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationGraph graph,
                                    BuildIterationGraph(job, lookup, options));
        VTRAIN_ASSERT_OK_AND_ASSIGN(const SimulationResult engine, Simulate(graph.graph));
        EXPECT_EQ(jumped.result.makespan_ns, engine.makespan_ns);
        VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation stepped,
                                    Streamed(job, Granularity::kOperator, false));
        ExpectIdentical(jumped, stepped);
        // The compute streams (the data-parallel streams' waits are
        // attributed by the kind of the kernel the merged pass ends with).
        ASSERT_EQ(jumped.result.streams.size(), engine.streams.size());
        for (const StageInfo& stage : graph.stages) {
          const size_t i = static_cast<size_t>(stage.compute_stream);
          const StreamStats& a = jumped.result.streams[i];
          const StreamStats& b = engine.streams[i];
          EXPECT_EQ(a.exposed_wait_ns, b.exposed_wait_ns) << "stream " << i;
          EXPECT_EQ(a.idle_ns, b.idle_ns) << "stream " << i;
          EXPECT_EQ(a.last_finish_ns, b.last_finish_ns) << "stream " << i;
        }
        if (schedule == PipelineSchedule::k1F1B) {
          EXPECT_GT(jumped.actions_skipped, 0);
        }
        if (HasFailure()) return;
      }
    }
  }
}

TEST(PeriodicTest, MtNlgPlansJumpAndEqualStepping) {
  // The paper's MT-NLG 530B plans at 1 to 105 stages, 1,920 sequences.
  for (const int64_t p : {1, 3, 15, 35, 105}) {
    for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B}) {
      for (bool bucketing : {false, true}) {
        Job job;
        job.model = *ModelPreset("mtnlg-530b");
        job.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 8 * 2 * p);
        job = Shape(WithPlan(job, 8, 2, p, 1, 1920), schedule, bucketing);
        SCOPED_TRACE(DescribeJob(job));
        VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation jumped,
                                    Streamed(job, Granularity::kOperator, true));
        VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation stepped,
                                    Streamed(job, Granularity::kOperator, false));
        ExpectIdentical(jumped, stepped);
        // 1F1B repeats after warm-up: most actions are jumped over.
        if (schedule == PipelineSchedule::k1F1B) {
          EXPECT_GT(jumped.actions_skipped, jumped.actions_stepped) << jumped.actions_stepped;
        }
        if (HasFailure()) return;
      }
    }
  }
}

TEST(PeriodicTest, PredictionsAndBreakdownsEqualStepping) {
  // Through Predict: the iteration time and every stage's breakdown.
  for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B}) {
    for (const int64_t d : {1, 4}) {
      Job job;
      job.model = *ModelPreset("mtnlg-530b");
      job.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 8 * d * 105);
      job = Shape(WithPlan(job, 8, d, 105, 1, 1920), schedule, d > 1);
      SCOPED_TRACE(DescribeJob(job));
      const ProfileSet set = DefaultProfileSet(job.cluster.gpu);
      PredictOptions options;
      VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction jumped, Predict(job, set, options));
      options.periodic = false;
      VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction stepped, Predict(job, set, options));
      EXPECT_EQ(jumped.iteration_time_ns, stepped.iteration_time_ns);
      EXPECT_GT(jumped.simulation.actions_skipped, 0);
      EXPECT_EQ(stepped.simulation.actions_skipped, 0);
      EXPECT_EQ(jumped.simulation.actions + jumped.simulation.actions_skipped,
                stepped.simulation.actions);
      ASSERT_EQ(jumped.stages.size(), stepped.stages.size());
      for (size_t s = 0; s < stepped.stages.size(); ++s) {
        const StageBreakdown& a = jumped.stages[s];
        const StageBreakdown& b = stepped.stages[s];
        EXPECT_EQ(a.compute_ns, b.compute_ns) << "stage " << s;
        EXPECT_EQ(a.tensor_parallel_ns, b.tensor_parallel_ns) << "stage " << s;
        EXPECT_EQ(a.pipeline_exposed_ns, b.pipeline_exposed_ns) << "stage " << s;
        EXPECT_EQ(a.data_parallel_exposed_ns, b.data_parallel_exposed_ns) << "stage " << s;
        EXPECT_EQ(a.idle_ns, b.idle_ns) << "stage " << s;
      }
    }
  }
}

TEST(PeriodicTest, CancellationStopsAJumpingWalk) {
  Job job;
  job.model = *ModelPreset("mtnlg-530b");
  job.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 8 * 105);
  job = WithPlan(job, 8, 1, 105, 1, 1920);
  PredictOptions options;
  options.cancelled = [] { return true; };
  EXPECT_THAT(Predict(job, DefaultProfileSet(job.cluster.gpu), options),
              vtrain::testing::StatusIs(absl::StatusCode::kCancelled));
}

}  // namespace
}  // namespace vtrain
