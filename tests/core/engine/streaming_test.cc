#include "core/engine/streaming.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/graph/builder.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/reference_scheduler.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::DescribeJob;
using ::vtrain::testing::RandomSmallJob;
using ::vtrain::testing::ReferenceSchedule;
using ::vtrain::testing::ReferenceSimulate;
using ::vtrain::testing::StatusIs;
using ::vtrain::testing::TinyJob;
using ::vtrain::testing::WithPlan;

LinkBandwidths Links(const Job& job) {
  return {job.cluster.intra_node_bandwidth_bytes_per_s,
          job.cluster.inter_node_bandwidth_bytes_per_s};
}

// What must not depend on how tasks were merged: when a stream worked, waited
// and finished. (How busy time splits by kind and into gaps, and the task
// count, may differ: the streaming path folds a pass, its gap and the
// pipeline send after it into one task.)
void ExpectSameTimeline(const StreamStats& a, const StreamStats& b) {
  int64_t busy_a = a.gap_ns, busy_b = b.gap_ns;
  for (int k = 0; k < kNumTaskKinds; ++k) {
    busy_a += a.busy_ns[k];
    busy_b += b.busy_ns[k];
  }
  EXPECT_EQ(busy_a, busy_b);
  EXPECT_EQ(a.exposed_wait_ns, b.exposed_wait_ns);
  EXPECT_EQ(a.idle_ns, b.idle_ns);
  EXPECT_EQ(a.last_finish_ns, b.last_finish_ns);
  EXPECT_LE(a.num_tasks, b.num_tasks);
}

TEST(SimulateIterationTest, EqualsTheEngineOnTheBuiltGraphForRandomJobs) {
  // SimulateIteration promises the result of Simulate(BuildIterationGraph())
  // without the graph; the graph's schedule in turn must match the naive
  // reference scheduler task for task.
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const Job job = RandomSmallJob(seed);
    const ProfileSet set = DefaultProfileSet(job.cluster.gpu);
    for (Granularity granularity : {Granularity::kKernel, Granularity::kOperator}) {
      SCOPED_TRACE(
          absl::StrCat("seed ", seed, " ", GranularityName(granularity), ": ", DescribeJob(job)));
      BuildOptions options;
      options.granularity = granularity;
      ProfileLookup graph_lookup(set, job.cluster.gpu, Links(job));
      VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationGraph graph,
                                  BuildIterationGraph(job, graph_lookup, options));
      SimulationOptions keep;
      keep.keep_task_times = true;
      VTRAIN_ASSERT_OK_AND_ASSIGN(const SimulationResult engine, Simulate(graph.graph, keep));
      ProfileLookup streaming_lookup(set, job.cluster.gpu, Links(job));
      VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation streamed,
                                  SimulateIteration(job, streaming_lookup, options));
      EXPECT_EQ(streamed.result.makespan_ns, engine.makespan_ns);
      EXPECT_LE(streamed.num_tasks, graph.graph.num_tasks());
      EXPECT_EQ(streamed.num_micro_batches, graph.num_micro_batches);
      ASSERT_EQ(streamed.result.streams.size(), engine.streams.size());
      for (size_t st = 0; st < engine.streams.size(); ++st) {
        SCOPED_TRACE(graph.graph.stream_name(static_cast<StreamId>(st)));
        ExpectSameTimeline(streamed.result.streams[st], engine.streams[st]);
      }
      ASSERT_EQ(streamed.stages.size(), graph.stages.size());
      for (size_t st = 0; st < graph.stages.size(); ++st) {
        EXPECT_EQ(streamed.stages[st].tensor_parallel_ns, graph.stages[st].tensor_parallel_ns);
        EXPECT_EQ(streamed.stages[st].compute_stream, graph.stages[st].compute_stream);
      }
      VTRAIN_ASSERT_OK_AND_ASSIGN(const ReferenceSchedule reference,
                                  ReferenceSimulate(graph.graph));
      EXPECT_EQ(reference.makespan_ns, engine.makespan_ns);
      EXPECT_EQ(reference.finish_ns, engine.finish_ns);
      if (HasFailure()) return;
    }
  }
}

TEST(SimulateIterationTest, LimitsAndCancellation) {
  // 8 stages, 16,384 micro-batches: at least one task per pass, 8 * 2 *
  // 16,384 = 262,144 tasks, so the cancellation callback is polled.
  const Job job = WithPlan(TinyJob(), 1, 1, 8, 1, 16384);
  const ProfileSet set = DefaultProfileSet(job.cluster.gpu);
  {
    BuildOptions options;
    options.cancelled = [] { return true; };
    ProfileLookup lookup(set, job.cluster.gpu, Links(job));
    EXPECT_THAT(SimulateIteration(job, lookup, options), StatusIs(absl::StatusCode::kCancelled));
  }
  {
    BuildOptions options;
    options.max_tasks = 1000;
    ProfileLookup lookup(set, job.cluster.gpu, Links(job));
    EXPECT_THAT(SimulateIteration(job, lookup, options),
                StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_tasks=1000")));
  }
  {
    Job bad = job;
    bad.model.num_layers = 5;  // fewer than p = 8 stages can hold
    ProfileLookup lookup(set, job.cluster.gpu, Links(job));
    EXPECT_THAT(SimulateIteration(bad, lookup, BuildOptions{}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.num_layers=5")));
  }
}

}  // namespace
}  // namespace vtrain
