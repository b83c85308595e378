// Internal to proto/megatron_bridge.cc: how each field of a Megatron-Bridge
// ConfigContainer dump translates to a Megatron-LM argument (which
// proto/megatron_mapper.h then maps), or why it does not change the step
// time. Field names are those of Megatron-Core's TransformerConfig /
// ModelParallelConfig, DistributedDataParallelConfig and OptimizerConfig and
// Megatron-Bridge's GPTModelProvider / MLAModelProvider, TrainingConfig,
// DistributedInitConfig, MixedPrecisionConfig and CommOverlapConfig, read
// from Megatron-Bridge @067f987 (docs/megatron.md).
#ifndef VTRAIN_PROTO_MEGATRON_BRIDGE_FIELDS_H_
#define VTRAIN_PROTO_MEGATRON_BRIDGE_FIELDS_H_

#include "absl/strings/string_view.h"

namespace vtrain::proto::internal {

enum class BridgeKind {
  kValue,       // --flag VALUE (a list: --flag V1 V2 ...); nothing when null
  kSwitch,      // true: --flag; false: nothing (Megatron-LM's default is off)
  kNegated,     // false: --flag (a --no-... flag); true: nothing
  kSpecial,     // translated by code in megatron_bridge.cc
  kNoStepTime,  // listed as ignored with `why`
};

struct BridgeField {
  absl::string_view section;  // "model", "ddp", "optimizer", "train", "dist", "dataset", ...
  absl::string_view key;
  BridgeKind kind;
  absl::string_view flag_or_why;  // the flag (without "--") or why it is ignored
  bool prefix = false;            // `key` is a prefix of the field names
};

// The entry for `section`.`key`, or nullptr for a field the table does not
// know.
const BridgeField* FindBridgeField(absl::string_view section, absl::string_view key);

// A field's class default as a dump writes it ("false", "null", "1.0",
// "{_call_: false, _target_: torch.float32}") and whether it cannot change
// the step time; nullptr for a field of a Megatron-Bridge this table
// predates.
struct BridgeDefault {
  absl::string_view section, key, value;
  bool no_step_time;
};
const BridgeDefault* FindBridgeDefault(absl::string_view section, absl::string_view key);

// Why a whole top-level section does not change the step time ("" when it
// may and its fields are read one by one).
absl::string_view IgnoredBridgeSection(absl::string_view section);

}  // namespace vtrain::proto::internal

#endif  // VTRAIN_PROTO_MEGATRON_BRIDGE_FIELDS_H_
