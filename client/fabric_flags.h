// vtrainctl's fabric flags (cluster.fabric): a leaf/spine fabric by its leaf
// size or from a Slurm topology.conf, its oversubscription, and where the
// job's nodes sit (packed, spread, or the nodes listed by number or
// hostname); each parsed into the request.
#ifndef VTRAIN_CLIENT_FABRIC_FLAGS_H_
#define VTRAIN_CLIENT_FABRIC_FLAGS_H_

#include "absl/status/status.h"
#include "common/flag_parser.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::client {

// --nodes-per-leaf, --oversubscription, --placement, --cluster-nodes,
// --nodes and --topology-file (with the other cluster flags).
void AddFabricFlags(common::FlagParser& p);

// Sets the fields of the flags given; reads --topology-file. A bad value, a
// bad file or flags that contradict each other are INVALID_ARGUMENT naming
// the flag (or the file and line).
absl::Status FabricFromFlags(const common::FlagParser& flags, v1::Fabric& f);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_FABRIC_FLAGS_H_
