// A vtrain.v1.PredictRequest as a core job: the one place where a request's
// defaults are filled in and the job is validated (flags, job files, vTrain
// configs and RPCs all become a request first).
#ifndef VTRAIN_PROTO_JOB_CONVERT_H_
#define VTRAIN_PROTO_JOB_CONVERT_H_

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/predict/predictor.h"
#include "core/spec/job.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

// The GPU of a ClusterSpec that names none.
inline constexpr char kDefaultGpu[] = "a100-sxm4-80gb";

// Finds a GPU's figures by name: GpuByName for this build's GPUs; a server
// also finds those of GPUs a pushed profile set carries a datasheet for
// (service::ProfileSource::GpuFor). NOT_FOUND or INVALID_ARGUMENT otherwise.
using GpuLookup = absl::FunctionRef<absl::StatusOr<GpuSpec>(absl::string_view)>;

// The job of a request, defaults filled in (see the comments in
// vtrain.proto) and validated: INVALID_ARGUMENT lists every violation, each
// naming the field path ("plan.tensor_parallel") and the fix.
// Lays `over`'s given fields over `base` (they win): a list `over` gives
// replaces base's, and a GPU count `over` gives leaves d to follow it. How a
// request's fields, or vtrainctl's flags, override a job file or a launch.
void LayRequestOver(const v1::PredictRequest& over, v1::PredictRequest& base);

absl::StatusOr<Job> JobFromProto(const v1::PredictRequest& request, GpuLookup gpus = GpuByName);

// The prediction options of a request (granularity, training tokens):
// INVALID_ARGUMENT naming the field for an unknown granularity or a negative
// or non-finite token count. max_tasks and cancellation are the caller's.
absl::StatusOr<PredictOptions> OptionsFromProto(const v1::PredictRequest& request);

// The model and cluster parts of a request, defaults filled in; errors name
// the field (model.preset, cluster.gpu...). Shared by predictions and searches.
absl::StatusOr<ModelSpec> ModelFromProto(const v1::ModelSpec& model);
absl::StatusOr<ClusterSpec> ClusterFromProto(const v1::ClusterSpec& cluster,
                                             GpuLookup gpus = GpuByName);

// The request that describes `job` (every default written out); the model's
// preset name is kept unless the model is custom.
v1::PredictRequest JobToProto(const Job& job);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_JOB_CONVERT_H_
