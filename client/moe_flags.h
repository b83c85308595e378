// vtrainctl's Mixture-of-Experts and MLA flags: the model's experts and
// attention (--num-experts, --attention mla, ...), the plan's expert layout
// and routing (--ep, --etp, --moe-dispatcher, --routing, ...), and the
// search space's --ep-values / --etp-values; each parsed into the request.
#ifndef VTRAIN_CLIENT_MOE_FLAGS_H_
#define VTRAIN_CLIENT_MOE_FLAGS_H_

#include "absl/status/status.h"
#include "common/flag_parser.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::client {

// The model flags (with the other model flags).
void AddMoeModelFlags(common::FlagParser& p);
// --ep and --etp (with the other plan flags) and the routing flags.
void AddMoePlanFlags(common::FlagParser& p);
// --ep-values, --etp-values and the routing flags (search, curve, plan-model).
void AddMoeSpaceFlags(common::FlagParser& p);

// Each sets the request fields of the flags given; a bad value is
// INVALID_ARGUMENT naming the flag.
absl::Status MoeModelFromFlags(const common::FlagParser& flags, v1::ModelSpec& m);
absl::Status MoePlanFromFlags(const common::FlagParser& flags, v1::ParallelPlan& p);
absl::Status MoeSpaceFromFlags(const common::FlagParser& flags, v1::PlanSpace& s);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_MOE_FLAGS_H_
