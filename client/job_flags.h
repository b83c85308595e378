// The flags that describe a job (model, plan, cluster) on vtrainctl command
// lines, turned into vtrain.v1 messages. Flags only parse here (integers,
// units, names); proto::JobFromProto fills the defaults and validates, the
// same function a server runs on an RPC.
#ifndef VTRAIN_CLIENT_JOB_FLAGS_H_
#define VTRAIN_CLIENT_JOB_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/flag_parser.h"
#include "core/spec/job.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::client {

// --model, --layers, --hidden, --heads, --seq-len, --vocab, --ffn.
void AddModelFlags(common::FlagParser& parser);
// --gpu, --gpus-per-node, --intra-/--inter-node-bandwidth, --price-usd-per-gpu-hour,
// and the reliability flags (--node-failure-rate, --checkpoint-gbps,
// --async-checkpoint, --restart-minutes, --checkpoint-interval).
void AddClusterFlags(common::FlagParser& parser);
// The reliability flags given, over `r`.
absl::Status ReliabilityFromFlags(const common::FlagParser& flags, v1::Reliability& r);
// -f/--job-file, --vtrain-config, the model and cluster flags, --gpus and the
// plan flags (--tp, --pp, --dp, --micro-batch, --global-batch, --schedule...).
void AddJobFlags(common::FlagParser& parser);

// The training-option lists of search, curve and plan-model:
// --recompute-values none,selective,full, --cp-values,
// --virtual-stages-values, --sequence-parallel-values on,off and
// --sharding-values none,optimizer,full.
void AddTrainingSpaceFlags(common::FlagParser& parser);
// The plan space of search, curve and plan-model from whichever of these
// flags the command has and were given: --tp-values (or curve's --max-tp),
// --max-dp, --max-micro-batch, --schedules, and the training-space flags
// above. INVALID_ARGUMENT naming the flag for a value that does not parse;
// ranges are checked by proto::PlanSpaceFromProto, on either side.
absl::StatusOr<v1::PlanSpace> PlanSpaceFromFlags(const common::FlagParser& flags);

// The model and cluster messages of their flags (absent flags stay unset).
absl::StatusOr<v1::ModelSpec> ModelSpecFromFlags(const common::FlagParser& flags);
absl::StatusOr<v1::ClusterSpec> ClusterSpecFromFlags(const common::FlagParser& flags);

// The request the job flags describe: read from -f FILE (a PredictRequest in
// JSON), from --vtrain-config FILE, or built from the flags. INVALID_ARGUMENT
// for a flag that does not parse, a file that does not read, or a file mixed
// with job flags.
// With --megatron-args, the launch's request with the other job flags laid
// over it; `notes` (when given) receives what the launch read ignored or
// assumed, for the command to print.
// Whether the job comes from a launch (--megatron-args or
// --megatron-bridge-config).
bool HasLaunch(const common::FlagParser& flags);

absl::StatusOr<v1::PredictRequest> RequestFromFlags(const common::FlagParser& flags,
                                                    std::vector<std::string>* notes = nullptr);

// A request as the vtrainctl flags that give it (--print-flags).
std::string FlagsOf(const v1::PredictRequest& request);

// RequestFromFlags, then proto::JobFromProto (errors from a file name it).
absl::StatusOr<Job> JobFromFlags(const common::FlagParser& flags);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_JOB_FLAGS_H_
