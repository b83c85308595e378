// NVLink domains larger than a node (GB200 NVL72): groups inside a domain
// stay off the network, a domain leaves through all its nodes' NICs, and a
// domain of whole nodes behaves exactly as one node of its size would.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/graph/pass_templates.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "core/spec/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::DescribeJob;
using ::vtrain::testing::PresetJob;
using ::vtrain::testing::RandomSmallJob;
using ::vtrain::testing::StatusIs;

TEST(NvlinkDomainTest, GroupsInsideADomainStayOffTheNetwork) {
  // t = 8 on nodes of 4: two nodes apart, or one NVL72 domain.
  Job job = PresetJob("gpt3-13b", 8, 4, 2, 1, 64);
  job.cluster.gpus_per_node = 4;
  CommGroup tp = internal::TensorParallelGroup(job);
  EXPECT_EQ(tp.ranks, 8);
  EXPECT_EQ(tp.ranks_per_node, 4);
  EXPECT_EQ(tp.nodes(), 2);
  job.cluster.nvlink_domain = 72;
  tp = internal::TensorParallelGroup(job);
  EXPECT_EQ(tp.ranks_per_node, 8);
  EXPECT_EQ(tp.nodes(), 1);
  // Data parallelism strides t = 8: nine ranks of a domain, a ninth of its NICs.
  job.plan.data_parallel = 18;
  job.plan.global_batch = 18 * 4;
  job.cluster.num_gpus = 8 * 18 * 2;
  const CommGroup dp = internal::DataParallelGroup(job);
  EXPECT_EQ(dp.ranks_per_node, 9);
  EXPECT_DOUBLE_EQ(dp.nic_fraction, 9.0 / 72);
  // A domain's network bandwidth is its 18 nodes' NICs together.
  EXPECT_DOUBLE_EQ(DomainNetworkBandwidth(job.cluster),
                   18 * job.cluster.inter_node_bandwidth_bytes_per_s);
}

// Nodes of g GPUs joined in domains of 2g, with each node's NICs halved, are
// the same machine for every group as nodes of 2g GPUs: the same iteration
// time to the nanosecond.
TEST(NvlinkDomainTest, ADomainOfWholeNodesIsANodeOfItsSize) {
  int64_t compared = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Job big = RandomSmallJob(seed);
    big.cluster.nvlink_domain = 0;
    if (big.cluster.gpus_per_node < 2) continue;
    Job joined = big;
    joined.cluster.gpus_per_node = big.cluster.gpus_per_node / 2;
    joined.cluster.nvlink_domain = big.cluster.gpus_per_node;
    joined.cluster.inter_node_bandwidth_bytes_per_s /= 2;
    SCOPED_TRACE(absl::StrCat("seed ", seed, ": ", DescribeJob(big)));
    const ProfileSet profiles = DefaultProfileSet(big.cluster.gpu);
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction a, Predict(big, profiles, {}));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction b, Predict(joined, profiles, {}));
    EXPECT_EQ(a.iteration_time_ns, b.iteration_time_ns);
    ++compared;
  }
  EXPECT_GT(compared, 30);
}

TEST(NvlinkDomainTest, ALargerDomainIsNeverSlowerAndHelpsTensorParallelism) {
  // Llama 3 70B, t = 8 over 4-GPU B200 trays: one rack-wide domain keeps the
  // TP collectives on NVLink.
  Job job = PresetJob("llama3-70b", 8, 4, 4, 1, 64);
  job.cluster = DefaultCluster(*GpuByName("b200-sxm-180gb"), 128);
  job.cluster.gpus_per_node = 4;
  job.plan.sequence_parallel = true;
  job.plan.dtype = DType::kBf16;
  const ProfileSet profiles = DefaultProfileSet(job.cluster.gpu);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction trays, Predict(job, profiles, {}));
  job.cluster.nvlink_domain = 72;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction rack, Predict(job, profiles, {}));
  EXPECT_LT(rack.iteration_time_ns, trays.iteration_time_ns);
  EXPECT_LT(rack.stages[0].tensor_parallel_ns, trays.stages[0].tensor_parallel_ns);
}

TEST(NvlinkDomainTest, BadDomainsNameTheFieldAndTheFix) {
  Job job = PresetJob("gpt3-13b", 8, 4, 2, 1, 64);
  job.cluster.gpus_per_node = 4;
  job.cluster.nvlink_domain = 70;
  EXPECT_THAT(ValidateJob(job), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("cluster.nvlink_domain=70 is not a multiple of "
                                                   "cluster.gpus_per_node=4")));
  job.cluster.nvlink_domain = -8;
  EXPECT_THAT(ValidateJob(job),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cluster.nvlink_domain=-8")));
  job.cluster.nvlink_domain = 72;
  job.cluster.fabric.nodes_per_leaf = 4;
  EXPECT_THAT(ValidateJob(job), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("which a leaf/spine cluster.fabric")));
  // A domain of exactly one node is the default, with or without a fabric.
  job.cluster.nvlink_domain = 4;
  VTRAIN_EXPECT_OK(ValidateJob(job));
}

}  // namespace
}  // namespace vtrain
