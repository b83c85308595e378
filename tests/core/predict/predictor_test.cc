#include "core/predict/predictor.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/unit_profile.h"

namespace vtrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::vtrain::testing::DescribeJob;
using ::vtrain::testing::Gpt13bJob;
using ::vtrain::testing::RandomSmallJob;
using ::vtrain::testing::StatusIs;
using ::vtrain::testing::TinyJob;
using ::vtrain::testing::UnitProfileSet;
using ::vtrain::testing::UseFreeLinks;
using ::vtrain::testing::WithPlan;

PredictOptions At(Granularity granularity) {
  PredictOptions options;
  options.granularity = granularity;
  return options;
}

absl::StatusOr<Prediction> PredictDefault(const Job& job, Granularity granularity) {
  return Predict(job, DefaultProfileSet(job.cluster.gpu), At(granularity));
}

int64_t StageTotal(const StageBreakdown& s) {
  return s.compute_ns + s.tensor_parallel_ns + s.context_parallel_ns + s.expert_parallel_ns +
         s.pipeline_exposed_ns + s.data_parallel_exposed_ns + s.idle_ns;
}

TEST(PredictDifferentialTest, KernelAndOperatorGranularityAgreeExactly) {
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    const Job job = RandomSmallJob(seed);
    SCOPED_TRACE(absl::StrCat("seed ", seed, ": ", DescribeJob(job)));
    ASSERT_THAT(ValidateJob(job), vtrain::testing::IsOk());
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction kernel, PredictDefault(job, Granularity::kKernel));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction op, PredictDefault(job, Granularity::kOperator));
    EXPECT_GT(kernel.iteration_time_ns, 0);
    EXPECT_EQ(kernel.iteration_time_ns, op.iteration_time_ns);
    EXPECT_GE(kernel.num_tasks, op.num_tasks);
    // Every answer is timed and counts what it simulated.
    EXPECT_GT(kernel.simulation.wall_ns, 0);
    EXPECT_GT(op.simulation.wall_ns, 0);
    EXPECT_EQ(kernel.simulation.tasks, kernel.num_tasks);
    EXPECT_EQ(kernel.simulation.actions, 2 * job.plan.pipeline_parallel * kernel.num_micro_batches);
    EXPECT_EQ(op.simulation.actions + op.simulation.actions_skipped, kernel.simulation.actions);
    ASSERT_EQ(kernel.stages.size(), op.stages.size());
    for (size_t s = 0; s < kernel.stages.size(); ++s) {
      SCOPED_TRACE(absl::StrCat("stage ", s));
      const StageBreakdown& k = kernel.stages[s];
      const StageBreakdown& o = op.stages[s];
      EXPECT_EQ(k.compute_ns, o.compute_ns);
      EXPECT_EQ(k.tensor_parallel_ns, o.tensor_parallel_ns);
      EXPECT_EQ(k.pipeline_exposed_ns, o.pipeline_exposed_ns);
      EXPECT_EQ(k.data_parallel_exposed_ns, o.data_parallel_exposed_ns);
      EXPECT_EQ(k.idle_ns, o.idle_ns);
      EXPECT_EQ(k.tensor_parallel_hidden_ns, o.tensor_parallel_hidden_ns);
      EXPECT_EQ(k.data_parallel_hidden_ns, o.data_parallel_hidden_ns);
      EXPECT_EQ(k.parameters_per_gpu, o.parameters_per_gpu);
      // The parts add up to the iteration time, at both granularities.
      EXPECT_EQ(StageTotal(k), kernel.iteration_time_ns);
      EXPECT_EQ(StageTotal(o), op.iteration_time_ns);
    }
    if (HasFailure()) return;
  }
}

// Megatron-Core's overlaps charge only what stays exposed, and the breakdown
// reports the rest as hidden: TP time exposed plus hidden is the TP time
// without the overlap; a data-parallel collective the stage waits for whole
// hides nothing.
TEST(PredictTest, OverlapsChargeOnlyWhatStaysExposed) {
  Job job = Gpt13bJob();  // gpt3-1.3b, t=2 d=4 p=1 on 8 A100
  job.plan.sequence_parallel = true;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction plain, PredictDefault(job, Granularity::kOperator));
  job.plan.tp_comm_overlap = true;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction tp, PredictDefault(job, Granularity::kOperator));
  EXPECT_LT(tp.iteration_time_ns, plain.iteration_time_ns);
  ASSERT_EQ(tp.stages.size(), plain.stages.size());
  for (size_t s = 0; s < tp.stages.size(); ++s) {
    EXPECT_EQ(plain.stages[s].tensor_parallel_hidden_ns, 0);
    EXPECT_GT(tp.stages[s].tensor_parallel_hidden_ns, 0);
    EXPECT_EQ(tp.stages[s].tensor_parallel_ns + tp.stages[s].tensor_parallel_hidden_ns,
              plain.stages[s].tensor_parallel_ns);
    EXPECT_EQ(StageTotal(tp.stages[s]), tp.iteration_time_ns);
  }
  // One stage, four replicas: without bucketing the optimizer waits for the
  // all-reduce (all but the backward's last dispatch gap, which runs beside
  // it); with bucketing most of the reduction runs under the backward.
  Job dp = WithPlan(Gpt13bJob(), 8, 4, 1, 1, 16);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction waited, PredictDefault(dp, Granularity::kOperator));
  EXPECT_GT(waited.stages[0].data_parallel_exposed_ns, 0);
  EXPECT_LT(waited.stages[0].data_parallel_hidden_ns,
            waited.stages[0].data_parallel_exposed_ns / 100);
  dp.plan.gradient_bucketing = true;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction bucketed,
                              PredictDefault(dp, Granularity::kOperator));
  EXPECT_GT(bucketed.stages[0].data_parallel_hidden_ns, 0);
  EXPECT_LT(bucketed.stages[0].data_parallel_exposed_ns, waited.stages[0].data_parallel_exposed_ns);
  // The distributed optimizer's parameter gather is data-parallel time, not
  // compute; under the next forward all but its first bucket hides.
  dp.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction zero1, PredictDefault(dp, Granularity::kOperator));
  dp.plan.param_gather_overlap = true;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction gathered,
                              PredictDefault(dp, Granularity::kOperator));
  EXPECT_LT(gathered.iteration_time_ns, zero1.iteration_time_ns);
  EXPECT_EQ(gathered.stages[0].compute_ns, zero1.stages[0].compute_ns);
  EXPECT_EQ(zero1.iteration_time_ns - gathered.iteration_time_ns,
            zero1.stages[0].data_parallel_exposed_ns - gathered.stages[0].data_parallel_exposed_ns);
  EXPECT_EQ(StageTotal(gathered.stages[0]), gathered.iteration_time_ns);
}

// Megatron-LM's fp32 gradient buffer reduces 4-byte gradients: the
// data-parallel reduction moves twice the bytes, the compute is unchanged.
TEST(PredictTest, Fp32GradientsDoubleTheReductionsBytes) {
  Job job = WithPlan(Gpt13bJob(), 8, 4, 1, 1, 16);
  job.plan.dtype = DType::kBf16;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction half, PredictDefault(job, Granularity::kOperator));
  job.plan.fp32_grads = true;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction full, PredictDefault(job, Granularity::kOperator));
  EXPECT_EQ(full.stages[0].compute_ns, half.stages[0].compute_ns);
  const double half_dp = static_cast<double>(half.stages[0].data_parallel_exposed_ns +
                                             half.stages[0].data_parallel_hidden_ns);
  const double full_dp = static_cast<double>(full.stages[0].data_parallel_exposed_ns +
                                             full.stages[0].data_parallel_hidden_ns);
  ASSERT_GT(half_dp, 0);
  // Twice the bytes over the same link: between 1.5x (fixed latency) and 2x.
  EXPECT_GT(full_dp, 1.5 * half_dp);
  EXPECT_LE(full_dp, 2 * half_dp + 1);
  EXPECT_GT(full.iteration_time_ns, half.iteration_time_ns);
}

TEST(PredictTest, InterleavedChunksReduceTheirGradientsUnderTheOthersBackward) {
  // gpt3-1.3b's 24 layers on t=2 d=4 p=2 with two chunks per stage: with
  // bucketing on, the chunk finishing its backward first reduces its
  // gradients during the other chunk's cool-down, so less stays exposed; the
  // compute is the same.
  Job job = WithPlan(Gpt13bJob(), 2, 4, 2, 1, 64);
  job.cluster.num_gpus = 16;
  job.plan.virtual_stages = 2;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction whole, PredictDefault(job, Granularity::kOperator));
  job.plan.gradient_bucketing = true;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction chunked,
                              PredictDefault(job, Granularity::kOperator));
  ASSERT_EQ(chunked.stages.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(chunked.stages[s].compute_ns, whole.stages[s].compute_ns);
    EXPECT_LT(chunked.stages[s].data_parallel_exposed_ns, whole.stages[s].data_parallel_exposed_ns)
        << s;
    EXPECT_EQ(StageTotal(chunked.stages[s]), chunked.iteration_time_ns);
  }
  // (The last stage's wait also covers the tied embedding's all-reduce on
  // the first stage's stream, so its hidden share reads 0.)
  EXPECT_GT(chunked.stages[0].data_parallel_hidden_ns, 0);
  EXPECT_LT(chunked.iteration_time_ns, whole.iteration_time_ns);
}

TEST(PredictPropertyTest, MoreLayersIsNeverFaster) {
  for (uint64_t seed = 200; seed < 240; ++seed) {
    const Job job = RandomSmallJob(seed);
    SCOPED_TRACE(absl::StrCat("seed ", seed, ": ", DescribeJob(job)));
    Job deeper = job;
    deeper.model.num_layers += job.plan.pipeline_parallel;  // one more layer per stage
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction a, PredictDefault(job, Granularity::kOperator));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction b, PredictDefault(deeper, Granularity::kOperator));
    EXPECT_LE(a.iteration_time_ns, b.iteration_time_ns);
    if (HasFailure()) return;
  }
}

TEST(PredictPropertyTest, MoreBandwidthIsNeverSlower) {
  for (uint64_t seed = 300; seed < 340; ++seed) {
    const Job job = RandomSmallJob(seed);
    SCOPED_TRACE(absl::StrCat("seed ", seed, ": ", DescribeJob(job)));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction base, PredictDefault(job, Granularity::kOperator));
    for (double factor : {1.5, 4.0}) {
      Job intra = job;
      intra.cluster.intra_node_bandwidth_bytes_per_s *= factor;
      Job inter = job;
      inter.cluster.inter_node_bandwidth_bytes_per_s *= factor;
      VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction a,
                                  PredictDefault(intra, Granularity::kOperator));
      VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction b,
                                  PredictDefault(inter, Granularity::kOperator));
      EXPECT_LE(a.iteration_time_ns, base.iteration_time_ns) << "intra x" << factor;
      EXPECT_LE(b.iteration_time_ns, base.iteration_time_ns) << "inter x" << factor;
    }
    if (HasFailure()) return;
  }
}

TEST(PredictPropertyTest, SlowerNetworkIsSlowerForRealisticJob) {
  // Not only "never slower": gpt3-1.3b with t = 2 all-reduces activations
  // over NVLink on the critical path, so a 100x slower NVLink shows.
  const Job job = Gpt13bJob();
  Job slow = job;
  slow.cluster.intra_node_bandwidth_bytes_per_s /= 100;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction a, PredictDefault(job, Granularity::kOperator));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction b, PredictDefault(slow, Granularity::kOperator));
  EXPECT_LT(a.iteration_time_ns, b.iteration_time_ns);
}

TEST(PredictTest, UnitProfileGoldenAndDerivedFigures) {
  // TinyJob with p = 2, m = 4, GPipe, no recompute on the unit profile:
  // f = 4 * 1,000,000, b = 4 * 2,000,000,
  // (4 + 2 - 1) * 12,000,000 = 60,000,000 ns.
  Job job = WithPlan(TinyJob(), 1, 1, 2, 1, 4);
  job.plan.schedule = PipelineSchedule::kGpipe;
  UseFreeLinks(job);
  job.cluster.price_usd_per_gpu_hour = 2.0;
  PredictOptions options;
  options.train_tokens = 1'000'000;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p, Predict(job, UnitProfileSet(job), options));
  EXPECT_EQ(p.iteration_time_ns, 60'000'000);
  EXPECT_DOUBLE_EQ(p.iteration_time_ms(), 60.0);
  EXPECT_EQ(p.num_micro_batches, 4);
  EXPECT_EQ(p.profile_set, "unit");
  ASSERT_EQ(p.stages.size(), 2u);
  for (const StageBreakdown& s : p.stages) {
    // 4 forwards and 4 backwards of 4 layers: 4 * 12,000,000 = 48,000,000;
    // the rest, 12,000,000, is the pipeline bubble.
    EXPECT_EQ(s.compute_ns, 48'000'000);
    EXPECT_EQ(s.tensor_parallel_ns, 0);
    EXPECT_EQ(s.idle_ns + s.pipeline_exposed_ns + s.data_parallel_exposed_ns, 12'000'000);
    EXPECT_EQ(StageTotal(s), p.iteration_time_ns);
  }
  // Model FLOPs: 3 * tokens * (L * (8h^2 + 4hf + 4sh) + 2hV), tokens =
  // 4 * 128 = 512, h = 64, f = 256, s = 128, V = 512:
  // 8 * (32,768 + 65,536 + 32,768) + 65,536 = 1,114,112 per token;
  // 3 * 512 * 1,114,112 = 1,711,276,032.
  EXPECT_DOUBLE_EQ(p.model_flops, 1'711'276'032.0);
  EXPECT_DOUBLE_EQ(ModelFlopsPerIteration(job), 1'711'276'032.0);
  EXPECT_DOUBLE_EQ(p.hardware_flops, p.model_flops);  // no recompute
  // 512 tokens in 0.06 s.
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 512 / 0.06);
  // 2 GPUs at 312 TFLOP/s for 0.06 s.
  EXPECT_DOUBLE_EQ(p.mfu, 1'711'276'032.0 / (0.06 * 2 * 312e12));
  // 1,000,000 tokens / 512 per iteration = 1953.1: 1954 iterations,
  // 117.24 s, 2 GPUs: 0.06513 GPU-hours at $2.
  EXPECT_EQ(p.iterations, 1954);
  EXPECT_DOUBLE_EQ(p.training_time_s, 1954 * 0.06);
  EXPECT_DOUBLE_EQ(p.gpu_hours, 1954 * 0.06 / 3600 * 2);
  EXPECT_DOUBLE_EQ(p.cost_usd, p.gpu_hours * 2.0);
}

TEST(PredictTest, RecomputationCountsAsHardwareFlops) {
  Job job = TinyJob();
  job.plan.recompute = Recompute::kFull;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p, PredictDefault(job, Granularity::kOperator));
  // One more forward of the layers: tokens * L * (8h^2 + 4hf + 4sh)
  // = 512 * 8 * 131,072 = 536,870,912.
  EXPECT_DOUBLE_EQ(p.hardware_flops - p.model_flops, 536'870'912.0);
  EXPECT_GT(p.hfu, p.mfu);
  // Selective: the attention core only, 4*s*h = 4 * 128 * 64 = 32,768 per
  // token and layer: 512 * 8 * 32,768 = 134,217,728.
  job.plan.recompute = Recompute::kSelective;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction selective,
                              PredictDefault(job, Granularity::kOperator));
  EXPECT_DOUBLE_EQ(selective.hardware_flops - selective.model_flops, 134'217'728.0);
}

TEST(PredictTest, FidelityWithDefaultProfilesIsAllAnalytical) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p,
                              PredictDefault(Gpt13bJob(), Granularity::kOperator));
  const FidelitySummary& f = p.fidelity;
  EXPECT_EQ(f.worst, Fidelity::kAnalytical);
  EXPECT_EQ(f.lookups[static_cast<int>(Fidelity::kMeasured)], 0);
  EXPECT_EQ(f.lookups[static_cast<int>(Fidelity::kInterpolated)], 0);
  EXPECT_GT(f.lookups[static_cast<int>(Fidelity::kAnalytical)], 0);
  EXPECT_EQ(static_cast<int64_t>(f.records.size()),
            f.lookups[static_cast<int>(Fidelity::kAnalytical)]);
  for (const LookupRecord& r : f.records) EXPECT_EQ(r.fidelity, Fidelity::kAnalytical) << r.key;
  EXPECT_THAT(f.missing_keys, Not(IsEmpty()));
  EXPECT_EQ(f.missing_keys.size(), f.records.size());
  EXPECT_EQ(p.profile_set, "builtin-a100-sxm4-80gb");
}

TEST(PredictTest, FidelityWithUnitProfilesHasMeasuredOperators) {
  Job job = WithPlan(TinyJob(), 1, 1, 2, 1, 4);
  UseFreeLinks(job);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p, Predict(job, UnitProfileSet(job)));
  // Measured: the 10 layer, embedding, logit and loss operators and 2
  // optimizer steps; analytical: the send/recv and the embedding all-reduce.
  EXPECT_EQ(p.fidelity.lookups[static_cast<int>(Fidelity::kMeasured)], 12);
  EXPECT_EQ(p.fidelity.lookups[static_cast<int>(Fidelity::kAnalytical)], 2);
  EXPECT_EQ(p.fidelity.worst, Fidelity::kAnalytical);
  EXPECT_EQ(p.fidelity.missing_keys.size(), 2u);
}

TEST(PredictTest, TinyMaxTasksIsResourceExhausted) {
  PredictOptions options;
  options.max_tasks = 10;
  EXPECT_THAT(Predict(Gpt13bJob(), DefaultProfileSet(*GpuByName("a100-sxm4-80gb")), options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("max_tasks=10"), HasSubstr("operator granularity"))));
}

TEST(PredictTest, InvalidJobIsInvalidArgument) {
  Job job = Gpt13bJob();
  job.plan.tensor_parallel = 3;
  EXPECT_THAT(PredictDefault(job, Granularity::kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plan.tensor_parallel")));
}

TEST(PredictTest, CancelledIsReportedAtBothGranularities) {
  // Both paths poll the callback every 65,536 tasks. 8 stages with m
  // micro-batches have at least 8 * 2 * m tasks (one per pass): m = 4,096
  // gives 65,536+ kernel-granularity tasks (far more: one per kernel) and
  // m = 16,384 gives 262,144+ operator-granularity tasks.
  for (Granularity granularity : {Granularity::kKernel, Granularity::kOperator}) {
    SCOPED_TRACE(GranularityName(granularity));
    const int64_t m = granularity == Granularity::kKernel ? 4096 : 16384;
    const Job job = WithPlan(TinyJob(), 1, 1, 8, 1, m);
    const ProfileSet profiles = DefaultProfileSet(job.cluster.gpu);
    int calls = 0;
    PredictOptions options = At(granularity);
    options.cancelled = [&calls] {
      ++calls;
      return true;
    };
    EXPECT_THAT(Predict(job, profiles, options), StatusIs(absl::StatusCode::kCancelled));
    EXPECT_GE(calls, 1);
    // Never cancelled: runs to the end, polled along the way.
    calls = 0;
    options.cancelled = [&calls] {
      ++calls;
      return false;
    };
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p, Predict(job, profiles, options));
    EXPECT_GE(p.num_tasks, 16 * m);
    EXPECT_GE(calls, 1);
    // Polled for the tasks run; once more for those the periodic fast path
    // jumped over.
    EXPECT_GE(calls, p.simulation.tasks / 65'536 - 1);
    EXPECT_LE(p.simulation.tasks, p.num_tasks);
  }
}

}  // namespace
}  // namespace vtrain

namespace vtrain {
namespace {

// Regression (issue 12): a huge-model plan was refused only after seconds of
// generating its optimizer step's kernels; now it is refused before any
// expensive work, naming the stage and the fix.
TEST(PredictorLimitsTest, WeightsFarBeyondAGpuAreRefusedUpFront) {
  Job job;
  job.model.name = "custom";
  job.model.num_layers = 100'000;
  job.model.hidden_size = 65536;
  job.model.num_heads = 512;
  job.model.seq_len = 2048;
  job.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 8);
  job.plan.pipeline_parallel = 8;
  job.plan.global_batch = 1'000'000;
  ASSERT_TRUE(ValidateJob(job).ok());
  absl::StatusOr<Prediction> p = Predict(job, DefaultProfileSet(job.cluster.gpu));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find("plan.pipeline_parallel"), std::string::npos) << p.status();
}

TEST(PredictorLimitsTest, KernelGraphsOverTheMemoryLimitAreRefusedBeforeAllocation) {
  const Job job = testing::Gpt13bJob();
  PredictOptions options;
  options.granularity = Granularity::kKernel;
  options.max_graph_bytes = 1 << 16;  // this graph: 22,818 tasks at 8 bytes a task
  absl::StatusOr<Prediction> p = Predict(job, DefaultProfileSet(job.cluster.gpu), options);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find("MiB at kernel granularity"), std::string::npos)
      << p.status();
  options.max_graph_bytes = int64_t{1} << 30;
  EXPECT_TRUE(Predict(job, DefaultProfileSet(job.cluster.gpu), options).ok());
  // The operator path stores no graph: the limit does not apply.
  options.granularity = Granularity::kOperator;
  options.max_graph_bytes = 1 << 20;
  EXPECT_TRUE(Predict(job, DefaultProfileSet(job.cluster.gpu), options).ok());
}

}  // namespace
}  // namespace vtrain

namespace vtrain {
namespace {

// Regression (issue 12): kernels at the largest duration a set may hold, over
// 800k micro-batches, overflowed the simulation's int64 clock (the result came
// out faster than 300k micro-batches, with negative compute time). Such an
// iteration is now refused before simulating.
TEST(PredictorLimitsTest, IterationsBeyondTheClockAreRefusedNotWrapped) {
  Job job = testing::Gpt13bJob();
  job.plan.global_batch = 800'000 * job.plan.data_parallel;
  ProfileSet set = DefaultProfileSet(job.cluster.gpu);
  absl::StatusOr<Prediction> probe = Predict(job, set);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_GT(probe->iteration_time_ns, 0);
  for (const LookupRecord& r : probe->fidelity.records) {
    absl::StatusOr<OperatorKey> key = ParseOperatorKey(r.key);
    if (!key.ok() || key->op != OperatorKind::kAttentionFwd) continue;
    OperatorProfile slow;
    slow.kernels = {{"slowest_allowed", int64_t{1} << 40, 0, 0}};
    set.operators.insert_or_assign(*key, slow);
  }
  absl::StatusOr<Prediction> p = Predict(job, set);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
  EXPECT_NE(p.status().message().find("years"), std::string::npos) << p.status();
}

}  // namespace
}  // namespace vtrain
