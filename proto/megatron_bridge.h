// A Megatron-Bridge / NeMo 2 ConfigContainer YAML dump (the run_config.yaml
// written beside each checkpoint, or ConfigContainer.to_yaml's file) as a
// vtrain.v1.PredictRequest. The YAML is read by proto/yaml_reader.h (bounded,
// no types constructed); each field is translated to the Megatron-LM argument
// that sets the same thing and mapped exactly as a launch script's argument
// is (proto/megatron_args.h), so both imports share one mapping: every field
// is mapped, listed as ignored because it does not change the step time, or
// refused by its YAML path when it does and vtrain does not model it.
#ifndef VTRAIN_PROTO_MEGATRON_BRIDGE_H_
#define VTRAIN_PROTO_MEGATRON_BRIDGE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/megatron_args.h"

namespace vtrain::proto {

// The most a config may hold (the YAML reader's limit).
inline constexpr size_t kMaxBridgeConfigBytes = 4 << 20;

// Reads `text` (`name` prefixes errors, with the line). The world size is
// data_parallel_size (comm_overlap's or dataset's) times t, p and c when the
// dump has it; otherwise job.notes says to give --gpus.
absl::StatusOr<MegatronJob> RequestFromBridgeConfig(absl::string_view text, absl::string_view name);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_MEGATRON_BRIDGE_H_
