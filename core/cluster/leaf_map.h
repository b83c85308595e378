// Which leaf switches a job's nodes sit on, for the cluster study on a
// leaf/spine fabric (core/spec/fabric.h): a cluster's whole nodes under
// leaves of K nodes each, handed out packed onto as few leaves as the free
// nodes allow, and whether a job ended up on more leaves than it needs (its
// collectives then cross the spine as a spread placement's do); and
// NodeBudget, how many GPUs node-aligned allocations take.
#ifndef VTRAIN_CORE_CLUSTER_LEAF_MAP_H_
#define VTRAIN_CORE_CLUSTER_LEAF_MAP_H_

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

// Node-aligned placement: a job on a node's worth of GPUs or more takes whole
// nodes; smaller ones (1, 2, 4 GPUs: powers of two pack a node exactly) share
// nodes. The GPUs a set of allocations needs, and whether it fits.
class NodeBudget {
 public:
  NodeBudget(int64_t total, int64_t node) : total_(total), node_(node) {}
  void Add(int64_t g) { Count(g) += Size(g); }
  void Remove(int64_t g) { Count(g) -= Size(g); }
  bool FitsWith(int64_t from, int64_t to) const {
    NodeBudget p = *this;
    p.Remove(from);
    p.Add(to);
    return p.Used() <= total_;
  }
  // The most GPUs that fit in place of an allocation of `from` (0: none):
  // for g > 0, FitsWith(from, g) holds exactly when g <= Room(from) (it is
  // monotone in g).
  int64_t Room(int64_t from) const {
    int64_t lo = 0, hi = total_;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (FitsWith(from, mid)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }

 private:
  int64_t Used() const {
    return node_ > 0 ? whole_ + node_ * ((shared_ + node_ - 1) / node_) : whole_ + shared_;
  }
  bool Whole(int64_t g) const { return node_ > 0 && g >= node_; }
  int64_t Size(int64_t g) const { return Whole(g) ? (g + node_ - 1) / node_ * node_ : g; }
  int64_t& Count(int64_t g) { return Whole(g) ? whole_ : shared_; }

  int64_t total_, node_;
  int64_t whole_ = 0, shared_ = 0;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_LEAF_MAP_H_
