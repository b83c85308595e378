#include "core/graph/builder.h"

#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/streaming.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/unit_profile.h"

namespace vtrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;
using ::vtrain::testing::TinyJob;
using ::vtrain::testing::UnitProfileSet;
using ::vtrain::testing::UnitTimes;
using ::vtrain::testing::UseFreeLinks;
using ::vtrain::testing::WithPlan;

LinkBandwidths BuilderLinks(const Job& job) {
  return {job.cluster.intra_node_bandwidth_bytes_per_s,
          job.cluster.inter_node_bandwidth_bytes_per_s};
}

// TinyJob (8 layers) with plan t, d, p, m micro-batches of 1, free links.
Job PipelineJob(int64_t t, int64_t d, int64_t p, int64_t m, PipelineSchedule schedule,
                Recompute recompute) {
  Job job = WithPlan(TinyJob(), t, d, p, 1, d * m);
  job.plan.schedule = schedule;
  job.plan.recompute = recompute;
  UseFreeLinks(job);
  return job;
}

int64_t CountKind(const TaskGraph& g, TaskKind kind) {
  int64_t n = 0;
  for (const Task& t : g.tasks()) n += t.kind == kind ? 1 : 0;
  return n;
}

struct Built {
  IterationGraph graph;
  int64_t makespan_ns = 0;
};

// Builds and simulates `job` on its unit profile set; checks that every
// operator lookup hit a measured entry (so the test keys match the
// builder's) and that every transfer takes 0 ns.
void BuildAndSimulate(const Job& job, Granularity granularity, Built* out) {
  const ProfileSet set = UnitProfileSet(job);
  ProfileLookup lookup(set, job.cluster.gpu, BuilderLinks(job));
  BuildOptions options;
  options.granularity = granularity;
  VTRAIN_ASSERT_OK_AND_ASSIGN(out->graph, BuildIterationGraph(job, lookup, options));
  int operator_lookups = 0;
  for (const LookupRecord& r : lookup.records()) {
    if (!absl::StrContains(r.key, "/fp16/")) continue;  // a collective
    ++operator_lookups;
    EXPECT_EQ(r.fidelity, Fidelity::kMeasured) << r.key;
  }
  EXPECT_GE(operator_lookups, 4);
  for (const Task& t : out->graph.graph.tasks()) {
    if (t.kind != TaskKind::kCompute) {
      ASSERT_EQ(t.duration_ns, 0) << "transfers and optimizer steps must take 0 ns here";
    }
  }
  VTRAIN_ASSERT_OK_AND_ASSIGN(const SimulationResult r, Simulate(out->graph.graph));
  out->makespan_ns = r.makespan_ns;
  // The streaming path gives the same.
  ProfileLookup streaming_lookup(set, job.cluster.gpu, BuilderLinks(job));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation streamed,
                              SimulateIteration(job, streaming_lookup, options));
  EXPECT_EQ(streamed.result.makespan_ns, r.makespan_ns);
  EXPECT_LE(streamed.num_tasks, out->graph.graph.num_tasks());
}

struct PipelineCase {
  int64_t p;
  int64_t m;
};

TEST(BuildIterationGraphTest, PipelineMakespanHasTheClosedForm) {
  // With every stage doing L/p layers, f = (L/p) * 1,000,000 ns per forward
  // and b = (L/p) * 2,000,000 ns per backward (plus another forward with full
  // recomputation), free transfers and zero-time embedding, logit, loss and
  // optimizer, both GPipe and 1F1B take (m + p - 1) * (f + b).
  // E.g. p = 4, m = 8, no recompute: f = 2,000,000, b = 4,000,000,
  // (8 + 3) * 6,000,000 = 66,000,000 ns; full recompute: b = 6,000,000,
  // 11 * 8,000,000 = 88,000,000 ns.
  const UnitTimes unit;
  ASSERT_EQ(unit.LayerForwardNs(), 1'000'000);
  ASSERT_EQ(unit.LayerBackwardNs(), 2'000'000);
  const PipelineCase kCases[] = {{1, 1}, {1, 4}, {2, 1},  {2, 3}, {2, 8}, {4, 2},
                                 {4, 4}, {4, 8}, {4, 13}, {8, 3}, {8, 8}, {8, 16}};
  for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B}) {
    for (Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
      for (Granularity granularity : {Granularity::kKernel, Granularity::kOperator}) {
        for (const PipelineCase& c : kCases) {
          SCOPED_TRACE(absl::StrCat(ScheduleName(schedule), " recompute=", RecomputeName(recompute),
                                    " ", GranularityName(granularity), " p=", c.p, " m=", c.m));
          const Job job = PipelineJob(1, 1, c.p, c.m, schedule, recompute);
          Built built;
          ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, granularity, &built));
          const int64_t layers = 8 / c.p;
          const int64_t f = layers * unit.LayerForwardNs();
          const int64_t b = layers * (unit.LayerBackwardNs() +
                                      (recompute == Recompute::kFull ? unit.LayerForwardNs() : 0));
          EXPECT_EQ(built.makespan_ns, (c.m + c.p - 1) * (f + b));
        }
      }
    }
  }
}

TEST(BuildIterationGraphTest, SelectiveRecomputationAddsTheAttentionCoreToEachBackward) {
  // p = 4, m = 8, 2 layers a stage: b = 2 * (2,000,000 + 150,000) with the
  // unit core of 150,000 ns; (8 + 3) * (2,000,000 + 4,300,000) = 69,300,000.
  for (bool sp : {false, true}) {
    Job job = PipelineJob(sp ? 2 : 1, 1, 4, 8, PipelineSchedule::k1F1B, Recompute::kSelective);
    job.plan.sequence_parallel = sp;
    Built built;
    ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, Granularity::kOperator, &built));
    EXPECT_EQ(built.makespan_ns, 69'300'000);
  }
}

TEST(BuildIterationGraphTest, ShardedDataParallelismKeepsTheClosedFormWithFreeLinks) {
  // One stage, m = 3, d = 2: 72,000,000 ns as with plain data parallelism.
  for (DataParallelSharding sharding :
       {DataParallelSharding::kOptimizer, DataParallelSharding::kFull}) {
    Job job = PipelineJob(1, 2, 1, 3, PipelineSchedule::k1F1B, Recompute::kNone);
    job.plan.data_parallel_sharding = sharding;
    Built built;
    ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, Granularity::kKernel, &built));
    EXPECT_EQ(built.makespan_ns, 72'000'000);
    EXPECT_GT(CountKind(built.graph.graph, TaskKind::kDataParallel), 0);
  }
}

TEST(BuildIterationGraphTest, InterleavedBubbleHasTheClosedForm) {
  // Narayanan et al. 2021, §2.2: with V chunks per stage the bubble shrinks
  // to (p - 1) / V of a micro-batch's forward and backward: the iteration
  // takes (m * V + p - 1) * (f_c + b_c) with f_c, b_c one chunk's passes.
  // 8 layers: p = 2, V = 2 gives 2-layer chunks (f_c = 2,000,000,
  // b_c = 4,000,000); p = 2, V = 4 and p = 4, V = 2 1-layer chunks.
  const UnitTimes unit;
  struct Case {
    int64_t p, v, m;
  };
  for (const Case& c : {Case{2, 2, 2}, Case{2, 2, 4}, Case{2, 2, 8}, Case{2, 4, 4}, Case{4, 2, 4},
                        Case{4, 2, 8}, Case{4, 2, 12}}) {
    for (Granularity granularity : {Granularity::kKernel, Granularity::kOperator}) {
      SCOPED_TRACE(
          absl::StrCat("p=", c.p, " V=", c.v, " m=", c.m, " ", GranularityName(granularity)));
      Job job = PipelineJob(1, 1, c.p, c.m, PipelineSchedule::k1F1B, Recompute::kNone);
      job.plan.virtual_stages = c.v;
      VTRAIN_ASSERT_OK(ValidateJob(job));
      Built built;
      ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, granularity, &built));
      const int64_t layers = 8 / (c.p * c.v);
      const int64_t chunk = layers * (unit.LayerForwardNs() + unit.LayerBackwardNs());
      EXPECT_EQ(built.makespan_ns, (c.m * c.v + c.p - 1) * chunk);
      // Bubble fraction (p - 1) / (V * m) of the ideal m * V chunk pairs.
      EXPECT_DOUBLE_EQ(static_cast<double>(built.makespan_ns - c.m * c.v * chunk) /
                           static_cast<double>(c.m * c.v * chunk),
                       static_cast<double>(c.p - 1) / static_cast<double>(c.v * c.m));
      // Pipeline transfers: V chunks of every micro-batch cross p * V - 1
      // boundaries each way.
      EXPECT_EQ(CountKind(built.graph.graph, TaskKind::kPipeline), 2 * c.m * (c.p * c.v - 1));
      // They run on each stage's own pipeline stream, overlapped with
      // compute as Megatron's default --overlap-p2p-communication does.
      const TaskGraph& g = built.graph.graph;
      EXPECT_EQ(g.num_streams(), 3 * c.p);
      for (const Task& task : g.tasks()) {
        if (task.kind != TaskKind::kPipeline) continue;
        EXPECT_TRUE(absl::EndsWith(g.stream_name(task.stream), "/pipeline"))
            << g.stream_name(task.stream);
      }
    }
  }
}

TEST(BuildIterationGraphTest, PipelineGoldenValues) {
  Built built;
  // p = 4, m = 8, GPipe, no recompute: (8 + 3) * (2,000,000 + 4,000,000).
  ASSERT_NO_FATAL_FAILURE(
      BuildAndSimulate(PipelineJob(1, 1, 4, 8, PipelineSchedule::kGpipe, Recompute::kNone),
                       Granularity::kKernel, &built));
  EXPECT_EQ(built.makespan_ns, 66'000'000);
  // Same with 1F1B and full recomputation: 11 * (2,000,000 + 6,000,000).
  ASSERT_NO_FATAL_FAILURE(
      BuildAndSimulate(PipelineJob(1, 1, 4, 8, PipelineSchedule::k1F1B, Recompute::kFull),
                       Granularity::kOperator, &built));
  EXPECT_EQ(built.makespan_ns, 88'000'000);
}

TEST(BuildIterationGraphTest, FreeTensorAndDataParallelismKeepTheClosedForm) {
  // t = 2 and d = 2 add TP and DP collectives; with free links they take
  // 0 ns, so one stage with m = 3 takes 3 * 8 * (1,000,000 + 2,000,000)
  // = 72,000,000 ns.
  for (bool bucketing : {false, true}) {
    Job job = PipelineJob(2, 2, 1, 3, PipelineSchedule::k1F1B, Recompute::kNone);
    job.plan.gradient_bucketing = bucketing;
    Built built;
    ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, Granularity::kKernel, &built));
    EXPECT_EQ(built.makespan_ns, 72'000'000);
    EXPECT_GT(CountKind(built.graph.graph, TaskKind::kTensorParallel), 0);
    EXPECT_GT(CountKind(built.graph.graph, TaskKind::kDataParallel), 0);
  }
}

TEST(BuildIterationGraphTest, StagesAndStreams) {
  Built built;
  ASSERT_NO_FATAL_FAILURE(
      BuildAndSimulate(PipelineJob(1, 1, 4, 5, PipelineSchedule::k1F1B, Recompute::kNone),
                       Granularity::kKernel, &built));
  const IterationGraph& ig = built.graph;
  EXPECT_EQ(ig.num_micro_batches, 5);
  ASSERT_EQ(ig.stages.size(), 4u);
  for (int64_t s = 0; s < 4; ++s) {
    SCOPED_TRACE(s);
    const StageInfo& info = ig.stages[s];
    EXPECT_EQ(info.first_layer, 2 * s);
    EXPECT_EQ(info.num_layers, 2);
    EXPECT_EQ(info.has_embedding, s == 0);
    EXPECT_EQ(info.has_logit, s == 3);
    EXPECT_EQ(info.tensor_parallel_ns, 0);
    EXPECT_NE(info.compute_stream, info.data_parallel_stream);
    EXPECT_LT(info.compute_stream, ig.graph.num_streams());
    EXPECT_LT(info.data_parallel_stream, ig.graph.num_streams());
    EXPECT_EQ(ig.graph.stream_name(info.compute_stream), absl::StrCat("stage", s, "/compute"));
    // Each stage has its own streams.
    for (int64_t other = 0; other < s; ++other) {
      EXPECT_NE(ig.stages[other].compute_stream, info.compute_stream);
      EXPECT_NE(ig.stages[other].data_parallel_stream, info.data_parallel_stream);
    }
    // 2 layers of 49,984 parameters, plus the embedding (512 * 64 + 128 * 64
    // = 40,960) on the first stage and the final layer-norm and the tied
    // embedding copy (2 * 64 + 512 * 64 = 32,896) on the last.
    const double expected = 99'968.0 + (s == 0 ? 40'960.0 : 0) + (s == 3 ? 32'896.0 : 0);
    EXPECT_DOUBLE_EQ(info.parameters_per_gpu, expected);
  }
}

TEST(BuildIterationGraphTest, TaskCountsAtBothGranularities) {
  // p = 2, m = 3, 8 layers (4 per stage), unit profile: 2 kernels per layer
  // operator, 1 per embedding, logit and loss operator.
  //  stage 0: forward 4 * 4 + 1 = 17 kernels, backward 17, optimizer 1:
  //    3 * 17 + 3 * 17 + 1 = 103;
  //  stage 1: forward 4 * 4 + 2 = 18, backward 18: 3 * 18 + 3 * 18 + 1 = 109;
  //  3 forward and 3 backward sends, 1 embedding all-reduce:
  //  103 + 109 + 6 + 1 = 219.
  // Operator granularity merges each pass into one task:
  //  (3 + 3 + 1) * 2 + 6 + 1 = 21.
  const Job job = PipelineJob(1, 1, 2, 3, PipelineSchedule::k1F1B, Recompute::kNone);
  Built kernel, op;
  ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, Granularity::kKernel, &kernel));
  ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, Granularity::kOperator, &op));
  EXPECT_EQ(kernel.graph.graph.num_tasks(), 219);
  EXPECT_EQ(op.graph.graph.num_tasks(), 21);
  EXPECT_EQ(CountKind(kernel.graph.graph, TaskKind::kPipeline), 6);
  EXPECT_EQ(CountKind(kernel.graph.graph, TaskKind::kDataParallel), 1);
  EXPECT_EQ(CountKind(kernel.graph.graph, TaskKind::kOptimizer), 2);
  EXPECT_EQ(kernel.makespan_ns, op.makespan_ns);
}

TEST(BuildIterationGraphTest, TensorParallelCollectivesAndGradientBuckets) {
  // p = 1, t = 2, d = 2, m = 2, 8 layers. Per forward: 1 (embedding) + 2 per
  // layer + 3 (cross-entropy) = 20 TP all-reduces; per backward: 1 (logit) +
  // 2 per layer = 17; m = 2: 74.
  Job job = PipelineJob(2, 2, 1, 2, PipelineSchedule::k1F1B, Recompute::kNone);
  Built built;
  ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, Granularity::kKernel, &built));
  EXPECT_EQ(CountKind(built.graph.graph, TaskKind::kTensorParallel), 74);
  EXPECT_EQ(CountKind(built.graph.graph, TaskKind::kDataParallel), 1);

  // One-byte buckets close after every group of gradients of the last
  // backward: the logit, each of the 8 layers and the embedding: 10.
  job.plan.gradient_bucketing = true;
  job.plan.bucket_size_bytes = 1;
  ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, Granularity::kKernel, &built));
  EXPECT_EQ(CountKind(built.graph.graph, TaskKind::kDataParallel), 10);
  Built op;
  ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, Granularity::kOperator, &op));
  EXPECT_EQ(CountKind(op.graph.graph, TaskKind::kDataParallel), 10);

  // Bucketing needs d > 1: with d = 1 there is no DP all-reduce at all.
  job = PipelineJob(2, 1, 1, 2, PipelineSchedule::k1F1B, Recompute::kNone);
  job.plan.gradient_bucketing = true;
  ASSERT_NO_FATAL_FAILURE(BuildAndSimulate(job, Granularity::kKernel, &built));
  EXPECT_EQ(CountKind(built.graph.graph, TaskKind::kDataParallel), 0);
}

TEST(BuildIterationGraphTest, MaxTasksIsExact) {
  // The kernel graph of TaskCountsAtBothGranularities has 219 tasks.
  const Job job = PipelineJob(1, 1, 2, 3, PipelineSchedule::k1F1B, Recompute::kNone);
  const ProfileSet set = UnitProfileSet(job);
  BuildOptions options;
  options.granularity = Granularity::kKernel;
  options.max_tasks = 219;
  {
    ProfileLookup lookup(set, job.cluster.gpu, BuilderLinks(job));
    VTRAIN_EXPECT_OK(BuildIterationGraph(job, lookup, options));
  }
  options.max_tasks = 218;
  ProfileLookup lookup(set, job.cluster.gpu, BuilderLinks(job));
  EXPECT_THAT(BuildIterationGraph(job, lookup, options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("219 tasks"), HasSubstr("max_tasks=218"),
                             HasSubstr("kernel granularity"))));
}

TEST(BuildIterationGraphTest, InvalidJobIsRejected) {
  Job job = TinyJob();
  job.plan.pipeline_parallel = 3;  // does not divide 8 layers, nor match 1 GPU
  const ProfileSet set = UnitProfileSet(TinyJob());
  ProfileLookup lookup(set, job.cluster.gpu, BuilderLinks(job));
  EXPECT_THAT(BuildIterationGraph(job, lookup, BuildOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plan.pipeline_parallel")));
}

TEST(GranularityTest, NamesRoundTrip) {
  for (Granularity g : {Granularity::kKernel, Granularity::kOperator}) {
    EXPECT_EQ(*ParseGranularity(GranularityName(g)), g);
  }
  EXPECT_THAT(ParseGranularity("layer"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("granularity")));
}

}  // namespace
}  // namespace vtrain
