#include "core/cluster/scheduler.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/cluster/promise_limit.h"
#include "core/cluster/window.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::vtrain::testing::StatusIs;

// Linear scaling up to 8 GPUs: 1 iteration/s per GPU.
ThroughputTable Linear() { return {{1, 2, 4, 8}, {1, 2, 4, 8}}; }

TEST(ClusterSimTest, OneJobRunsOnWhatSpeedsItUpAndPaysOneStart) {
  // 800 iterations on up to 8 GPUs of a 16-GPU cluster: 100 s plus the 10 s start.
  const std::vector<ClusterJob> jobs = {{"a", 0, 800, 1000, 0}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome out,
      SimulateCluster(jobs, {Linear()}, {.total_gpus = 16, .rescale_overhead_s = 10}));
  ASSERT_EQ(out.jobs.size(), 1u);
  EXPECT_TRUE(out.jobs[0].admitted);
  EXPECT_TRUE(out.jobs[0].met_deadline);
  EXPECT_DOUBLE_EQ(out.jobs[0].finish_s, 110);
  EXPECT_DOUBLE_EQ(out.makespan_s, 110);
  EXPECT_EQ(out.reallocations, 0);
  // 8 GPUs of 16 for 110 s; 100 s of them useful.
  EXPECT_NEAR(out.gpu_utilization, 8.0 * 110 / (16 * 110), 1e-12);
  EXPECT_NEAR(out.useful_utilization, 8.0 * 100 / (16 * 110), 1e-12);
}

TEST(ClusterSimTest, SpareGpusGoToABestEffortJobWhenTheyDoMoreThere) {
  // "long" is admitted (1 GPU keeps its far deadline); "short" cannot meet
  // its deadline and runs best-effort. A spare step goes where it adds the
  // most throughput per remaining iteration, promised or not: short (5,000
  // iterations) before long (8,000). Serving admitted jobs first, long took
  // all 8 GPUs and short waited for it (finishing at 1,625 s), a step worth
  // 1.6x more to short not being enough to move it back (Rebalance: 2x).
  const std::vector<ClusterJob> jobs = {{"long", 0, 8000, 100'000, 0}, {"short", 0, 5000, 0, 0}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome out,
      SimulateCluster(jobs, {Linear()}, {.total_gpus = 8, .rescale_overhead_s = 0}));
  ASSERT_EQ(out.jobs.size(), 2u);
  EXPECT_TRUE(out.jobs[0].admitted);
  EXPECT_FALSE(out.jobs[1].admitted);
  EXPECT_LT(out.jobs[1].finish_s, 1400);
  EXPECT_TRUE(out.jobs[0].met_deadline);
}

TEST(ClusterSimTest, AdmissionKeepsPromisesAndSparesGoToTheBiggestGain) {
  // Two jobs each needing all 8 GPUs of the cluster to meet their deadline:
  // the second is not admitted (it runs best-effort after the first).
  const std::vector<ClusterJob> jobs = {{"first", 0, 800, 120, 0}, {"second", 1, 800, 125, 0}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome out,
      SimulateCluster(jobs, {Linear()}, {.total_gpus = 8, .rescale_overhead_s = 10}));
  EXPECT_TRUE(out.jobs[0].admitted);
  EXPECT_TRUE(out.jobs[0].met_deadline);
  EXPECT_FALSE(out.jobs[1].admitted);
  EXPECT_FALSE(out.jobs[1].met_deadline);
  EXPECT_TRUE(out.jobs[1].finished) << "best-effort jobs still run on leftovers";
  EXPECT_DOUBLE_EQ(out.deadline_satisfaction, 0.5);
  EXPECT_GT(out.jobs[1].finish_s, out.jobs[0].finish_s);
}

TEST(ClusterSimTest, ABetterThroughputTableMeetsMoreDeadlines) {
  // The same jobs; a table that scales better (a better plan at each count)
  // can only help an admission-controlled scheduler here.
  std::vector<ClusterJob> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back({std::to_string(i), 10.0 * i, 600, 10.0 * i + 150, 0});
  const ThroughputTable poor = {{1, 2, 4, 8}, {1, 1.5, 2, 2.5}};
  const ThroughputTable good = {{1, 2, 4, 8}, {1, 2, 4, 8}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome a, SimulateCluster(jobs, {poor}, {.total_gpus = 16}));
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome b, SimulateCluster(jobs, {good}, {.total_gpus = 16}));
  EXPECT_GT(b.deadline_satisfaction, a.deadline_satisfaction);
  EXPECT_LT(b.avg_jct_s, a.avg_jct_s);
}

TEST(ClusterSimTest, ACountSlowerThanASmallerOneChangesNothing) {
  // A 24-GPU plan slower than the 16-GPU one (a pipeline depth that does not
  // pay): a job given 24 GPUs would run on 16 of them, so the scheduler
  // plans as if the count were not there. Without that, shrinking the first
  // job from 32 to make room is priced (and run) at 24's poor throughput.
  const ThroughputTable plain = {{1, 2, 4, 8, 16, 32}, {1, 2, 4, 8, 16, 24}};
  ThroughputTable with_slow = plain;
  with_slow.gpus.insert(with_slow.gpus.begin() + 5, 24);
  with_slow.iterations_per_s.insert(with_slow.iterations_per_s.begin() + 5, 9);
  std::vector<ClusterJob> jobs;
  for (int i = 0; i < 5; ++i) {
    jobs.push_back({std::to_string(i), 40.0 * i, 4000.0 + 500 * i, 2000, 0});
  }
  const ClusterSimOptions options = {.total_gpus = 40, .rescale_overhead_s = 5};
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome a, SimulateCluster(jobs, {plain}, options));
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome b, SimulateCluster(jobs, {with_slow}, options));
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_DOUBLE_EQ(a.jobs[i].finish_s, b.jobs[i].finish_s) << "job " << i;
    EXPECT_EQ(a.jobs[i].reallocations, b.jobs[i].reallocations) << "job " << i;
  }
}

TEST(ClusterSimTest, GrowthLooksAlongTheWholeCurve) {
  // Job a: 16 GPUs add almost nothing over 8, 32 add a lot (a plan that only
  // pays from 32). Job b: linear up to 8, a lot of work left. On 33 GPUs
  // (interchangeable: no node rounding), stepping one count at a time, b's steps (1/20000 per GPU)
  // beat a's 8 -> 16 (0.1/800/8) until b holds 8, and then a's 16 -> 32 no longer fits: a crawls
  // on 16. Looking along a's whole curve, 8 -> 32 (3/800/24 per GPU) wins first; a is done at 210 s
  // and b then grows to 8.
  const ThroughputTable steep_late = {{8, 16, 32}, {1, 1.1, 4}};
  const std::vector<ClusterJob> jobs = {{"a", 0, 800, 850, 0}, {"b", 0, 20000, 1e6, 1}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome out,
      SimulateCluster(jobs, {steep_late, Linear()},
                      {.total_gpus = 33, .rescale_overhead_s = 10, .gpus_per_node = 0}));
  ASSERT_EQ(out.jobs.size(), 2u);
  EXPECT_DOUBLE_EQ(out.jobs[0].finish_s, 10 + 800 / 4.0);
  // b: 200 iterations on 1 GPU by 210 s, then a restart and 8 GPUs.
  EXPECT_DOUBLE_EQ(out.jobs[1].finish_s, 210 + 10 + (20000 - 200) / 8.0);
  EXPECT_EQ(out.jobs[1].reallocations, 1);
}

TEST(ClusterSimTest, JobsCrossingTheSameUplinksShareThem) {
  // 6 nodes, 2 per leaf. Two 3-node jobs: a takes leaf 0 and one node of
  // leaf 1, b leaf 2 and the other node of leaf 1; both cross the spine
  // through leaf 1 (neither is fragmented: 3 nodes need 2 leaves). Alone
  // each runs at 1 it/s; with a leaf's uplinks full (background 1 node) at
  // 0.5, so its cross-leaf bytes take X = 1 s an iteration. Sharing leaf 1,
  // each feels the other's one node at 1 / T: T = 1 + 1 / T, the golden
  // ratio; 1000 iterations end at 1000 T.
  const ThroughputTable alone = {{24}, {1}};
  const ThroughputTable loaded = {{24}, {0.5}};
  ClusterSimOptions options = {
      .total_gpus = 48, .rescale_overhead_s = 0, .nodes_per_leaf = 2, .contended_background = 1};
  std::vector<ClusterJob> jobs = {{"a", 0, 1000, 1e6, 0}, {"b", 0, 1000, 1e6, 0}};
  PlacementTables tables(alone);
  tables.spread = alone;
  tables.packed_contended = tables.spread_contended = loaded;
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome out, SimulateCluster(jobs, {tables}, options));
  const double golden = (1 + std::sqrt(5.0)) / 2;
  ASSERT_EQ(out.jobs.size(), 2u);
  EXPECT_NEAR(out.jobs[0].finish_s, 1000 * golden, 1e-6);
  EXPECT_NEAR(out.jobs[1].finish_s, 1000 * golden, 1e-6);
  // Each lost 1 - 1 / T of its 24 GPUs' throughput for 1000 T seconds.
  EXPECT_NEAR(out.spine_shared_gpu_s, 2 * 24 * 1000 * golden * (1 - 1 / golden), 1e-3);
  EXPECT_EQ(out.fragmented_placements, 0);
  // Without sharing (no contended background), each has the spine alone.
  options.contended_background = 0;
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome apart, SimulateCluster(jobs, {tables}, options));
  EXPECT_DOUBLE_EQ(apart.jobs[0].finish_s, 1000);
  EXPECT_DOUBLE_EQ(apart.spine_shared_gpu_s, 0);
  // Once a ends, b has leaf 1's uplinks to itself again: a alone at first
  // would not change that; with b only 500 iterations, b ends at 500 T and
  // a runs its rest alone.
  options.contended_background = 1;
  jobs[1].iterations = 500;
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome staggered, SimulateCluster(jobs, {tables}, options));
  EXPECT_NEAR(staggered.jobs[1].finish_s, 500 * golden, 1e-6);
  EXPECT_NEAR(staggered.jobs[0].finish_s, 500 * golden + (1000 - 500), 1e-6);
}

TEST(ClusterSimTest, AJobOnMoreLeavesThanItNeedsRunsAtItsFragmentedThroughput) {
  // 4 nodes of 8 GPUs, 2 nodes per leaf. Four one-node jobs fill them (a, b
  // on leaf 0; c, d on leaf 1); a and c end at 100 s, leaving one node free
  // on each leaf. "third" (its deadline easy, but arriving to a full
  // cluster) then takes 16 GPUs on two leaves where one would do, and runs
  // at its fragmented throughput, 1 it/s instead of 2: 200 iterations from
  // 100 s end at 300 s (200 s on a flat fabric).
  const ThroughputTable packed = {{8, 16}, {1, 2}};
  const ThroughputTable spread = {{8, 16}, {1, 1}};
  const ThroughputTable one_node = {{8}, {1}};
  ClusterSimOptions options = {.total_gpus = 32, .rescale_overhead_s = 0, .nodes_per_leaf = 2};
  const std::vector<ClusterJob> jobs = {{"a", 0, 100, 100, 1},
                                        {"b", 0, 300, 300, 1},
                                        {"c", 0, 100, 100, 1},
                                        {"d", 0, 300, 300, 1},
                                        {"third", 50, 200, 1000, 0}};
  PlacementTables two_nodes(packed);
  two_nodes.spread = spread;
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome out,
                              SimulateCluster(jobs, {two_nodes, one_node}, options));
  ASSERT_EQ(out.jobs.size(), 5u);
  EXPECT_DOUBLE_EQ(out.jobs[4].finish_s, 300);
  EXPECT_EQ(out.jobs[4].fragmented_placements, 1);
  EXPECT_EQ(out.fragmented_placements, 1);
  options.nodes_per_leaf = 0;
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome flat,
                              SimulateCluster(jobs, {two_nodes, one_node}, options));
  EXPECT_DOUBLE_EQ(flat.jobs[4].finish_s, 200);
  EXPECT_EQ(flat.fragmented_placements, 0);
  // Leaves of 4 nodes: one leaf holds the whole cluster, nothing fragments.
  options.nodes_per_leaf = 4;
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome one_leaf,
                              SimulateCluster(jobs, {two_nodes, one_node}, options));
  EXPECT_DOUBLE_EQ(one_leaf.jobs[4].finish_s, 200);
  // Leaves need whole nodes.
  options.gpus_per_node = 0;
  EXPECT_THAT(SimulateCluster(jobs, {two_nodes, one_node}, options),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ClusterSimTest, JobsWithoutAnyPlanNeverFinishAndBadJobsAreErrors) {
  const ThroughputTable none = {{8, 16}, {0, 0}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome out,
                              SimulateCluster({{"x", 0, 10, 100, 0}}, {none}, {.total_gpus = 16}));
  EXPECT_FALSE(out.jobs[0].finished);
  EXPECT_DOUBLE_EQ(out.deadline_satisfaction, 0);
  EXPECT_THAT(SimulateCluster({{"x", 0, 10, 100, 3}}, {none}, {.total_gpus = 16}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SimulateCluster({{"x", 5, 10, 1, 0}}, {none}, {.total_gpus = 16}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace vtrain

namespace vtrain {
namespace {

// Node-aligned placement: with 12 GPUs in nodes of 8, a job on 1 GPU and one
// that wants 8 cannot both run (8 takes a whole node, the 1-GPU job the
// other); interchangeable GPUs would fit 1 + 8.
TEST(ClusterSimTest, PlacementIsNodeAligned) {
  const ThroughputTable big = {{8}, {8}};
  const ThroughputTable small = {{1}, {1}};
  const std::vector<ClusterJob> jobs = {{"small", 0, 100, 1e6, 1}, {"big", 1, 800, 1e6, 0}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome aligned,
      SimulateCluster(jobs, {big, small},
                      {.total_gpus = 12, .rescale_overhead_s = 0, .gpus_per_node = 8}));
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome loose,
      SimulateCluster(jobs, {big, small},
                      {.total_gpus = 12, .rescale_overhead_s = 0, .gpus_per_node = 0}));
  // Loose: both run at once, the big job ends at 1 + 100 s. Aligned: the big
  // one waits for the small one (100 s) and ends at 200 s.
  EXPECT_DOUBLE_EQ(loose.jobs[1].finish_s, 101);
  EXPECT_DOUBLE_EQ(aligned.jobs[1].finish_s, 200);
}

TEST(ClusterSimTest, GpusComeBackFromTheJobThatLosesLeast) {
  // a scales poorly past 4 GPUs, b linearly; both take 8 of 16. c arrives
  // needing 4 GPUs for its deadline (with 2 it would finish at 1 + 10 +
  // 20 = 31 > 25): a gives back 4 (0.05 iterations/s per GPU lost against
  // b's 1), b keeps its 8 without a restart.
  const ThroughputTable poor{{1, 2, 4, 8}, {1, 2, 3, 3.2}};
  const std::vector<ClusterJob> jobs = {
      {"a", 0, 1000, 1e6, 0}, {"b", 0, 1000, 1e6, 1}, {"c", 1, 40, 25, 1}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome out,
      SimulateCluster(jobs, {poor, Linear()},
                      {.total_gpus = 16, .rescale_overhead_s = 10, .gpus_per_node = 0}));
  ASSERT_EQ(out.jobs.size(), 3u);
  EXPECT_TRUE(out.jobs[2].admitted);
  EXPECT_TRUE(out.jobs[2].met_deadline);
  EXPECT_EQ(out.jobs[0].reallocations, 2);  // 8 -> 4, and back once c is done
  EXPECT_EQ(out.jobs[1].reallocations, 0);
  // b ran on 8 GPUs from its start at 10 s: 1000 / 8 = 125 s.
  EXPECT_DOUBLE_EQ(out.jobs[1].finish_s, 135);
}

TEST(ClusterSimTest, GpusMoveFromALowGainToAMuchHigherOne) {
  // a takes all 8 GPUs of a 9-GPU cluster although it barely scales past 2;
  // b arrives and fits on the ninth. Per GPU and per iteration left, each of
  // b's next steps is worth more than twice a's last one (b 4 -> 8: 1/400
  // against a 2 -> 1: 0.9/1000), so a keeps 1 GPU and b starts on 8: 400
  // iterations at 8/s after a 10 s start, done at 61 s instead of 411 s.
  const ThroughputTable poor{{1, 2, 4, 8}, {1, 1.9, 2.2, 2.3}};
  const std::vector<ClusterJob> jobs = {{"a", 0, 1000, 1e6, 0}, {"b", 1, 400, 1e6, 1}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome out,
      SimulateCluster(jobs, {poor, Linear()},
                      {.total_gpus = 9, .rescale_overhead_s = 10, .gpus_per_node = 0}));
  ASSERT_EQ(out.jobs.size(), 2u);
  EXPECT_DOUBLE_EQ(out.jobs[1].finish_s, 61);
  EXPECT_EQ(out.jobs[1].reallocations, 0);
  EXPECT_GE(out.jobs[0].reallocations, 1);
}

TEST(ClusterSimTest, ShapeWindowReachesTheTargetLoadAndKeepsSlack) {
  // 3 jobs over 1,000 s on 10 GPUs: (100 x 4 + 200 x 2 + 300 x 1) / (1000 x
  // 10) = 0.11.
  std::vector<WindowJob> w = {{500, 900, 100, 4}, {1000, 1600, 200, 2}, {1500, 1550, 300, 1}};
  EXPECT_DOUBLE_EQ(OfferedLoad(w, 10), 0.11);
  ASSERT_TRUE(ShapeWindow(w, 10, 0.55, std::nullopt).ok());
  EXPECT_NEAR(OfferedLoad(w, 10), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(w[0].submit_s, 500);                   // the first arrival stays
  EXPECT_DOUBLE_EQ(w[1].submit_s, 600);                   // 500 s after it, compressed 5x
  EXPECT_DOUBLE_EQ(w[2].deadline_s - w[2].submit_s, 50);  // its slack kept
  ASSERT_TRUE(ShapeWindow(w, 10, std::nullopt, 1.5).ok());
  EXPECT_DOUBLE_EQ(w[1].deadline_s, 600 + 1.5 * 200);
  // Stretching works the same way; an instant window has no load to scale.
  ASSERT_TRUE(ShapeWindow(w, 10, 0.11, std::nullopt).ok());
  EXPECT_NEAR(w[2].submit_s, 1500, 1e-9);
  std::vector<WindowJob> instant = {{5, 10, 1, 1}, {5, 10, 1, 1}};
  EXPECT_EQ(OfferedLoad(instant, 8), 0);
  EXPECT_EQ(ShapeWindow(instant, 8, 1.0, std::nullopt).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShapeWindow(w, 10, 101.0, std::nullopt).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShapeWindow(w, 10, std::nullopt, 0.0).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClusterSimTest, PeakRequestedGpusCountsOverlapsAtTheRequestedSizes) {
  // [0, 100) x 4, [50, 250) x 2, [100, 400) x 1, [300, 310) x 8: 4 + 2 at 50,
  // 2 + 1 at 100 (the first ends as the third starts), 1 + 8 at 300.
  const std::vector<WindowJob> w = {
      {0, 0, 100, 4}, {50, 0, 200, 2}, {100, 0, 300, 1}, {300, 0, 10, 8}};
  EXPECT_EQ(PeakRequestedGpus(w), 9);
  // Compressing the arrivals four-fold makes all four overlap at 75.
  std::vector<WindowJob> tight = w;
  for (WindowJob& j : tight) j.submit_s /= 4;
  EXPECT_EQ(PeakRequestedGpus(tight), 15);
  EXPECT_EQ(PeakRequestedGpus({}), 0);
}

TEST(ClusterSimTest, APromiseTooLargeForTheUsualDeadlinesIsRefused) {
  // 8 GPUs, 10 s restarts, 1 iteration/s per GPU. Two short jobs (100
  // iterations in 100 s: 2 GPUs each) arrive, then a long one (3,000
  // iterations in 1,100 s: 4 GPUs), then two more short ones.
  const std::vector<ClusterJob> jobs = {{"short0", 0, 100, 100, 0},
                                        {"short1", 1, 100, 101, 0},
                                        {"long", 2, 3000, 1102, 0},
                                        {"short2", 10, 100, 110, 0},
                                        {"short3", 20, 100, 120, 0}};
  ClusterSimOptions options{.total_gpus = 8, .rescale_overhead_s = 10, .gpus_per_node = 0};
  // ElasticFlow's admission (no limit): 2 + 2 + 4 GPUs promised, so the
  // long job is admitted and the short ones after it are not. (The
  // displacement test is another test's.)
  options.displacement_limit = 0;
  options.promise_limit = 0;
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome open, SimulateCluster(jobs, {Linear()}, options));
  EXPECT_TRUE(open.jobs[2].admitted);
  EXPECT_FALSE(open.jobs[3].admitted);
  // Limit 2: the median window so far is 100 s, so a promise may hold
  // 2 x 8 GPUs x 100 s = 1,600 GPU-s; the long job's 4 GPUs x 1,100 s is
  // refused, and it runs best-effort; the short ones' 2 x 100 fit.
  options.promise_limit = 2;
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome limited, SimulateCluster(jobs, {Linear()}, options));
  EXPECT_FALSE(limited.jobs[2].admitted);
  EXPECT_TRUE(limited.jobs[3].admitted);
  EXPECT_TRUE(limited.jobs[4].admitted);
  EXPECT_TRUE(limited.jobs[2].met_deadline) << "best-effort, it still finishes in time";
  EXPECT_DOUBLE_EQ(limited.deadline_satisfaction, 1.0);
  EXPECT_LT(open.deadline_satisfaction, limited.deadline_satisfaction);
  options.promise_limit = -1;
  EXPECT_THAT(SimulateCluster(jobs, {Linear()}, options),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PromiseLimitTest, APromiseMayHoldLimitTimesTheClusterOverTheMedianWindow) {
  PromiseLimit limit(2, 10);
  EXPECT_TRUE(limit.Allows(1000, 1e9)) << "nothing seen yet";
  for (double w : {100.0, 300.0, 200.0}) limit.Saw(w);
  // Median 200 s: 2 x 10 GPUs x 200 s = 4,000 GPU-s.
  EXPECT_TRUE(limit.Allows(10, 400));
  EXPECT_FALSE(limit.Allows(10, 401));
  EXPECT_TRUE(limit.Allows(1, 4000));
  limit.Saw(1000);  // [100, 200, 300, 1000]: the upper median, 300 s
  EXPECT_TRUE(limit.Allows(10, 600));
  EXPECT_FALSE(limit.Allows(10, 601));
  // Falling windows 10, 9, ..., 1: the upper median of 1..10 is 6 s.
  PromiseLimit falling(2, 10);
  for (int w = 10; w >= 1; --w) falling.Saw(w);
  EXPECT_TRUE(falling.Allows(10, 12));
  EXPECT_FALSE(falling.Allows(10, 12.01));
  PromiseLimit none(0, 10);
  none.Saw(1);
  EXPECT_TRUE(none.Allows(1000, 1e9));
}

// A promise of the whole cluster until a deadline 770 s away, while 2-GPU
// jobs arrive every 50 s: ElasticFlow's admission promises it and turns the
// next eleven away (they miss their deadlines behind it); counting the
// arrivals it would turn away, admission refuses it, it runs best-effort
// beside them, and only it misses its deadline.
TEST(ClusterSimTest, APromiseThatWouldTurnAwayManyLaterArrivalsIsRefused) {
  std::vector<ClusterJob> jobs;
  for (int t = 0; t <= 100; t += 50) {
    jobs.push_back({absl::StrCat("early", t), double(t), 100, t + 100.0, 0});  // 2 GPUs
  }
  jobs.push_back({"wide", 150, 6000, 150 + 10 + 750 + 10, 0});  // 8 GPUs
  for (int t = 200; t <= 700; t += 50) {
    jobs.push_back({absl::StrCat("short", t), double(t), 100, t + 60.0, 0});  // 2 GPUs
  }
  ClusterSimOptions options{.total_gpus = 8, .rescale_overhead_s = 10, .gpus_per_node = 0};
  options.promise_limit = 0;
  options.displacement_limit = 0;
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome open, SimulateCluster(jobs, {Linear()}, options));
  options.displacement_limit = 1;
  VTRAIN_ASSERT_OK_AND_ASSIGN(ClusterOutcome counted, SimulateCluster(jobs, {Linear()}, options));
  ASSERT_EQ(open.jobs.size(), 15u);
  EXPECT_TRUE(open.jobs[3].admitted);
  EXPECT_FALSE(counted.jobs[3].admitted) << "rate 3 per 150 s x 770 s, every share turned away";
  int open_met = 0, counted_met = 0;
  for (size_t i = 4; i < jobs.size(); ++i) {
    EXPECT_FALSE(open.jobs[i].admitted) << jobs[i].id;
    EXPECT_TRUE(counted.jobs[i].admitted) << jobs[i].id;
    open_met += open.jobs[i].met_deadline ? 1 : 0;
    counted_met += counted.jobs[i].met_deadline ? 1 : 0;
  }
  EXPECT_EQ(counted_met, 11);
  EXPECT_LT(open_met, 11);
  EXPECT_GT(counted.deadline_satisfaction, open.deadline_satisfaction);
  options.displacement_limit = -1;
  EXPECT_THAT(SimulateCluster(jobs, {Linear()}, options),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A best-effort job whose best first step (all 8 GPUs: its plans pay off
// only there) does not fit beside a running job starts on what fits
// instead of waiting for it to finish.
TEST(ClusterSimTest, AWaitingJobStartsOnWhatFitsWhenItsBestStepDoesNot) {
  const ThroughputTable up_to_4 = {{1, 2, 4}, {1, 2, 4}};
  const ThroughputTable best_at_8 = {{1, 2, 4, 8}, {0.5, 1, 2, 8}};
  // "a": 400 iterations on at most 4 GPUs (110 s with its start);
  // "b": 800, its deadline out of reach (best-effort).
  const std::vector<ClusterJob> jobs = {{"a", 0, 400, 1000, 0}, {"b", 1, 800, 2, 1}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome out,
      SimulateCluster(jobs, {up_to_4, best_at_8},
                      {.total_gpus = 8, .rescale_overhead_s = 10, .gpus_per_node = 0}));
  EXPECT_DOUBLE_EQ(out.jobs[0].finish_s, 110);
  // On 4 GPUs from 1 s (2 it/s after its 10 s start: 198 iterations by
  // 110 s), then on 8 once "a" is done (another start): 602 / 8 = 75 s.
  EXPECT_EQ(out.jobs[1].reallocations, 1);
  EXPECT_NEAR(out.jobs[1].finish_s, 110 + 10 + 75.25, 1e-6);
  EXPECT_LT(out.jobs[1].finish_s, 110 + 10 + 100) << "waited for all 8 GPUs";
}

TEST(ClusterSimTest, GpusAShrinkFreesBeyondTheStepItMadeRoomForAreNotLeftIdle) {
  // "big" runs alone on all 128 GPUs, its last step (64 -> 128) worth little.
  // "small" arrives best-effort: the move that makes room for its first GPU
  // takes big back to 64, and the other 63 freed GPUs go out as spares
  // before the next move. Left idle, small ran on 4 GPUs beside big on 16
  // and 108 GPUs stood idle (cluster10, itp, 128 GPUs: +5.8% JCT).
  const ThroughputTable big = {{1, 2, 4, 8, 16, 32, 64, 128}, {1, 2, 4, 8, 16, 32, 64, 80}};
  const ThroughputTable small = {{1, 2, 4, 8, 16, 32, 64}, {1, 2, 4, 8, 16, 32, 64}};
  const std::vector<ClusterJob> jobs = {{"big", 0, 1e6, 1e9, 0}, {"small", 100, 6400, 100, 1}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome out,
      SimulateCluster(jobs, {big, small},
                      {.total_gpus = 128, .rescale_overhead_s = 10, .gpus_per_node = 0}));
  ASSERT_EQ(out.jobs.size(), 2u);
  EXPECT_FALSE(out.jobs[1].admitted);
  // 6,400 iterations on 64 GPUs after its 10 s start.
  EXPECT_DOUBLE_EQ(out.jobs[1].finish_s, 100 + 10 + 100);
  EXPECT_EQ(out.jobs[1].reallocations, 0);
  ASSERT_GE(out.allocated.size(), 2u);
  EXPECT_EQ(out.allocated[1].second, 128) << "GPUs idle while a job could use them";
}

TEST(ClusterSimTest, ARunningJobGrowsOnTheSteepestStepThatFits) {
  // "c" holds 2 of 8 GPUs for a long time, "a" 4 until 110 s. "b" starts
  // best-effort on the 2 left; its best step from 2 is to 8, which never
  // fits while c runs. When a is done it takes 6 (3 it/s) instead of
  // waiting on 2 for its best step (done at 811 s).
  const ThroughputTable linear_to_2 = {{1, 2}, {1, 2}};
  const ThroughputTable linear_to_4 = {{1, 2, 4}, {1, 2, 4}};
  const ThroughputTable best_at_8 = {{1, 2, 4, 6, 8}, {0.5, 1, 2, 3, 8}};
  const std::vector<ClusterJob> jobs = {
      {"c", 0, 10'000, 1e6, 0}, {"a", 0, 400, 1000, 1}, {"b", 1, 800, 2, 2}};
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      ClusterOutcome out,
      SimulateCluster(jobs, {linear_to_2, linear_to_4, best_at_8},
                      {.total_gpus = 8, .rescale_overhead_s = 10, .gpus_per_node = 0}));
  ASSERT_EQ(out.jobs.size(), 3u);
  EXPECT_DOUBLE_EQ(out.jobs[1].finish_s, 110);
  // On 2 GPUs from 11 s (99 iterations by 110 s), then 701 on 6 after a
  // restart.
  EXPECT_EQ(out.jobs[2].reallocations, 1);
  EXPECT_NEAR(out.jobs[2].finish_s, 110 + 10 + 701.0 / 3, 1e-6);
}

TEST(DisplacementTest, CountsTheArrivalsWhoseSharesWouldNoLongerFit) {
  Displacement d(1, 8);
  EXPECT_TRUE(d.Allows(8, 0, 1e9)) << "nothing seen yet";
  for (int t = 0; t < 4; ++t) d.Saw(t, 2);  // one arrival a second, 2 GPUs each
  // A promise of all 8 GPUs for 100 s turns away ~100 arrivals; for 0.5 s,
  // half of one.
  EXPECT_FALSE(d.Allows(8, 0, 100));
  EXPECT_TRUE(d.Allows(8, 0, 0.5));
  // 2 GPUs beside none promised leave 6 free: every 2-GPU share still fits.
  EXPECT_TRUE(d.Allows(2, 0, 1e6));
  // Beside 6 promised, the last 2 free GPUs were every arrival's room.
  EXPECT_FALSE(d.Allows(2, 6, 100));
  EXPECT_TRUE(d.Allows(2, 6, 1));
  // Arrivals needing no share (their deadline is out of reach) displace
  // nothing, but count in the rate: 4 of 6 arrivals in 5 s need a share.
  d.Saw(4, 0);
  d.Saw(5, 0);
  EXPECT_TRUE(d.Allows(8, 0, 1.4));   // 1/s x 1.4 s x 4/6 < 1
  EXPECT_FALSE(d.Allows(8, 0, 1.6));  // ... > 1
  Displacement none(0, 8);
  none.Saw(0, 2);
  none.Saw(1, 2);
  EXPECT_TRUE(none.Allows(8, 0, 1e9));
}

}  // namespace
}  // namespace vtrain
