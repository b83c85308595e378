// Which leaf switches a job's nodes sit on, for the cluster study on a
// leaf/spine fabric (core/spec/fabric.h): a cluster's whole nodes under
// leaves of K nodes each, handed out packed onto as few leaves as the free
// nodes allow, and whether a job ended up on more leaves than it needs (its
// collectives then cross the spine as a spread placement's do).
#ifndef VTRAIN_CORE_PLAN_LEAF_MAP_H_
#define VTRAIN_CORE_PLAN_LEAF_MAP_H_

#include <cstdint>
#include <vector>

namespace vtrain {

class LeafMap {
 public:
  struct Slice {
    int64_t leaf = 0;
    int64_t nodes = 0;
  };

  // `nodes` whole nodes, `nodes_per_leaf` (> 0) under each leaf; the last
  // leaf holds the remainder.
  LeafMap(int64_t nodes, int64_t nodes_per_leaf);

  // Takes `nodes` free nodes: all on one leaf when a leaf has room (the one
  // with the least room that fits, keeping large gaps for large jobs), else
  // from the leaves with the most free nodes first. Empty when fewer than
  // `nodes` are free (nothing is taken).
  std::vector<Slice> Take(int64_t nodes);
  void Give(const std::vector<Slice>& slices);

  // Whether `slices` span more leaves than their nodes need.
  bool Fragmented(const std::vector<Slice>& slices) const;
  int64_t free_nodes() const;

 private:
  int64_t per_leaf_;
  std::vector<int64_t> free_;  // free nodes per leaf
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_PLAN_LEAF_MAP_H_
