// A Megatron-LM / Megatron-Core launch as a vtrain.v1.PredictRequest: a
// `torchrun ... pretrain_gpt.py ...` script (read by proto/shell_words.h,
// never run) or a bare argument list. Every argument is mapped onto the
// request, listed as ignored because it does not change the step time
// (data, logging, evaluation, checkpoints, learning rate), or refused by
// name when it changes the step time and vtrain does not model it.
#ifndef VTRAIN_PROTO_MEGATRON_ARGS_H_
#define VTRAIN_PROTO_MEGATRON_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

struct MegatronJob {
  // The job: model, plan, the world size (cluster.num_gpus, gpus_per_node)
  // when the launch says it; plan.settings megatron-defaults, so that what
  // the script leaves unset is Megatron-LM's default, as it would run.
  v1::PredictRequest request;
  std::vector<std::string> ignored;  // "--lr (learning rate)", each once
  std::vector<std::string> notes;    // what was assumed or not read
  // What the launch does not say and the caller must: the vtrainctl flag
  // that would give it, and the message if it does not.
  struct Missing {
    std::string flag, message;
  };
  std::vector<Missing> missing;
};

// The launch's request with `over`'s fields laid over it (they win; a
// list `over` gives replaces the launch's; a GPU count `over` gives leaves d
// to follow it). INVALID_ARGUMENT for what the launch does not say and
// `over` does not give either (job.missing).
absl::StatusOr<v1::PredictRequest> LayOver(MegatronJob job, const v1::PredictRequest& over);

// Reads `text` (a launch script or an argument list; `name` prefixes
// errors). INVALID_ARGUMENT names the argument (and the script's line) for
// an unknown or unmodelled argument, a value that does not parse, shell it
// cannot read.
absl::StatusOr<MegatronJob> RequestFromMegatronArgs(absl::string_view text, absl::string_view name);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_MEGATRON_ARGS_H_
