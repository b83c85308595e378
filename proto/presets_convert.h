// What a build knows, as the vtrain.v1 PresetsResponse: its model presets
// (core/spec/model.h) and GPU models (data/gpus, core/spec/gpu.h).
#ifndef VTRAIN_PROTO_PRESETS_CONVERT_H_
#define VTRAIN_PROTO_PRESETS_CONVERT_H_

#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

// Every model preset and every built-in GPU model, in their listing order.
v1::PresetsResponse PresetsToProto();

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_PRESETS_CONVERT_H_
