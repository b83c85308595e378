#include "client/fabric_flags.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "common/files.h"
#include "core/spec/fabric.h"
#include "core/spec/topology.h"
#include "core/util/status_macros.h"
#include "proto/enum_convert.h"

namespace vtrain::client {
namespace {

// The Slurm topology --topology-file names, if any.
absl::StatusOr<std::optional<SlurmTopology>> TopologyFromFlags(const common::FlagParser& flags) {
  const std::optional<std::string> path = flags.Get("topology-file");
  if (!path) return std::nullopt;
  if (flags.Has("nodes-per-leaf") || flags.Has("cluster-nodes")) {
    return absl::InvalidArgumentError(
        "--topology-file gives the leaves and the cluster's nodes; leave --nodes-per-leaf and "
        "--cluster-nodes out");
  }
  VTRAIN_ASSIGN_OR_RETURN(std::string text, common::ReadFile(*path));
  VTRAIN_ASSIGN_OR_RETURN(SlurmTopology topology, ParseSlurmTopology(text, *path));
  return topology;
}

}  // namespace

void AddFabricFlags(common::FlagParser& p) {
  p.AddValue("nodes-per-leaf", "K",
             "a rail-optimised leaf/spine fabric with K nodes under each leaf "
             "(cluster.fabric.nodes_per_leaf; default: flat and non-blocking)");
  p.AddValue("oversubscription", "R", "leaf downlink:uplink bandwidth, e.g. 4 for 4:1 (default 1)");
  p.AddValue("placement", "P",
             "packed (default: consecutive nodes fill a leaf) or spread (round-robin over the "
             "cluster's leaves)");
  p.AddValue("cluster-nodes", "N",
             "nodes in the whole cluster, the leaves spread uses (default the job's)");
  p.AddValue("nodes", "LIST",
             "the job's nodes by cluster node number, in rank order, e.g. 0-3,8-11 (node n "
             "under leaf n/K; cluster.fabric.nodes; instead of --placement), or by hostname "
             "with --topology-file, e.g. dgx[001-004]");
  p.AddValue("topology-file", "FILE",
             "the leaves and nodes from a Slurm topology.conf (tree plugin: SwitchName= with "
             "Nodes= or Switches=), instead of --nodes-per-leaf and --cluster-nodes");
}

absl::Status FabricFromFlags(const common::FlagParser& flags, v1::Fabric& f) {
  VTRAIN_ASSIGN_OR_RETURN(std::optional<SlurmTopology> topology, TopologyFromFlags(flags));
  if (topology) {
    f.set_nodes_per_leaf(topology->nodes_per_leaf);
    f.set_cluster_nodes(static_cast<int64_t>(topology->node_names.size()));
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> per_leaf, flags.GetInt("nodes-per-leaf"));
  if (per_leaf) f.set_nodes_per_leaf(*per_leaf);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> cluster_nodes, flags.GetInt("cluster-nodes"));
  if (cluster_nodes) f.set_cluster_nodes(*cluster_nodes);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> over, flags.GetDouble("oversubscription"));
  if (over) f.set_oversubscription(*over);
  VTRAIN_ASSIGN_OR_RETURN(std::optional<Placement> placement,
                          flags.GetParsed("placement", ParsePlacement));
  if (placement) f.set_placement(proto::ToProto(*placement));
  if (auto list = flags.Get("nodes")) {
    // Hostnames have letters; node numbers do not.
    const bool by_name = topology && std::any_of(list->begin(), list->end(),
                                                 [](char ch) { return absl::ascii_isalpha(ch); });
    VTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> nodes,
                            by_name ? NodesByName(*topology, *list) : ParseNodeList(*list));
    for (int64_t n : nodes) f.add_nodes(n);
  }
  return absl::OkStatus();
}

}  // namespace vtrain::client
