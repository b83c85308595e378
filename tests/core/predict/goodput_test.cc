// The goodput model (core/predict/goodput.h): Daly's expected wall time, its
// optimum interval, the checkpoint's writers and size, asynchronous
// checkpointing, and the Llama 3 405B run's published reliability figures.
#include "core/predict/goodput.h"

#include <cmath>

#include "core/plan/search.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"

namespace vtrain {
namespace {

// gpt3-175b, t8 p8 d8 on 512 A100s (64 nodes), trained for 30 failure-free
// days of 20 s iterations.
Job Big() { return testing::PresetJob("gpt3-175b", 8, 8, 8, 1, 1536); }
constexpr double kIteration = 20;
constexpr double kThirtyDays = 30 * 86400.0;

Goodput GoodputAt(Job job, double interval_s) {
  job.cluster.reliability.checkpoint_interval_s = interval_s;
  return EstimateGoodput(job, kIteration, kThirtyDays);
}

TEST(GoodputTest, WithoutFailuresTheRunTakesItsFailureFreeTime) {
  Job job = Big();
  job.cluster.reliability.node_failures_per_1000_node_days = 0;
  const Goodput g = EstimateGoodput(job, kIteration, kThirtyDays);
  EXPECT_EQ(g.fraction, 1);
  EXPECT_EQ(g.expected_time_s, kThirtyDays);
  EXPECT_EQ(g.expected_interruptions, 0);
  EXPECT_EQ(g.checkpoint_interval_s, 0);
  // A checkpoint asked for still costs its blocking time.
  const Goodput asked = GoodputAt(job, 3600);
  EXPECT_NEAR(asked.expected_time_s, kThirtyDays * (1 + asked.checkpoint_blocking_s / 3600),
              1e-6 * kThirtyDays);
}

TEST(GoodputTest, TheCheckpointIsFourteenBytesAParameterWrittenByItsWriters) {
  Job job = Big();
  const Goodput g = EstimateGoodput(job, kIteration, kThirtyDays);
  EXPECT_NEAR(g.checkpoint_bytes, 14 * ModelParameterCount(job.model), 1);
  // No sharded optimizer: one replica's t x p = 64 GPUs, 8 nodes, write it.
  EXPECT_EQ(g.writer_nodes, 8);
  EXPECT_NEAR(g.checkpoint_write_s, g.checkpoint_bytes / (8 * 16e9 / 8), 1e-6);
  EXPECT_EQ(g.checkpoint_blocking_s, g.checkpoint_write_s);
  // Every node reads its part back at restart, after the restart minutes.
  EXPECT_NEAR(g.restart_s, 600 + g.checkpoint_bytes / (64 * 2e9), 1e-6);
  job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
  const Goodput sharded = EstimateGoodput(job, kIteration, kThirtyDays);
  EXPECT_EQ(sharded.writer_nodes, 64);
  EXPECT_NEAR(sharded.checkpoint_write_s * 8, g.checkpoint_write_s, 1e-6);
  EXPECT_GT(sharded.fraction, g.fraction);
}

TEST(GoodputTest, FailuresArriveAtTheNodesRate) {
  const Goodput g = EstimateGoodput(Big(), kIteration, kThirtyDays);
  // 64 nodes at 6.5 failures per 1,000 node-days.
  EXPECT_NEAR(g.job_mtbf_s, 86400 / (64 * 0.0065), 1e-3);
  EXPECT_NEAR(g.expected_interruptions, g.expected_time_s / g.job_mtbf_s, 1e-9);
  EXPECT_GT(g.expected_time_s, kThirtyDays);
  EXPECT_NEAR(g.fraction, kThirtyDays / g.expected_time_s, 1e-12);
  // Roughly 30 days x 64 nodes x 0.0065 = 12.5 interruptions.
  EXPECT_NEAR(g.expected_interruptions, 12.5, 1.5);
}

TEST(GoodputTest, DalysIntervalIsTheBestInterval) {
  const Goodput best = EstimateGoodput(Big(), kIteration, kThirtyDays);
  // Young's first-order interval sqrt(2 delta M), when delta << M.
  const double young = std::sqrt(2 * best.checkpoint_blocking_s * best.job_mtbf_s);
  EXPECT_NEAR(best.checkpoint_interval_s, young, 0.05 * young);
  EXPECT_EQ(std::fmod(best.checkpoint_interval_s, kIteration), 0);
  for (double factor : {0.25, 0.5, 0.8, 1.25, 2.0, 4.0}) {
    const Goodput other = GoodputAt(Big(), best.checkpoint_interval_s * factor);
    EXPECT_LE(best.expected_time_s, other.expected_time_s * (1 + 1e-9)) << factor;
  }
}

TEST(GoodputTest, LostWorkIsAboutHalfAnInterval) {
  const Goodput g = EstimateGoodput(Big(), kIteration, kThirtyDays);
  const double half = (g.checkpoint_interval_s + g.checkpoint_blocking_s) / 2;
  EXPECT_NEAR(g.lost_work_per_failure_s, half, 0.1 * half);
}

TEST(GoodputTest, MoreNodesAndHigherRatesLoseMore) {
  Job job = Big();
  const double base = EstimateGoodput(job, kIteration, kThirtyDays).fraction;
  job.cluster.reliability.node_failures_per_1000_node_days = 20;
  EXPECT_LT(EstimateGoodput(job, kIteration, kThirtyDays).fraction, base);
  Job wide = testing::PresetJob("gpt3-175b", 8, 32, 8, 1, 1536);
  EXPECT_LT(EstimateGoodput(wide, kIteration, kThirtyDays).fraction, base);
  job = Big();
  job.cluster.reliability.restart_minutes = 60;
  EXPECT_LT(EstimateGoodput(job, kIteration, kThirtyDays).fraction, base);
}

TEST(GoodputTest, AsynchronousCheckpointsBlockOnlyForTheCopy) {
  Job job = Big();
  const Goodput sync = EstimateGoodput(job, kIteration, kThirtyDays);
  job.cluster.reliability.async_checkpoint = true;
  const Goodput async = EstimateGoodput(job, kIteration, kThirtyDays);
  // One replica's 64 GPUs each copy 1/64 of the checkpoint at 25 GB/s.
  EXPECT_NEAR(async.checkpoint_blocking_s, async.checkpoint_bytes / 64 / 25e9, 1e-9);
  EXPECT_LT(async.checkpoint_blocking_s, sync.checkpoint_blocking_s);
  EXPECT_LT(async.checkpoint_interval_s, sync.checkpoint_interval_s);
  EXPECT_GT(async.fraction, sync.fraction);
}

TEST(GoodputTest, ARunThatCannotOutpaceItsFailuresNeverEnds) {
  Job job = Big();
  job.cluster.reliability.node_failures_per_1000_node_days = 1000;
  job.cluster.reliability.checkpoint_gbps = 0.001;
  job.cluster.reliability.restart_minutes = 10080;
  const Goodput g = EstimateGoodput(job, kIteration, kThirtyDays);
  EXPECT_FALSE(std::isnan(g.fraction));
  EXPECT_LT(g.fraction, 1e-6);
  EXPECT_FALSE(std::isnan(g.expected_time_s));
}

// Llama 3.1 405B as Meta trained it (Llama 3 paper, §3.3): 16,384 H100, t8
// p16 d128, 2,048 sequences of 8,192 tokens, bf16, 15.6T tokens. Over a
// 54-day snapshot the team saw 419 unexpected interruptions and kept more
// than 90% effective training time. With the defaults (a rate from another
// cluster) the expected interruptions are within a factor of two and the
// goodput within 0.80-0.97.
TEST(GoodputTest, Llama3_405bIsWithinThePublishedFigures) {
  Job job = testing::PresetJob("llama3.1-405b", 8, 128, 16, 1, 2048);
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 16384);
  job.model.seq_len = 8192;
  job.plan.dtype = DType::kBf16;
  job.plan.sequence_parallel = true;
  job.plan.virtual_stages = 8;
  job.plan.recompute = Recompute::kNone;
  job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
  PredictOptions options;
  options.train_tokens = 15.6e12;
  absl::StatusOr<Prediction> p = Predict(job, DefaultProfileSet(job.cluster.gpu), options);
  ASSERT_TRUE(p.ok()) << p.status();
  const Goodput& g = p->goodput;
  const double per_54_days = g.expected_interruptions * 54 * 86400 / g.expected_time_s;
  EXPECT_GE(per_54_days, 419 / 2.0);
  EXPECT_LE(per_54_days, 419 * 2.0);
  EXPECT_GE(g.fraction, 0.80);
  EXPECT_LE(g.fraction, 0.97);
}

}  // namespace
}  // namespace vtrain

namespace vtrain {
namespace {

SearchSpace PricedSpace() {
  SearchSpace s;
  s.model = *ModelPreset("gpt3-2.7b");
  s.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  s.cluster.price_usd_per_gpu_hour = 4.096;
  // A high failure rate and slow storage, so that failures reorder plans.
  s.cluster.reliability.node_failures_per_1000_node_days = 200;
  s.cluster.reliability.checkpoint_gbps = 0.5;
  s.global_batch = 128;
  s.max_gpus = 32;
  s.train_tokens = 300e9;
  return s;
}

// The cost objective and deadlines rank by the expected figures, which
// every plan carries next to its failure-free ones.
TEST(GoodputSearchTest, CostAndDeadlinesUseTheExpectedFigures) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  SearchOptions o;
  o.objective = Objective::kCost;
  absl::StatusOr<SearchResult> r = Search(PricedSpace(), profiles, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GE(r->best, 0);
  for (const PlanResult& p : r->plans) {
    EXPECT_GT(p.expected_days, p.training_days);
    EXPECT_GT(p.expected_cost_usd, p.cost_usd);
    EXPECT_NEAR(p.goodput, p.training_days / p.expected_days, 1e-9);
    EXPECT_GE(p.expected_cost_usd, r->plans[r->best].expected_cost_usd);
  }
  // A deadline between a plan's failure-free and expected days rules it out.
  const PlanResult& fastest = r->plans.front();
  o.objective = Objective::kCostUnderDeadline;
  o.deadline_days = (fastest.training_days + fastest.expected_days) / 2;
  absl::StatusOr<SearchResult> tight = Search(PricedSpace(), profiles, o);
  ASSERT_TRUE(tight.ok()) << tight.status();
  for (const PlanResult& p : tight->plans) {
    if (p.training_days <= o.deadline_days) {
      EXPECT_GT(p.expected_days, o.deadline_days);  // every plan is slower than the fastest
    }
  }
  EXPECT_EQ(tight->best, -1);
  EXPECT_NE(tight->no_plan_reason.find("with failures"), std::string::npos)
      << tight->no_plan_reason;
}

}  // namespace
}  // namespace vtrain
