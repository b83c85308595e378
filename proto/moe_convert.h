// The Mixture-of-Experts and MLA parts of vtrain.v1.ModelSpec and
// ParallelPlan, to core types and back (job_convert.cc calls these).
#ifndef VTRAIN_PROTO_MOE_CONVERT_H_
#define VTRAIN_PROTO_MOE_CONVERT_H_

#include <string>
#include <vector>

#include "core/spec/job.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

// Lays the given MoE, MLA, head_dim and MTP fields of `m` over `model` (a
// preset's or the defaults); appends a message per bad field to `problems`.
void MoeModelFromProto(const v1::ModelSpec& m, ModelSpec& model,
                       std::vector<std::string>& problems);
// The same for the plan's expert fields.
void MoePlanFromProto(const v1::ParallelPlan& p, ParallelPlan& plan,
                      std::vector<std::string>& problems);

// Writes the fields that differ from a dense model's defaults.
void MoeModelToProto(const ModelSpec& model, v1::ModelSpec& m);
void MoePlanToProto(const ParallelPlan& plan, v1::ParallelPlan& p);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_MOE_CONVERT_H_
