#include "core/cluster/leaf_map.h"

#include "gtest/gtest.h"

namespace vtrain {
namespace {

int64_t Nodes(const std::vector<LeafMap::Slice>& slices) {
  int64_t n = 0;
  for (const LeafMap::Slice& s : slices) n += s.nodes;
  return n;
}

TEST(LeafMapTest, PacksOntoTheTightestLeafThenTheEmptiest) {
  LeafMap leaves(10, 4);  // leaves of 4, 4 and 2 nodes
  EXPECT_EQ(leaves.free_nodes(), 10);
  // 2 nodes fit the 2-node leaf exactly: the tightest fit.
  const auto a = leaves.Take(2);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].leaf, 2);
  // 3 nodes: a 4-node leaf.
  const auto b = leaves.Take(3);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_FALSE(leaves.Fragmented(b));
  // 5 nodes: no leaf has room, the emptiest (4 free) then the other (1).
  const auto c = leaves.Take(5);
  EXPECT_EQ(Nodes(c), 5);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_FALSE(leaves.Fragmented(c)) << "5 nodes on leaves of 4 need two";
  EXPECT_EQ(leaves.free_nodes(), 0);
  EXPECT_TRUE(leaves.Take(1).empty()) << "nothing free";
  leaves.Give(b);
  leaves.Give(a);
  EXPECT_EQ(leaves.free_nodes(), 5);
  // 4 nodes now: 3 free on one leaf, 2 on another; no leaf has room, so
  // they span two leaves where one would do.
  const auto d = leaves.Take(4);
  EXPECT_EQ(Nodes(d), 4);
  EXPECT_TRUE(leaves.Fragmented(d));
}

TEST(NodeBudgetTest, RoomIsTheMostThatFitsInPlaceOfAnAllocation) {
  // Every mix of whole-node and node-sharing allocations on 64 GPUs in
  // nodes of 8 (and GPUs without nodes): g fits in place of `from` exactly
  // when g <= Room(from).
  for (int64_t node : {0, 8}) {
    for (int64_t whole : {0, 8, 24, 56, 64}) {
      for (int64_t shared : {0, 1, 3, 4, 7}) {
        NodeBudget b(64, node);
        if (whole > 0) b.Add(whole);
        if (shared > 0) b.Add(shared);
        for (int64_t from : {int64_t{0}, whole, shared}) {
          const int64_t room = b.Room(from);
          for (int64_t g = 1; g <= 64; ++g) {
            EXPECT_EQ(b.FitsWith(from, g), g <= room)
                << "node " << node << " whole " << whole << " shared " << shared << " from " << from
                << " g " << g;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace vtrain
