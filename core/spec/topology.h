// Slurm's topology.conf (the topology/tree plugin's switch hierarchy) read
// as vtrain's two-tier leaf/spine fabric: the leaf switches (those with
// Nodes=) become leaves of equal size, their nodes the cluster's nodes in
// file order, and hostnames map to the node numbers `cluster.fabric.nodes`
// takes. Text in, structure out: the caller reads the file.
#ifndef VTRAIN_CORE_SPEC_TOPOLOGY_H_
#define VTRAIN_CORE_SPEC_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain {

struct SlurmTopology {
  // Cluster node i's hostname: the first leaf's nodes, then the next
  // leaf's, each leaf's in the order its Nodes= lists them.
  std::vector<std::string> node_names;
  int64_t nodes_per_leaf = 0;
  int64_t leaves = 0;
};

// The most nodes a topology or a hostlist may name: a million nodes, far past
// any cluster, before the names take much memory.
inline constexpr int64_t kMaxTopologyNodes = int64_t{1} << 20;

// Parses topology.conf text: one switch per line, `SwitchName=NAME` with
// `Nodes=HOSTLIST` (a leaf) or `Switches=HOSTLIST` (a spine over leaves),
// `LinkSpeed=` ignored, `#` comments. Refused, with `source` and the line
// number: unknown keys, a switch with both or neither of Nodes and
// Switches, a switch or node named twice, a spine over another spine or an
// unknown switch (vtrain models two tiers), leaves of different sizes, no
// leaf.
absl::StatusOr<SlurmTopology> ParseSlurmTopology(absl::string_view text, absl::string_view source);

// Expands a Slurm hostlist: comma-separated names, each with any number of
// bracketed ranges and lists, e.g. "dgx[001-004,010],login1" (zero padding
// kept as written). INVALID_ARGUMENT for unbalanced brackets, descending or
// malformed ranges, or more than kMaxTopologyNodes names.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view hostlist);

// The cluster node numbers of the hosts `hostlist` names, in its order.
// INVALID_ARGUMENT naming --nodes for a host not in `topology`.
absl::StatusOr<std::vector<int64_t>> NodesByName(const SlurmTopology& topology,
                                                 absl::string_view hostlist);

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_TOPOLOGY_H_
