// The settings a plan space leaves unset, filled from its settings base, and
// the degrees a tuned space tries (declared in core/plan/search.h).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/plan/search.h"
#include "core/spec/settings.h"

namespace vtrain {
TunedDegrees TunedDegreesFor(const ModelSpec& model) {
  TunedDegrees d;
  d.pipeline_parallel = Divisors(model.num_layers);
  for (int64_t p = 2; p <= model.num_layers && p <= 128; p *= 2) d.pipeline_parallel.push_back(p);
  // Every depth up to 16, laid out unevenly where it does not divide the
  // layers: GPU counts with a factor 3, 5 or 7 have a plan.
  for (int64_t p = 2; p <= model.num_layers && p <= 16; ++p) d.pipeline_parallel.push_back(p);
  std::sort(d.pipeline_parallel.begin(), d.pipeline_parallel.end());
  d.pipeline_parallel.erase(std::unique(d.pipeline_parallel.begin(), d.pipeline_parallel.end()),
                            d.pipeline_parallel.end());
  d.virtual_stages = {1, 2, 4, 8};
  d.context_parallel = {1};
  if (model.seq_len >= 8192) d.context_parallel.push_back(2);
  if (model.seq_len >= 16384) d.context_parallel.insert(d.context_parallel.end(), {4, 8});
  d.expert_parallel = {1};
  if (model.is_moe()) {
    for (int64_t ep = 2; ep <= 64 && ep <= model.moe.num_experts; ep *= 2) {
      if (model.moe.num_experts % ep == 0) d.expert_parallel.push_back(ep);
    }
  }
  return d;
}

void FillSpaceSettings(const GivenSpace& given, const GpuSpec& gpu, ModelSpec& model,
                       PlanSpace& space, DType& dtype) {
  const TrainingSettings s = SettingsFor(space.settings, model, gpu);
  if (s.base == SettingsBase::kTuned) {
    const TunedDegrees d = TunedDegreesFor(model);
    if (!given.pipeline_parallel) space.training.pipeline_parallel = d.pipeline_parallel;
    if (!given.virtual_stages) space.training.virtual_stages = d.virtual_stages;
    if (!given.context_parallel) space.training.context_parallel = d.context_parallel;
    if (!given.expert_parallel) space.training.expert_parallel = d.expert_parallel;
  }
  if (!given.dtype) dtype = s.dtype;
  if (!given.attention_impl) model.attention_impl = s.attention_impl;
  if (!given.recomputes) {
    // Tuned: what an expert tries (none, the recipe's selective modules or
    // Megatron's core_attn, full); the other bases their one value.
    space.recomputes = {s.recompute};
    if (s.base == SettingsBase::kTuned) {
      space.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
    }
  }
  uint32_t modules = s.recompute_modules;
  if (!model.is_moe()) modules &= ~(kRecomputeMoe | kRecomputeMoeAct);
  if (model.attention != AttentionKind::kMla) modules &= ~kRecomputeMlaUpProj;
  space.recompute_modules = modules;
  if (!given.sequence_parallel) space.training.sequence_parallel = {s.sequence_parallel};
  if (!given.shardings) space.training.shardings = {s.sharding};
  if (!given.gradient_bucketing) space.gradient_bucketing = s.gradient_bucketing;
  if (!given.tp_comm_overlap) space.tp_comm_overlap = s.tp_comm_overlap;
  if (!given.param_gather_overlap) space.param_gather_overlap = s.param_gather_overlap;
  if (!model.is_moe()) return;
  if (!given.dispatcher) space.moe.dispatcher = s.dispatcher;
  if (!given.moe_overlap) space.moe.overlap = s.moe_overlap;
}

}  // namespace vtrain
