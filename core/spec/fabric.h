// The network fabric a job's nodes sit on and where they are placed: a flat,
// non-blocking fabric (the default, every figure as before), or a
// rail-optimised two-tier leaf/spine fabric with K nodes under each leaf and
// oversubscribed uplinks, with the job's nodes packed onto as few leaves as
// possible or spread over the cluster's leaves. SpineLoad turns the flows
// of a set of concurrent collectives into the slowdown their cross-leaf hops
// suffer.
#ifndef VTRAIN_CORE_SPEC_FABRIC_H_
#define VTRAIN_CORE_SPEC_FABRIC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain {

// How a job's nodes are laid onto leaves (job node i is the node of ranks
// i*G .. i*G+G-1 in Megatron's rank order, G GPUs per node).
//  kPacked: consecutive nodes fill a leaf before the next, node i on leaf
//    i / K: the fewest leaves, and groups of consecutive ranks stay under one.
//  kSpread: round-robin over the cluster's leaves, node i on leaf i mod L
//    (L = ceil(cluster nodes / K)): the fragmented placement a busy
//    scheduler hands out, where neighbouring ranks sit under different leaves.
enum class Placement { kPacked, kSpread };
// "packed" / "spread".
absl::string_view PlacementName(Placement placement);
// INVALID_ARGUMENT naming cluster.fabric.placement otherwise.
absl::StatusOr<Placement> ParsePlacement(absl::string_view name);

struct FabricSpec {
  // Nodes under one leaf switch (a rail-optimised scalable unit: GPU r of
  // each of the K nodes on the leaf of rail r). 0: one flat, non-blocking
  // fabric, where placement does not matter.
  int64_t nodes_per_leaf = 0;
  // A leaf's downlink to uplink bandwidth (1: non-blocking; 4: 4:1).
  double oversubscription = 1;
  Placement placement = Placement::kPacked;
  // Nodes in the whole cluster (the leaves a spread placement uses); 0: the
  // job's own nodes.
  int64_t cluster_nodes = 0;
  // The job's nodes by their number in the cluster, in Megatron's rank order
  // (job node i, ranks i*G .. i*G+G-1, is cluster node nodes[i], under leaf
  // nodes[i] / nodes_per_leaf); empty: as `placement` lays them out.
  std::vector<int64_t> nodes;
  // Other jobs' traffic already on the uplinks of each leaf this job's
  // collectives cross, in nodes' worth of NIC bandwidth (the cluster study's
  // shared spine); 0: the job has the uplinks to itself. Not a request
  // field: the throughput curve sets it (ContendedBackground).
  double spine_background = 0;

  bool flat() const { return nodes_per_leaf == 0; }
};

inline constexpr int64_t kMaxNodesPerLeaf = 1 << 16;
inline constexpr double kMaxOversubscription = 64;

// Problems with `fabric` for a job of `job_nodes` nodes, each naming its
// field (cluster.fabric.*) and the fix; empty when valid.
void CheckFabric(const FabricSpec& fabric, int64_t job_nodes, std::vector<std::string>& problems);

// A node list as `--nodes` takes it: numbers and ranges, "0-3,8,12-15".
// INVALID_ARGUMENT naming --nodes for anything else, a descending range or
// more than 2^24 nodes.
absl::StatusOr<std::vector<int64_t>> ParseNodeList(absl::string_view text);
// The list back in that form, runs of consecutive nodes as ranges.
std::string NodeListName(const std::vector<int64_t>& nodes);

// The leaf of job node `node` of `job_nodes` under fabric.placement (0 for
// a flat fabric).
int64_t LeafOf(const FabricSpec& fabric, int64_t node, int64_t job_nodes);

// The spine background at which the throughput curve draws its contended
// figures: a whole leaf's uplinks' worth, K / R nodes (0 on a flat or
// non-blocking fabric, where other jobs cost nothing).
double ContendedBackground(const FabricSpec& fabric);

// The load a set of collectives that run at the same time put on the
// leaves' uplinks. Each flow from a node to a node under another leaf adds
// its share of the source node's NIC bandwidth to what that node sends up
// and of the destination's to what it takes down (at most 1 per node: past
// that the node's own NICs are the bottleneck); a leaf's links to the
// spine carry K / R nodes' worth of NIC bandwidth each way (K nodes per
// leaf, R the oversubscription), shared fairly. Slowdown() is how much
// longer the cross-node part of those collectives takes:
// max(1, R * (the busiest leaf's demand, either way, plus the fabric's
// spine_background) / K), so 1 when nothing crosses or the fabric is
// non-blocking (R = 1) and nobody else is on the uplinks.
class SpineLoad {
 public:
  SpineLoad(const FabricSpec& fabric, int64_t gpus_per_node, int64_t job_gpus);

  // One ring over `ranks` in this order (and back to the first), each hop
  // between nodes carrying `nic_share` of the source node's NICs.
  void AddRing(const std::vector<int64_t>& ranks, double nic_share);
  // One flow from rank `from` to rank `to`.
  void AddFlow(int64_t from, int64_t to, double nic_share);
  // An all-to-all among `ranks`: each node sends `nic_share` of its NICs,
  // split evenly over the group's ranks on other nodes.
  void AddAllToAll(const std::vector<int64_t>& ranks, double nic_share);

  double Slowdown() const;

 private:
  int64_t NodeOf(int64_t rank) const { return rank / gpus_per_node_; }
  int64_t LeafOfNode(int64_t node) const;

  FabricSpec fabric_;
  int64_t gpus_per_node_ = 1, job_nodes_ = 1;
  // Per job node: the NIC share it sends to and receives from other leaves.
  std::vector<double> out_, in_;
  bool crossed_ = false;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_FABRIC_H_
