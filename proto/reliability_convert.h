// cluster.reliability and the goodput of an answer, between vtrain.v1
// messages and core (core/spec/reliability.h, core/predict/goodput.h).
#ifndef VTRAIN_PROTO_RELIABILITY_CONVERT_H_
#define VTRAIN_PROTO_RELIABILITY_CONVERT_H_

#include "core/predict/goodput.h"
#include "core/spec/reliability.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

// The given fields over the defaults; ranges are checked by ValidateJob.
ReliabilitySpec ReliabilityFromProto(const v1::Reliability& in);
// Every field written out.
void ReliabilityToProto(const ReliabilitySpec& r, v1::Reliability* out);

void GoodputToProto(const Goodput& g, v1::Goodput* out);
Goodput GoodputFromProto(const v1::Goodput& in);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_RELIABILITY_CONVERT_H_
