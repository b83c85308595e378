#include "core/plan/curve.h"

#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

CurveSpec Gpt13bSpec(CurvePolicy policy) {
  CurveSpec spec;
  spec.model = *ModelPreset("gpt3-1.3b");
  spec.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  spec.global_batch = 128;
  spec.gpu_counts = {8, 16, 24, 32, 64};
  spec.policy = policy;
  return spec;
}

TEST(CurveTest, TheBestPlanIsNeverSlowerThanDataParallelScaling) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<CurvePoint> best,
                              ThroughputCurve(Gpt13bSpec(CurvePolicy::kBest), profiles));
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<CurvePoint> dp,
                              ThroughputCurve(Gpt13bSpec(CurvePolicy::kDataParallel), profiles));
  ASSERT_EQ(best.size(), 5u);
  ASSERT_EQ(dp.size(), 5u);
  for (size_t i = 0; i < best.size(); ++i) {
    EXPECT_EQ(best[i].gpus, dp[i].gpus);
    ASSERT_TRUE(best[i].fits) << best[i].gpus;
    EXPECT_EQ(best[i].job.cluster.num_gpus, best[i].gpus);
    EXPECT_NEAR(best[i].tokens_per_s, best[i].samples_per_s * 2048, 1e-6 * best[i].tokens_per_s);
    EXPECT_GT(best[i].interval_high_ms, best[i].iteration_time_ms);
    if (dp[i].fits) {
      EXPECT_GE(best[i].samples_per_s, dp[i].samples_per_s * (1 - 1e-9)) << best[i].gpus;
      // The data-parallel policy keeps one footprint and scales d only.
      EXPECT_EQ(dp[i].job.plan.tensor_parallel * dp[i].job.plan.pipeline_parallel,
                dp[0].job.plan.tensor_parallel * dp[0].job.plan.pipeline_parallel);
    }
  }
  // 24 GPUs: 128 sequences do not split over 24 / (t*p) replicas of a
  // power-of-two footprint, so scaling by d has no plan there.
  EXPECT_FALSE(dp[2].fits);
}

// On a leaf/spine fabric each point also prices fragmentation: its plan with
// the nodes spread over the cluster's leaves, never faster than packed, and
// slower once the plan's rings cross leaves; on a flat fabric there is none.
TEST(CurveTest, LeafSpineFabricsPriceFragmentation) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<CurvePoint> flat,
                              ThroughputCurve(Gpt13bSpec(CurvePolicy::kDataParallel), profiles));
  for (const CurvePoint& p : flat) EXPECT_EQ(p.fragmented_samples_per_s, 0) << p.gpus;
  CurveSpec spec = Gpt13bSpec(CurvePolicy::kDataParallel);
  spec.cluster.fabric.nodes_per_leaf = 2;
  spec.cluster.fabric.oversubscription = 4;
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<CurvePoint> fabric, ThroughputCurve(spec, profiles));
  ASSERT_EQ(fabric.size(), flat.size());
  for (size_t i = 0; i < fabric.size(); ++i) {
    EXPECT_EQ(fabric[i].fits, flat[i].fits) << fabric[i].gpus;
    if (!fabric[i].fits) continue;
    EXPECT_LE(fabric[i].fragmented_samples_per_s, fabric[i].samples_per_s) << fabric[i].gpus;
    EXPECT_NEAR(fabric[i].fragmented_samples_per_s,
                128 / (fabric[i].fragmented_iteration_time_ms / 1e3),
                1e-9 * fabric[i].samples_per_s);
  }
  // 8 and 16 GPUs sit under one leaf of 2 nodes: nothing to spread. 64 GPUs
  // (8 nodes on 4 leaves) all-reduce across leaves.
  EXPECT_DOUBLE_EQ(fabric[0].fragmented_samples_per_s, fabric[0].samples_per_s);
  EXPECT_DOUBLE_EQ(fabric[1].fragmented_samples_per_s, fabric[1].samples_per_s);
  EXPECT_LT(fabric[4].fragmented_samples_per_s, fabric[4].samples_per_s);
  // With a leaf's uplinks full of other jobs' traffic: a packed plan under
  // one leaf feels nothing, one that crosses leaves (64 GPUs) is slower,
  // and a spread plan is slower still than spread alone.
  EXPECT_DOUBLE_EQ(fabric[0].contended_iteration_time_ms, fabric[0].iteration_time_ms);
  EXPECT_GT(fabric[4].contended_iteration_time_ms, fabric[4].iteration_time_ms);
  EXPECT_GT(fabric[4].fragmented_contended_iteration_time_ms,
            fabric[4].fragmented_iteration_time_ms);
  for (const CurvePoint& p : fabric) {
    if (!p.fits) continue;
    EXPECT_GE(p.fragmented_contended_iteration_time_ms, p.contended_iteration_time_ms) << p.gpus;
  }
  // Non-blocking leaves: nobody else slows anyone, no contended figure.
  spec.cluster.fabric.oversubscription = 1;
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<CurvePoint> open, ThroughputCurve(spec, profiles));
  for (const CurvePoint& p : open) EXPECT_EQ(p.contended_iteration_time_ms, 0) << p.gpus;
}

TEST(CurveTest, MonotoneCurvesNeverDip) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  CurveSpec spec = Gpt13bSpec(CurvePolicy::kDataParallel);
  spec.monotone = true;
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<CurvePoint> curve, ThroughputCurve(spec, profiles));
  for (size_t i = 1; i < curve.size(); ++i) {
    EXPECT_GE(curve[i].samples_per_s, curve[i - 1].samples_per_s) << curve[i].gpus;
    EXPECT_LE(curve[i].job.cluster.num_gpus, curve[i].gpus);
  }
  EXPECT_TRUE(curve[2].fits) << "24 GPUs reuse the 16-GPU plan";
  EXPECT_EQ(curve[2].job.cluster.num_gpus, 16);
}

TEST(CurveTest, CountsWithoutAPlanDoNotFitAndBadSpecsAreErrors) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  CurveSpec spec;
  spec.model = *ModelPreset("gpt3-175b");
  spec.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  spec.global_batch = 64;
  spec.gpu_counts = {1, 8};
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<CurvePoint> curve, ThroughputCurve(spec, profiles));
  EXPECT_FALSE(curve[0].fits);
  EXPECT_FALSE(curve[1].fits);
  spec.gpu_counts = {16, 8};
  EXPECT_THAT(ThroughputCurve(spec, profiles),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gpu_counts[1]")));
  spec.gpu_counts = {8};
  spec.model.hidden_size = 12289;
  EXPECT_THAT(ThroughputCurve(spec, profiles),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.hidden_size")));
}

}  // namespace
}  // namespace vtrain

namespace vtrain {
namespace {

// The curve's pruned search (candidates by a lower bound of their time) finds
// exactly the plan time the full plan search finds, at every count, on any
// number of threads.
TEST(CurveTest, TheBestPointIsTheFullSearchsFastestPlan) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  CurveSpec spec;
  spec.model = *ModelPreset("gpt3-13b");
  spec.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  spec.global_batch = 256;
  spec.gpu_counts = {8, 16, 32, 64, 128};
  for (int threads : {1, 3}) {
    CurveOptions options;
    options.threads = threads;
    VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<CurvePoint> curve,
                                ThroughputCurve(spec, profiles, options));
    for (const CurvePoint& point : curve) {
      SearchSpace space;
      space.model = spec.model;
      space.cluster = spec.cluster;
      space.global_batch = spec.global_batch;
      space.gpus = point.gpus;
      VTRAIN_ASSERT_OK_AND_ASSIGN(SearchResult full, Search(space, profiles, SearchOptions{}));
      ASSERT_EQ(point.fits, full.best >= 0) << point.gpus;
      if (point.fits) {
        EXPECT_DOUBLE_EQ(point.iteration_time_ms, full.plans[full.best].iteration_time_ms)
            << point.gpus << " GPUs, " << threads << " threads";
      }
    }
  }
}

}  // namespace
}  // namespace vtrain
