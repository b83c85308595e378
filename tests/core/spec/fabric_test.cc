// The leaf/spine fabric and placement: hand-computed spine loads, the
// collective times they stretch, and whole predictions (packed never slower
// than spread, a non-blocking fabric the same as a flat one).
#include "core/spec/fabric.h"

#include <string>
#include <vector>

#include "core/graph/pass_templates.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "core/spec/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;

FabricSpec Fabric(int64_t k, double r, Placement placement, int64_t cluster_nodes = 0) {
  FabricSpec f;
  f.nodes_per_leaf = k;
  f.oversubscription = r;
  f.placement = placement;
  f.cluster_nodes = cluster_nodes;
  return f;
}

// Data-parallel rings of t = 8, d = 4 on 4 nodes of 8 GPUs: 8 rings, one per
// tensor-parallel rank, each hop between nodes carrying 1/8 of a node's NICs.
double DataParallelRings(const FabricSpec& f, int64_t d) {
  SpineLoad load(f, 8, 8 * d);
  for (int64_t i = 0; i < 8; ++i) {
    std::vector<int64_t> ring;
    for (int64_t k = 0; k < d; ++k) ring.push_back(i + 8 * k);
    load.AddRing(ring, 1.0 / 8);
  }
  return load.Slowdown();
}

TEST(SpineLoadTest, HandComputedRingsOnTwoLeaves) {
  // K = 2, R = 4: a leaf's uplinks carry 2 / 4 = half a node's NICs.
  // Packed: leaves {0, 1} and {2, 3}; hops 1->2 and 3->0 cross, one node's
  // NICs each way per leaf: slowdown 4 * 1 / 2 = 2.
  EXPECT_DOUBLE_EQ(DataParallelRings(Fabric(2, 4, Placement::kPacked), 4), 2.0);
  // Spread: leaves {0, 2} and {1, 3}; every hop crosses, two nodes' worth
  // per leaf: 4 * 2 / 2 = 4.
  EXPECT_DOUBLE_EQ(DataParallelRings(Fabric(2, 4, Placement::kSpread), 4), 4.0);
  // Non-blocking (R = 1): nothing a leaf's nodes send can exceed its uplinks.
  EXPECT_DOUBLE_EQ(DataParallelRings(Fabric(2, 1, Placement::kSpread), 4), 1.0);
  // Flat, and a group under one leaf: no spine at all.
  EXPECT_DOUBLE_EQ(DataParallelRings(FabricSpec{}, 4), 1.0);
  EXPECT_DOUBLE_EQ(DataParallelRings(Fabric(2, 4, Placement::kPacked), 2), 1.0);
  // Spread over a cluster of 8 leaves: each node alone under its leaf, one
  // node's NICs against half a node's uplinks: 4 * 1 / 2 = 2.
  EXPECT_DOUBLE_EQ(DataParallelRings(Fabric(2, 4, Placement::kSpread, 16), 4), 2.0);
}

TEST(SpineLoadTest, LeavesOfEachPlacement) {
  const FabricSpec packed = Fabric(4, 2, Placement::kPacked);
  const FabricSpec spread = Fabric(4, 2, Placement::kSpread, 32);  // 8 leaves
  EXPECT_EQ(LeafOf(packed, 5, 12), 1);
  EXPECT_EQ(LeafOf(spread, 5, 12), 5);
  EXPECT_EQ(LeafOf(spread, 9, 12), 1);
  EXPECT_EQ(LeafOf(FabricSpec{}, 9, 12), 0);
  // An all-to-all of 4 nodes, two per leaf (packed, K = 2): each node sends
  // 2 of its 3 off-node peers' share across, 2/3 of its NICs; a leaf's two
  // nodes push 4/3 against 2/4: slowdown 4 * (4/3) / 2.
  SpineLoad load(Fabric(2, 4, Placement::kPacked), 1, 4);
  load.AddAllToAll({0, 1, 2, 3}, 1.0);
  EXPECT_DOUBLE_EQ(load.Slowdown(), 4 * (4.0 / 3) / 2);
  // Other jobs' traffic on the uplinks adds to the busiest leaf's demand:
  // a whole leaf's uplinks' worth (K / R = 0.5 nodes) more.
  FabricSpec shared = Fabric(2, 4, Placement::kPacked);
  EXPECT_DOUBLE_EQ(ContendedBackground(shared), 0.5);
  shared.spine_background = ContendedBackground(shared);
  SpineLoad loaded(shared, 1, 4);
  loaded.AddAllToAll({0, 1, 2, 3}, 1.0);
  EXPECT_DOUBLE_EQ(loaded.Slowdown(), 4 * (4.0 / 3 + 0.5) / 2);
  // A job that crosses nothing feels nobody, and a non-blocking or flat
  // fabric has no contended background.
  SpineLoad inside(shared, 1, 4);
  inside.AddAllToAll({0, 1}, 1.0);
  EXPECT_DOUBLE_EQ(inside.Slowdown(), 1);
  EXPECT_DOUBLE_EQ(ContendedBackground(Fabric(2, 1, Placement::kPacked)), 0);
  EXPECT_DOUBLE_EQ(ContendedBackground(FabricSpec{}), 0);
}

TEST(SpineLoadTest, ANodeListPlacesEachNodeOnItsLeaf) {
  // The rings of the hand-computed case (t = 8, d = 4 on 4 nodes, K = 2,
  // R = 4) on listed nodes. Nodes 4-7: leaves 2 and 3, as packed: 2x.
  FabricSpec f = Fabric(2, 4, Placement::kPacked);
  f.nodes = {4, 5, 6, 7};
  EXPECT_EQ(LeafOf(f, 2, 4), 3);
  EXPECT_DOUBLE_EQ(DataParallelRings(f, 4), 2.0);
  // 0, 2, 4, 6: every node under its own leaf, each sending one node's NICs
  // up against half a node's uplinks: 4 x 1 / 2 = 2.
  f.nodes = {0, 2, 4, 6};
  EXPECT_DOUBLE_EQ(DataParallelRings(f, 4), 2.0);
  // 0, 2, 1, 3: ring neighbours alternate leaves, every hop crosses and each
  // leaf carries two nodes' worth: 4x, as spread.
  f.nodes = {0, 2, 1, 3};
  EXPECT_DOUBLE_EQ(DataParallelRings(f, 4), 4.0);
}

TEST(NodeListTest, ParsesRangesAndNamesWhatIsWrong) {
  absl::StatusOr<std::vector<int64_t>> nodes = ParseNodeList("0-3,8,12-13");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(*nodes, (std::vector<int64_t>{0, 1, 2, 3, 8, 12, 13}));
  EXPECT_EQ(NodeListName(*nodes), "0-3,8,12-13");
  for (const char* bad : {"", "a", "3-1", "-1", "1,,2", "0-99999999"}) {
    EXPECT_THAT(ParseNodeList(bad).status().message(), HasSubstr("--nodes")) << bad;
  }
}

Job DataParallelJob(const FabricSpec& fabric) {
  Job job = testing::PresetJob("gpt3-1.3b", 8, 4, 1, 1, 64);
  job.cluster.fabric = fabric;
  return job;
}

TEST(FabricCollectiveTest, TheCrossNodePartStretchesByTheSlowdown) {
  const ProfileSet set = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  const Job spread = DataParallelJob(Fabric(2, 4, Placement::kSpread));
  const Job flat = DataParallelJob(FabricSpec{});
  const CommGroup g = internal::DataParallelGroup(spread);
  ASSERT_EQ(g.ranks, 4);
  EXPECT_DOUBLE_EQ(g.spine_slowdown, 4.0);
  EXPECT_DOUBLE_EQ(internal::DataParallelGroup(flat).spine_slowdown, 1.0);
  // All-reduce of 1 GB over 4 nodes: 2 * 3/4 of it through 1/8 of a node's
  // NICs (the group's share), divided by the DP bandwidth factor.
  const LinkBandwidths links{flat.cluster.intra_node_bandwidth_bytes_per_s,
                             flat.cluster.inter_node_bandwidth_bytes_per_s};
  const AnalyticalParams& p = set.params;
  const double bytes = 1e9;
  const double inter = 1.5 / p.dp_bandwidth_factor * bytes /
                       (links.inter_node_bytes_per_s / 8 * p.inter_node_efficiency) * 1e9;
  const double intra = 1.5 / p.dp_bandwidth_factor * bytes /
                       (links.intra_node_bytes_per_s * p.intra_node_efficiency) * 1e9;
  ASSERT_GT(inter, intra);  // network-bound, so the slowdown shows in full
  EXPECT_NEAR(AnalyticalCollectiveNs(Collective::kAllReduce, bytes, g, links, p),
              p.inter_node_latency_ns + 4 * inter, 1e-6 * inter);
  EXPECT_NEAR(AnalyticalCollectiveNs(Collective::kAllReduce, bytes,
                                     internal::DataParallelGroup(flat), links, p),
              p.inter_node_latency_ns + inter, 1e-6 * inter);
  // Tensor parallelism inside a node never meets the spine.
  EXPECT_DOUBLE_EQ(internal::TensorParallelGroup(spread).spine_slowdown, 1.0);
}

TEST(FabricPredictionTest, SpreadIsNeverFasterAndNonBlockingIsFlat) {
  const ProfileSet set = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  struct Plan {
    int64_t t, d, p;
  };
  for (const Plan& plan : {Plan{8, 4, 1}, Plan{2, 16, 4}, Plan{4, 8, 2}, Plan{1, 32, 2}}) {
    Job job = testing::PresetJob("gpt3-6.7b", plan.t, plan.d, plan.p, 1, 8 * plan.d);
    job.plan.gradient_bucketing = true;
    const int64_t flat = Predict(job, set)->iteration_time_ns;
    job.cluster.fabric = Fabric(2, 4, Placement::kPacked);
    const int64_t packed = Predict(job, set)->iteration_time_ns;
    job.cluster.fabric.placement = Placement::kSpread;
    const int64_t spread = Predict(job, set)->iteration_time_ns;
    job.cluster.fabric.oversubscription = 1;
    const int64_t non_blocking = Predict(job, set)->iteration_time_ns;
    const std::string where = absl::StrCat("t=", plan.t, " d=", plan.d, " p=", plan.p);
    EXPECT_GE(packed, flat) << where;
    EXPECT_GE(spread, packed) << where;
    EXPECT_GT(spread, flat) << where;  // every plan here crosses leaves when spread
    EXPECT_EQ(non_blocking, flat) << where;
  }
  // A job under one leaf: packed is the flat answer exactly.
  Job small = testing::PresetJob("gpt3-6.7b", 8, 2, 1, 1, 16);
  const int64_t flat = Predict(small, set)->iteration_time_ns;
  small.cluster.fabric = Fabric(4, 8, Placement::kPacked);
  EXPECT_EQ(Predict(small, set)->iteration_time_ns, flat);
}

TEST(FabricValidationTest, NamesTheFieldAndTheFix) {
  Job job = DataParallelJob(Fabric(2, 0.5, Placement::kPacked));
  EXPECT_THAT(ValidateJob(job).message(), HasSubstr("cluster.fabric.oversubscription=0.5"));
  job.cluster.fabric = Fabric(2, 4, Placement::kSpread, 3);
  EXPECT_THAT(ValidateJob(job).message(), HasSubstr("cluster.fabric.cluster_nodes=3"));
  job.cluster.fabric = Fabric(0, 4, Placement::kPacked);
  EXPECT_THAT(ValidateJob(job).message(), HasSubstr("--nodes-per-leaf"));
  job.cluster.fabric = Fabric(-1, 1, Placement::kPacked);
  EXPECT_THAT(ValidateJob(job).message(), HasSubstr("cluster.fabric.nodes_per_leaf=-1"));
  EXPECT_THAT(ParsePlacement("scattered").status().message(),
              HasSubstr("cluster.fabric.placement"));
  job.cluster.fabric = Fabric(2, 4, Placement::kSpread, 64);
  EXPECT_TRUE(ValidateJob(job).ok());
  // Node lists: one node per job node (4 here), distinct, in the cluster,
  // on a leaf/spine fabric, not with spread.
  job.cluster.fabric = Fabric(2, 4, Placement::kPacked, 8);
  job.cluster.fabric.nodes = {0, 2, 4, 6};
  EXPECT_TRUE(ValidateJob(job).ok()) << ValidateJob(job);
  job.cluster.fabric.nodes = {0, 2, 4};
  EXPECT_THAT(ValidateJob(job).message(), HasSubstr("has 3 nodes but the job has 4"));
  job.cluster.fabric.nodes = {0, 2, 2, 6};
  EXPECT_THAT(ValidateJob(job).message(), HasSubstr("names a node twice"));
  job.cluster.fabric.nodes = {0, 2, 4, 8};
  EXPECT_THAT(ValidateJob(job).message(), HasSubstr("names node 8 of a cluster of 8 nodes"));
  job.cluster.fabric.placement = Placement::kSpread;
  job.cluster.fabric.nodes = {0, 2, 4, 6};
  EXPECT_THAT(ValidateJob(job).message(), HasSubstr("placement spread both place"));
  job.cluster.fabric = FabricSpec{};
  job.cluster.fabric.nodes = {0, 1, 2, 3};
  EXPECT_THAT(ValidateJob(job).message(),
              HasSubstr("cluster.fabric.nodes (--nodes 0-3) needs a leaf/spine fabric"));
}

}  // namespace
}  // namespace vtrain
