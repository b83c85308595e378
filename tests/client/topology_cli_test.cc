// vtrainctl with a Slurm topology.conf: --topology-file sets the leaves and
// the cluster's nodes, --nodes takes hostnames from it, and a job spread over
// two leaves of an oversubscribed fabric is slower than one on a leaf; bad
// files and conflicting flags exit 2 naming the file or flag.
#include <fstream>
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/vtrainctl.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::RunVtrainctlInProcess;

std::string WriteTopology(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// 32 GPUs (t=8, d=4) on an 8:1 fabric of two 4-node leaves.
std::vector<std::string> TopologyArgs(const std::string& topology, std::vector<std::string> extra) {
  std::vector<std::string> args = {"predict",
                                   "--local",
                                   "--model",
                                   "gpt3-13b",
                                   "--gpus",
                                   "32",
                                   "--tp",
                                   "8",
                                   "--pp",
                                   "1",
                                   "--global-batch",
                                   "128",
                                   "--oversubscription",
                                   "8",
                                   "--topology-file",
                                   topology};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

double IterationMs(const std::string& out) {
  const size_t at = out.find("iteration time");
  EXPECT_NE(at, std::string::npos) << out;
  return at == std::string::npos ? 0 : std::stod(out.substr(at + 14));
}

TEST(TopologyCliTest, HostnamesPlaceTheJobOnTheFilesLeaves) {
  const std::string topo = WriteTopology("two_leaves.conf",
                                         "SwitchName=leaf0 Nodes=dgx[001-004]\n"
                                         "SwitchName=leaf1 Nodes=dgx[005-008]\n"
                                         "SwitchName=spine Switches=leaf[0-1]\n");
  const auto packed = RunVtrainctlInProcess(TopologyArgs(topo, {"--nodes", "dgx[001-004]"}));
  ASSERT_EQ(packed.code, common::kExitOk) << packed.err;
  EXPECT_THAT(packed.out, HasSubstr("leaf/spine, 4 nodes per leaf, 8:1 oversubscribed, on "
                                    "nodes 0-3"));
  const auto split =
      RunVtrainctlInProcess(TopologyArgs(topo, {"--nodes", "dgx[001-002],dgx[005-006]"}));
  ASSERT_EQ(split.code, common::kExitOk) << split.err;
  EXPECT_THAT(split.out, HasSubstr("on nodes 0-1,4-5"));
  // The data-parallel ring crosses the spine twice: slower than on one leaf,
  // and the same as naming the nodes by number.
  EXPECT_GT(IterationMs(split.out), IterationMs(packed.out));
  const auto numbers = RunVtrainctlInProcess(TopologyArgs(topo, {"--nodes", "0,1,4,5"}));
  ASSERT_EQ(numbers.code, common::kExitOk) << numbers.err;
  EXPECT_EQ(IterationMs(numbers.out), IterationMs(split.out));
  // The file's eight nodes are the cluster a spread placement uses.
  const auto spread = RunVtrainctlInProcess(TopologyArgs(topo, {"--placement", "spread"}));
  ASSERT_EQ(spread.code, common::kExitOk) << spread.err;
  EXPECT_THAT(spread.out, HasSubstr("spread over 8 nodes"));
}

TEST(TopologyCliTest, BadFilesAndConflictingFlagsAreRefused) {
  const std::string good = WriteTopology("good.conf", "SwitchName=l0 Nodes=n[1-4]\n");
  const std::string uneven =
      WriteTopology("uneven.conf", "SwitchName=l0 Nodes=n[1-4]\nSwitchName=l1 Nodes=n[5-6]\n");
  const struct {
    std::vector<std::string> args;
    std::string expected;
  } cases[] = {
      {TopologyArgs(uneven, {}), uneven + ":2: leaf 'l1' has 2 nodes"},
      {TopologyArgs(::testing::TempDir() + "/missing.conf", {}), "missing.conf"},
      {TopologyArgs(good, {"--nodes-per-leaf", "4"}),
       "leave --nodes-per-leaf and --cluster-nodes out"},
      {TopologyArgs(good, {"--nodes", "n[1-3],m7"}), "--nodes names host 'm7'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.expected);
    const auto r = RunVtrainctlInProcess(c.args);
    EXPECT_EQ(r.code, common::kExitBadInput);
    EXPECT_THAT(r.err, HasSubstr(c.expected));
  }
}

}  // namespace
}  // namespace vtrain
