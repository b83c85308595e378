#include "core/spec/fabric.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace vtrain {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The leaves a placement uses: packed, as few as hold the job; spread, every
// leaf of the cluster.
int64_t LeafCount(const FabricSpec& f, int64_t job_nodes) {
  if (f.flat()) return 1;
  const int64_t nodes =
      f.placement == Placement::kSpread ? std::max(f.cluster_nodes, job_nodes) : job_nodes;
  return std::max<int64_t>(1, CeilDiv(nodes, f.nodes_per_leaf));
}

}  // namespace

absl::string_view PlacementName(Placement placement) {
  return placement == Placement::kSpread ? "spread" : "packed";
}

absl::StatusOr<Placement> ParsePlacement(absl::string_view name) {
  if (name == "packed") return Placement::kPacked;
  if (name == "spread") return Placement::kSpread;
  return absl::InvalidArgumentError(
      absl::StrCat("cluster.fabric.placement='", name, "' is unknown; use packed or spread"));
}

void CheckFabric(const FabricSpec& f, int64_t job_nodes, std::vector<std::string>& problems) {
  if (f.nodes_per_leaf < 0 || f.nodes_per_leaf > kMaxNodesPerLeaf) {
    problems.push_back(absl::StrCat("cluster.fabric.nodes_per_leaf=", f.nodes_per_leaf,
                                    " must be in [0, ", kMaxNodesPerLeaf,
                                    "] (0: a flat, non-blocking fabric; --nodes-per-leaf)"));
  }
  if (!(f.oversubscription >= 1 && f.oversubscription <= kMaxOversubscription)) {
    problems.push_back(absl::StrCat("cluster.fabric.oversubscription=", f.oversubscription,
                                    " must be in [1, ", kMaxOversubscription,
                                    "] (downlink : uplink, e.g. 4 for 4:1; --oversubscription)"));
  }
  if (f.cluster_nodes < 0 || f.cluster_nodes > (int64_t{1} << 24)) {
    problems.push_back(absl::StrCat("cluster.fabric.cluster_nodes=", f.cluster_nodes,
                                    " must be in [0, 16777216] (0: the job's nodes)"));
  } else if (f.cluster_nodes > 0 && f.cluster_nodes < job_nodes) {
    problems.push_back(absl::StrCat("cluster.fabric.cluster_nodes=", f.cluster_nodes,
                                    " is smaller than the job's ", job_nodes,
                                    " nodes; give the whole cluster (--cluster-nodes)"));
  }
  if (f.flat() && (f.oversubscription != 1 || f.placement != Placement::kPacked)) {
    problems.push_back(
        "cluster.fabric.oversubscription and placement need a leaf/spine fabric; set "
        "--nodes-per-leaf K");
  }
}

int64_t LeafOf(const FabricSpec& f, int64_t node, int64_t job_nodes) {
  if (f.flat()) return 0;
  if (f.placement == Placement::kSpread) return node % LeafCount(f, job_nodes);
  return node / f.nodes_per_leaf;
}

SpineLoad::SpineLoad(const FabricSpec& fabric, int64_t gpus_per_node, int64_t job_gpus)
    : fabric_(fabric),
      gpus_per_node_(std::max<int64_t>(1, gpus_per_node)),
      job_nodes_(std::max<int64_t>(1, CeilDiv(job_gpus, std::max<int64_t>(1, gpus_per_node)))),
      out_(fabric.flat() ? 0 : static_cast<size_t>(job_nodes_), 0.0),
      in_(fabric.flat() ? 0 : static_cast<size_t>(job_nodes_), 0.0) {}

int64_t SpineLoad::LeafOfNode(int64_t node) const { return LeafOf(fabric_, node, job_nodes_); }

void SpineLoad::AddFlow(int64_t from, int64_t to, double nic_share) {
  if (fabric_.flat()) return;
  const int64_t a = NodeOf(from), b = NodeOf(to);
  if (a == b) return;
  if (LeafOfNode(a) == LeafOfNode(b)) return;
  out_[static_cast<size_t>(a)] += nic_share;
  in_[static_cast<size_t>(b)] += nic_share;
  crossed_ = true;
}

void SpineLoad::AddRing(const std::vector<int64_t>& ranks, double nic_share) {
  if (fabric_.flat() || ranks.size() < 2) return;
  for (size_t i = 0; i < ranks.size(); ++i) {
    AddFlow(ranks[i], ranks[(i + 1) % ranks.size()], nic_share);
  }
}

void SpineLoad::AddAllToAll(const std::vector<int64_t>& ranks, double nic_share) {
  if (fabric_.flat() || ranks.size() < 2) return;
  // Per node: the share of its peers (ranks on other nodes) that sit under
  // other leaves, sent and received alike.
  std::vector<int64_t> nodes;
  for (int64_t r : ranks) nodes.push_back(NodeOf(r));
  std::sort(nodes.begin(), nodes.end());
  const std::vector<int64_t> members = nodes;  // one entry per rank
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  for (int64_t node : nodes) {
    const int64_t leaf = LeafOfNode(node);
    int64_t off_node = 0, off_leaf = 0;
    for (int64_t peer : members) {
      if (peer == node) continue;
      ++off_node;
      if (LeafOfNode(peer) != leaf) ++off_leaf;
    }
    if (off_leaf == 0) continue;
    const double share = nic_share * static_cast<double>(off_leaf) / static_cast<double>(off_node);
    out_[static_cast<size_t>(node)] += share;
    in_[static_cast<size_t>(node)] += share;
    crossed_ = true;
  }
}

double SpineLoad::Slowdown() const {
  if (fabric_.flat() || !crossed_) return 1;
  // A node cannot push more than its NICs: beyond that its own NICs are the
  // bottleneck (the collective model's NIC share), not the spine.
  std::vector<double> up(static_cast<size_t>(LeafCount(fabric_, job_nodes_)), 0.0);
  std::vector<double> down(up.size(), 0.0);
  for (int64_t n = 0; n < job_nodes_; ++n) {
    const auto leaf = static_cast<size_t>(LeafOfNode(n));
    up[leaf] += std::min(1.0, out_[static_cast<size_t>(n)]);
    down[leaf] += std::min(1.0, in_[static_cast<size_t>(n)]);
  }
  const double busiest = std::max(*std::max_element(up.begin(), up.end()),
                                  *std::max_element(down.begin(), down.end()));
  return std::max(1.0,
                  fabric_.oversubscription * busiest / static_cast<double>(fabric_.nodes_per_leaf));
}

}  // namespace vtrain
