// Training settings: what a request leaves unset is filled from a named
// base, so that a job given as "model + plan" is the run its framework would
// launch. kTuned is the model's current public recipe (Megatron-Bridge's
// performance configs, NeMo's and Megatron-LM's example scripts), or the
// generic tuned Megatron-Core run for a custom shape; kMegatronDefaults is
// Megatron-LM's argparse defaults (every overlap off); kPaper is the vTrain
// paper's A100 setup (fp16, full recomputation, no overlap, unfused
// attention). Explicit values always win: the base only fills gaps.
#ifndef VTRAIN_CORE_SPEC_SETTINGS_H_
#define VTRAIN_CORE_SPEC_SETTINGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/spec/gpu.h"
#include "core/spec/job.h"
#include "core/spec/model.h"

namespace vtrain {

// "tuned", "megatron-defaults", "paper".
absl::string_view SettingsName(SettingsBase base);
// INVALID_ARGUMENT naming plan.settings and the three names otherwise.
absl::StatusOr<SettingsBase> ParseSettings(absl::string_view name);

// What a base sets. The switches marked "where allowed" are turned on only
// where the plan allows them (FillSettings), so a base never makes a valid
// plan invalid.
struct TrainingSettings {
  SettingsBase base = SettingsBase::kTuned;
  // Where they come from, for people: "Megatron-Bridge DeepSeek-V3 recipe".
  std::string source;
  DType dtype = DType::kBf16;
  Recompute recompute = Recompute::kNone;
  uint32_t recompute_modules = 0;  // RecomputeModule bits with kSelective
  bool sequence_parallel = false;  // a no-op at t = 1
  DataParallelSharding sharding = DataParallelSharding::kNone;
  bool gradient_bucketing = false;
  bool param_gather_overlap = false;  // where the distributed optimizer is on
  bool tp_comm_overlap = false;       // where sequence parallelism is in effect
  MoeDispatcher dispatcher = MoeDispatcher::kAllToAll;
  bool moe_overlap = false;  // where Megatron-Core allows the A2A overlap
  AttentionImpl attention_impl = AttentionImpl::kFlash;
  bool bf16_moments = false;  // the precision-aware optimizer's bf16 Adam moments
  bool fp32_grads = false;    // an fp32 gradient buffer, with bf16 or fp8 (not fp16)
};

// The settings `base` gives `model` (a preset by its name, else its shape)
// on `gpu`: bf16 where the GPU has it, fp16 where it does not (vtrain does
// not model fp32 training, Megatron-LM's own default).
TrainingSettings SettingsFor(SettingsBase base, const ModelSpec& model, const GpuSpec& gpu);

// Megatron-Core's conditions on the 1F1B A2A overlap (core/spec/moe.cc):
// EP > 1, an alltoall or flex dispatcher, no full recomputation, and
// interleaving when p > 1. A default overlap is turned on only where they hold.
bool AllowsMoeOverlap(const ParallelPlan& plan);

// Which of a job's settings a request gave; the others are filled.
struct GivenSettings {
  bool dtype = false, recompute = false, recompute_modules = false, sequence_parallel = false,
       sharding = false, gradient_bucketing = false, param_gather_overlap = false,
       tp_comm_overlap = false, dispatcher = false, moe_overlap = false, attention_impl = false,
       bf16_moments = false, fp32_grads = false;
};

// Fills every setting of `job` that `given` says was not given from
// SettingsFor(job.plan.settings, ...). The dependent switches follow the
// plan as resolved: the TP overlap only with sequence parallelism in effect,
// the parameter gather only with the distributed optimizer, the MoE overlap
// only where Megatron-Core allows it (EP > 1, an alltoall or flex
// dispatcher, no full recomputation, interleaving when p > 1); the
// preset's recomputed modules only when the recomputation was not given.
void FillSettings(const GivenSettings& given, Job& job);

// The settings a job ran with, for people: the base, its source, what the
// base sets, and what the job changed from it.
struct SettingsReport {
  std::string name;                  // "tuned"
  std::string source;                // "Megatron-Bridge Llama 3 70B performance recipe"
  std::vector<std::string> assumed;  // "bf16", "sequence parallel", ...
  std::vector<std::string> changed;  // "recompute full", "dtype fp8", ...
};
SettingsReport DescribeSettings(const Job& job);
// One line: "tuned (source): a, b, c; changed: x, y".
std::string SettingsLine(const SettingsReport& report);

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_SETTINGS_H_
