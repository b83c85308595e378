// Throughput curves as vtrain.v1 messages: a ThroughputCurveRequest as one
// core CurveSpec per job (defaults filled in, every violation reported), and
// the curves as a ThroughputCurveResponse.
#ifndef VTRAIN_PROTO_CURVE_CONVERT_H_
#define VTRAIN_PROTO_CURVE_CONVERT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/curve.h"
#include "proto/job_convert.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

inline constexpr int kMaxCurveJobs = 64;
inline constexpr int kMaxCurvePoints = 1024;

struct CurveCall {
  std::vector<std::string> names;  // one per spec
  std::vector<CurveSpec> specs;
};

// INVALID_ARGUMENT listing every violation, each naming the field
// ("jobs[2].model.preset", "gpu_counts") and the fix.
absl::StatusOr<CurveCall> CurveCallFromProto(const v1::ThroughputCurveRequest& request,
                                             GpuLookup gpus = GpuByName);

void CurveToProto(const std::string& name, const std::vector<CurvePoint>& points, v1::Curve* out);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_CURVE_CONVERT_H_
