// The compute-optimal model planner as vtrain.v1 messages: a PlanModelRequest
// as a core DesignSpec (defaults filled in, every violation named) and the
// result as a PlanModelResult.
#ifndef VTRAIN_PROTO_MODEL_DESIGN_CONVERT_H_
#define VTRAIN_PROTO_MODEL_DESIGN_CONVERT_H_

#include "absl/status/statusor.h"
#include "core/plan/model_design.h"
#include "proto/job_convert.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

// INVALID_ARGUMENT listing every violation, each naming the field and flag.
absl::StatusOr<DesignSpec> DesignSpecFromProto(const v1::PlanModelRequest& request,
                                               GpuLookup gpus = GpuByName);
void DesignResultToProto(const DesignResult& result, v1::PlanModelResult* out);
// The inverse question's answer: PlanModelResult.inverse and warnings.
void InverseResultToProto(const InverseResult& r, v1::PlanModelResult* out);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_MODEL_DESIGN_CONVERT_H_
