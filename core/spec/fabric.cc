#include "core/spec/fabric.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/util/enum_names.h"

namespace vtrain {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr int64_t kMaxListedNode = int64_t{1} << 24;

// The leaves a placement uses: packed, as few as hold the job; spread, every
// leaf of the cluster.
int64_t LeafCount(const FabricSpec& f, int64_t job_nodes) {
  if (f.flat()) return 1;
  if (!f.nodes.empty()) {
    return *std::max_element(f.nodes.begin(), f.nodes.end()) / f.nodes_per_leaf + 1;
  }
  const int64_t nodes =
      f.placement == Placement::kSpread ? std::max(f.cluster_nodes, job_nodes) : job_nodes;
  return std::max<int64_t>(1, CeilDiv(nodes, f.nodes_per_leaf));
}

void CheckNodeList(const FabricSpec& f, int64_t job_nodes, std::vector<std::string>& problems) {
  if (f.nodes.empty()) return;
  const std::string name =
      absl::StrCat("cluster.fabric.nodes (--nodes ", NodeListName(f.nodes), ")");
  if (f.flat()) {
    problems.push_back(absl::StrCat(name, " needs a leaf/spine fabric; set --nodes-per-leaf K"));
    return;
  }
  if (f.placement == Placement::kSpread) {
    problems.push_back(absl::StrCat(name, " and placement spread both place the job; give one"));
  }
  if (static_cast<int64_t>(f.nodes.size()) != job_nodes) {
    problems.push_back(absl::StrCat(name, " has ", f.nodes.size(), " nodes but the job has ",
                                    job_nodes,
                                    "; give one cluster node per job node (a curve sizes the job "
                                    "itself: use --placement there)"));
  }
  std::vector<int64_t> sorted = f.nodes;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0 || sorted.back() >= kMaxListedNode) {
    problems.push_back(absl::StrCat(name, ": node numbers must be in [0, ", kMaxListedNode, ")"));
  } else if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    problems.push_back(absl::StrCat(name, " names a node twice; each job node needs its own"));
  } else if (f.cluster_nodes > 0 && sorted.back() >= f.cluster_nodes) {
    problems.push_back(absl::StrCat(name, " names node ", sorted.back(), " of a cluster of ",
                                    f.cluster_nodes, " nodes (--cluster-nodes), numbered from 0"));
  }
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ParseNodeList(absl::string_view text) {
  std::vector<int64_t> nodes;
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--nodes '", text, "' ", why,
                                                   "; give cluster node numbers and ranges, e.g. "
                                                   "0-3,8,12-15"));
  };
  if (text.empty()) return bad("is empty");
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int64_t first = 0, last = 0;
    if (!absl::SimpleAtoi(ends[0], &first) ||
        !absl::SimpleAtoi(ends.size() > 1 ? ends[1] : ends[0], &last) || first < 0) {
      return bad(absl::StrCat("has '", part, "', not a node number or range"));
    }
    if (last < first) return bad(absl::StrCat("has the descending range '", part, "'"));
    if (last - first + static_cast<int64_t>(nodes.size()) >= kMaxListedNode) {
      return bad("names too many nodes");
    }
    for (int64_t n = first; n <= last; ++n) nodes.push_back(n);
  }
  return nodes;
}

std::string NodeListName(const std::vector<int64_t>& nodes) {
  std::string out;
  for (size_t i = 0; i < nodes.size();) {
    size_t j = i;
    while (j + 1 < nodes.size() && nodes[j + 1] == nodes[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", nodes[i]);
    if (j > i) absl::StrAppend(&out, "-", nodes[j]);
    i = j + 1;
  }
  return out;
}

namespace {
constexpr EnumName<Placement> kPlacements[] = {{Placement::kPacked, "packed"},
                                               {Placement::kSpread, "spread"}};
}  // namespace

absl::string_view PlacementName(Placement placement) { return NameIn(kPlacements, placement); }

absl::StatusOr<Placement> ParsePlacement(absl::string_view name) {
  return ParseIn(kPlacements, name, "cluster.fabric.placement");
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
  CheckNodeList(f, job_nodes, problems);
  if (!(f.spine_background >= 0 && f.spine_background <= static_cast<double>(f.nodes_per_leaf))) {
    problems.push_back(absl::StrCat("cluster.fabric.spine_background=", f.spine_background,
                                    " must be in [0, nodes_per_leaf] (other jobs' nodes on a "
                                    "leaf's uplinks)"));
  }
  if (f.flat() && (f.oversubscription != 1 || f.placement != Placement::kPacked)) {
    problems.push_back(
        "cluster.fabric.oversubscription and placement need a leaf/spine fabric; set "
        "--nodes-per-leaf K");
  }
}

double ContendedBackground(const FabricSpec& f) {
  if (f.flat() || f.oversubscription <= 1) return 0;
  return static_cast<double>(f.nodes_per_leaf) / f.oversubscription;
}

int64_t LeafOf(const FabricSpec& f, int64_t node, int64_t job_nodes) {
  if (f.flat()) return 0;
  if (!f.nodes.empty() && node < static_cast<int64_t>(f.nodes.size())) {
    return f.nodes[static_cast<size_t>(node)] / f.nodes_per_leaf;
  }
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
  return std::max(1.0, fabric_.oversubscription * (busiest + fabric_.spine_background) /
                           static_cast<double>(fabric_.nodes_per_leaf));
}

}  // namespace vtrain
