// The flags that describe a job (model, plan, cluster) on vtrainctl command
// lines, and their translation into a core Job.
#ifndef VTRAIN_CLIENT_JOB_FLAGS_H_
#define VTRAIN_CLIENT_JOB_FLAGS_H_

#include "absl/status/statusor.h"
#include "client/flag_parser.h"
#include "core/spec/job.h"

namespace vtrain::cli {

// Declares --model, --layers ... --gpu, --gpus ... --tp, --pp, --dp ... on `parser`.
void AddJobFlags(FlagParser& parser);

// The cluster of --gpu, --gpus-per-node, --intra-/--inter-node-bandwidth and
// --price-usd-per-gpu-hour (num_gpus left 0), the GPU's defaults filled in.
absl::StatusOr<ClusterSpec> ClusterFromFlags(const FlagParser& flags);

// Builds the job from parsed flags. Fills defaults (GPU a100-sxm4-80gb, its
// bandwidths, t = p = 1, micro-batch 1, d = GPUs / (t * p)) and validates the
// result; INVALID_ARGUMENT lists every problem, NOT_FOUND an unknown preset.
absl::StatusOr<Job> JobFromFlags(const FlagParser& flags);

}  // namespace vtrain::cli

#endif  // VTRAIN_CLIENT_JOB_FLAGS_H_
