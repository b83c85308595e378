// SharedSpineTimes against hand-solved fixed points.
#include "core/cluster/spine_share.h"

#include <cmath>

#include "gtest/gtest.h"

namespace vtrain {
namespace {

TEST(SpineShareTest, TwoJobsOnOneLeafSlowEachOtherToTheirFixedPoint) {
  // A (alone 10 s, 12 s at background 2: X = 2) and B (20 s, 24 s: X = 4),
  // one node each on leaves 0 and 1. A's other traffic is B's demand
  // 4 / T_B, so T_A = 10 + 2 * (4 / T_B) / 2 = 10 + 4 / T_B, and
  // T_B = 20 + 4 * (2 / T_A) / 2 = 20 + 4 / T_A: T_A^2 - 10 T_A - 2 = 0.
  // C, on leaf 0 alone, crosses nothing and keeps its time.
  const std::vector<SpineJob> jobs = {
      {{{0, 1}, {1, 1}}, 10, 12}, {{{0, 1}, {1, 1}}, 20, 24}, {{{0, 3}}, 5, 9}};
  const std::vector<double> t = SharedSpineTimes(jobs, 2);
  ASSERT_EQ(t.size(), 3u);
  const double a = 5 + std::sqrt(27.0);
  EXPECT_NEAR(t[0], a, 1e-9);
  EXPECT_NEAR(t[1], 20 + 4 / a, 1e-9);
  EXPECT_DOUBLE_EQ(t[2], 5);
}

TEST(SpineShareTest, AJobFeelsItsBusiestSharedLeaf) {
  // Background 4. A: one node on each of leaves 0-2, X = 16 - 8 = 8.
  // B: 2 nodes on leaf 1, 1 on leaf 3, X = 1. D: 1 node on leaves 2 and 3,
  // X = 1. Each job's other traffic is the largest, over its leaves, of the
  // others' nodes there times their X / T; its time grows by X times that
  // over 4. The settled times satisfy these equations together.
  const std::vector<SpineJob> jobs = {
      {{{0, 1}, {1, 1}, {2, 1}}, 8, 16}, {{{1, 2}, {3, 1}}, 4, 5}, {{{2, 1}, {3, 1}}, 4, 5}};
  const std::vector<double> t = SharedSpineTimes(jobs, 4);
  ASSERT_EQ(t.size(), 3u);
  // A: leaf 1 carries B's 2 nodes, more than D's 1 node on leaf 2.
  EXPECT_GT(2 / t[1], 1 / t[2]);
  EXPECT_NEAR(t[0], 8 + 8 * (2 / t[1]) / 4, 1e-9);
  // B: A's node on leaf 1 (8 / T_A) against D's on leaf 3 (1 / T_D).
  EXPECT_NEAR(t[1], 4 + std::max(8 / t[0], 1 / t[2]) / 4, 1e-9);
  // D: A's node on leaf 2 against B's on leaf 3.
  EXPECT_NEAR(t[2], 4 + std::max(8 / t[0], 1 / t[1]) / 4, 1e-9);
  EXPECT_GT(t[0], 8);
}

TEST(SpineShareTest, NoBackgroundOrNoSharedLeafLeavesEveryJobAlone) {
  const std::vector<SpineJob> jobs = {{{{0, 1}, {1, 1}}, 10, 12}, {{{2, 1}, {3, 1}}, 20, 24}};
  for (double background : {0.0, 2.0}) {
    const std::vector<double> t = SharedSpineTimes(jobs, background);
    EXPECT_DOUBLE_EQ(t[0], 10) << background;
    EXPECT_DOUBLE_EQ(t[1], 20) << background;
  }
}

}  // namespace
}  // namespace vtrain
