// Slurm topology.conf read as a leaf/spine fabric: hostlists, leaves, the
// rules that keep it two tiers of equal leaves, and hostnames to node
// numbers.
#include "core/spec/topology.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

TEST(HostlistTest, ExpandsRangesListsAndPadding) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<std::string> names,
                              ExpandHostlist("dgx[001-003,010],login1"));
  EXPECT_THAT(names, ElementsAre("dgx001", "dgx002", "dgx003", "dgx010", "login1"));
  VTRAIN_ASSERT_OK_AND_ASSIGN(names, ExpandHostlist("r[1-2]n[8-9]"));
  EXPECT_THAT(names, ElementsAre("r1n8", "r1n9", "r2n8", "r2n9"));
  VTRAIN_ASSERT_OK_AND_ASSIGN(names, ExpandHostlist("n[9-11]"));
  EXPECT_THAT(names, ElementsAre("n9", "n10", "n11"));
}

TEST(HostlistTest, RefusesWhatIsNotAHostlist) {
  EXPECT_THAT(ExpandHostlist("dgx[001-004"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unbalanced or nested")));
  EXPECT_THAT(ExpandHostlist("dgx[[1-2]]"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unbalanced or nested")));
  EXPECT_THAT(ExpandHostlist("dgx[4-1]"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("descending range '4-1'")));
  EXPECT_THAT(ExpandHostlist("dgx[a-b]"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a number or range")));
  EXPECT_THAT(ExpandHostlist("n[0-9999]m[0-9999]"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than")));
  EXPECT_THAT(ExpandHostlist(","),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names no host")));
}

constexpr char kTwoLeaves[] = R"(# DGX SuperPOD-style: two leaves under one spine
SwitchName=leaf0 Nodes=dgx[01-04] LinkSpeed=400
switchname=leaf1 nodes=dgx[05-08]   # keys are case-insensitive
SwitchName=spine Switches=leaf[0-1]
)";

TEST(SlurmTopologyTest, LeavesBecomeTheFabric) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(SlurmTopology t, ParseSlurmTopology(kTwoLeaves, "topo.conf"));
  EXPECT_EQ(t.leaves, 2);
  EXPECT_EQ(t.nodes_per_leaf, 4);
  ASSERT_EQ(t.node_names.size(), 8u);
  EXPECT_EQ(t.node_names[0], "dgx01");
  EXPECT_EQ(t.node_names[4], "dgx05");
  // Hostnames to node numbers, in the list's order.
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<int64_t> nodes, NodesByName(t, "dgx[07-08],dgx01"));
  EXPECT_THAT(nodes, ElementsAre(6, 7, 0));
  EXPECT_THAT(NodesByName(t, "dgx09"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("host 'dgx09'")));
}

TEST(SlurmTopologyTest, RefusesWhatTwoEqualTiersCannotHold) {
  const struct {
    const char* text;
    const char* expected;
  } cases[] = {
      {"SwitchName=a Nodes=n[1-4]\nSwitchName=b Nodes=n[5-6]\n",
       "t.conf:2: leaf 'b' has 2 nodes but leaf 'a' (line 1) has 4"},
      {"SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[2-3]\n", "t.conf:2: node 'n2'"},
      {"SwitchName=a Nodes=n[1-2]\nSwitchName=a Nodes=n[3-4]\n", "switch 'a' is named twice"},
      {"SwitchName=a Nodes=n1\nSwitchName=s Switches=a\nSwitchName=top Switches=s\n",
       "t.conf:3: switch 'top' lists 's', a switch above leaves; vtrain models two tiers"},
      {"SwitchName=a Nodes=n1\nSwitchName=s Switches=b\n", "lists 'b', which no line defines"},
      {"SwitchName=a Nodes=n1 Switches=b\n", "needs Nodes= (a leaf) or Switches="},
      {"Nodes=n1\n", "t.conf:1: a switch line needs SwitchName="},
      {"SwitchName=a Nodes=n1 Color=red\n", "unknown key 'Color'"},
      {"SwitchName=a Nodes=n1 junk\n", "'junk' is not KEY=VALUE"},
      {"# nothing\n\n", "t.conf: no leaf switch"},
      {"SwitchName=a Nodes=n[1-\n", "t.conf:1: hostlist"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_THAT(ParseSlurmTopology(c.text, "t.conf"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.expected)));
  }
}

}  // namespace
}  // namespace vtrain
