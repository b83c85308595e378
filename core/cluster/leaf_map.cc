#include "core/cluster/leaf_map.h"

#include <algorithm>
#include <numeric>

namespace vtrain {

LeafMap::LeafMap(int64_t nodes, int64_t nodes_per_leaf)
    : per_leaf_(std::max<int64_t>(1, nodes_per_leaf)) {
  for (int64_t left = std::max<int64_t>(0, nodes); left > 0; left -= per_leaf_) {
    free_.push_back(std::min(left, per_leaf_));
  }
}

std::vector<LeafMap::Slice> LeafMap::Take(int64_t nodes) {
  std::vector<Slice> slices;
  if (nodes <= 0 || nodes > free_nodes()) return slices;
  // One leaf with room: the tightest fit.
  int64_t tightest = -1;
  for (size_t l = 0; l < free_.size(); ++l) {
    if (free_[l] >= nodes && (tightest < 0 || free_[l] < free_[static_cast<size_t>(tightest)])) {
      tightest = static_cast<int64_t>(l);
    }
  }
  if (tightest >= 0) {
    free_[static_cast<size_t>(tightest)] -= nodes;
    return {{tightest, nodes}};
  }
  // Otherwise the emptiest leaves first: the fewest leaves the gaps allow.
  std::vector<size_t> order(free_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return free_[a] > free_[b]; });
  for (size_t l : order) {
    if (nodes == 0) break;
    const int64_t take = std::min(nodes, free_[l]);
    if (take == 0) continue;
    free_[l] -= take;
    nodes -= take;
    slices.push_back({static_cast<int64_t>(l), take});
  }
  return slices;
}

void LeafMap::Give(const std::vector<Slice>& slices) {
  for (const Slice& s : slices) free_[static_cast<size_t>(s.leaf)] += s.nodes;
}

bool LeafMap::Fragmented(const std::vector<Slice>& slices) const {
  int64_t nodes = 0;
  for (const Slice& s : slices) nodes += s.nodes;
  const int64_t needed = (nodes + per_leaf_ - 1) / per_leaf_;
  return static_cast<int64_t>(slices.size()) > needed;
}

int64_t LeafMap::free_nodes() const {
  return std::accumulate(free_.begin(), free_.end(), int64_t{0});
}

}  // namespace vtrain
