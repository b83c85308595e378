#include "core/spec/settings.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/enum_names.h"

namespace vtrain {
namespace {

constexpr EnumName<SettingsBase> kBases[] = {{SettingsBase::kTuned, "tuned"},
                                             {SettingsBase::kMegatronDefaults, "megatron-defaults"},
                                             {SettingsBase::kPaper, "paper"}};

// A preset's public recipe where it differs from the generic tuned run
// (bf16, sequence parallelism, the distributed optimizer, gradient reduce,
// parameter gather and TP communication overlapped, no recomputation).
// Settings only, read from the recipes' configuration files (never fitted
// to a published step time); docs/settings.md lists each file. MB:
// NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/perf_recipes/ at 067f987.
struct PresetRecipe {
  absl::string_view preset;
  absl::string_view source;
  Recompute recompute = Recompute::kNone;
  uint32_t recompute_modules = 0;
  MoeDispatcher dispatcher = MoeDispatcher::kAllToAll;
  bool moe_overlap = false;
  bool gradient_bucketing = true;  // overlap_grad_reduce
  bool tp_comm_overlap = true;
  bool bf16_moments = false;  // use_precision_aware_optimizer, exp_avg(_sq)_dtype bf16
};

constexpr PresetRecipe kRecipes[] = {
    // MB deepseek/h100/deepseek_v3.py: flex (HybridEP) dispatcher, no 1F1B
    // A2A overlap, selective recomputation of the dense MLP and MLA's
    // up-projections, overlap_grad_reduce off, no TP overlap.
    // And the precision-aware optimizer with bf16 moments and main grads.
    {"deepseek-v3", "Megatron-Bridge DeepSeek-V3 H100 performance recipe", Recompute::kSelective,
     kRecomputeMlp | kRecomputeMlaUpProj, MoeDispatcher::kHybridEp, false, false, false, true},
    // MB qwen/h100/qwen3_moe.py: 30B-A3B flex (HybridEP) with the A2A
    // overlap; 235B-A22B alltoall with the overlap, no TP overlap.
    {"qwen3-30b-a3b", "Megatron-Bridge Qwen3-30B-A3B H100 performance recipe", Recompute::kNone, 0,
     MoeDispatcher::kHybridEp, true},
    {"qwen3-235b-a22b", "Megatron-Bridge Qwen3-235B-A22B H100 performance recipe", Recompute::kNone,
     0, MoeDispatcher::kAllToAll, true, true, false},
    // MB gpt_oss/h100/gpt_oss.py: alltoall without the overlap; 120B
    // recomputes the norms and the experts' activation, 20B (canonical
    // recipe, no H100 performance recipe) nothing.
    {"gpt-oss-120b", "Megatron-Bridge GPT-OSS-120B H100 performance recipe", Recompute::kSelective,
     kRecomputeLayernorm | kRecomputeMoeAct, MoeDispatcher::kAllToAll, false},
    {"gpt-oss-20b", "Megatron-Bridge GPT-OSS-20B recipe", Recompute::kNone, 0,
     MoeDispatcher::kAllToAll, false},
    // NeMo scripts/performance/llm/pretrain_mixtral_*.py: alltoall, no
    // overlap, no TP overlap (its token-drop callback is not applied: dropless).
    {"mixtral-8x7b", "NeMo Mixtral 8x7B performance recipe", Recompute::kNone, 0,
     MoeDispatcher::kAllToAll, false, true, false},
    {"mixtral-8x22b", "NeMo Mixtral 8x22B performance recipe", Recompute::kNone, 0,
     MoeDispatcher::kAllToAll, false, true, false},
};

const PresetRecipe* RecipeOf(const ModelSpec& model) {
  for (const PresetRecipe& r : kRecipes) {
    if (r.preset == model.name) return &r;
  }
  return nullptr;
}

bool HasBf16(const GpuSpec& gpu) { return gpu.peak_bf16_flops_per_s > 0; }

}  // namespace

bool AllowsMoeOverlap(const ParallelPlan& plan) {
  return plan.expert_parallel > 1 && plan.moe.dispatcher != MoeDispatcher::kAllGather &&
         plan.recompute != Recompute::kFull && !plan.recomputes(kRecomputeMoe) &&
         (plan.pipeline_parallel == 1 || IsDualPipe(plan.schedule) ||
          (plan.schedule == PipelineSchedule::k1F1B && plan.virtual_stages >= 2));
}

absl::string_view SettingsName(SettingsBase base) { return NameIn(kBases, base); }

absl::StatusOr<SettingsBase> ParseSettings(absl::string_view name) {
  return ParseIn(kBases, name, "plan.settings");
}

TrainingSettings SettingsFor(SettingsBase base, const ModelSpec& model, const GpuSpec& gpu) {
  TrainingSettings s;
  s.base = base;
  s.dtype = HasBf16(gpu) ? DType::kBf16 : DType::kFp16;
  switch (base) {
    case SettingsBase::kPaper:
      // vTrain (Bang et al., MICRO 2024), §V: Megatron-LM on A100, fp16,
      // full activation recomputation, no overlaps, unfused attention.
      s.source = "the vTrain paper's A100 runs";
      s.dtype = DType::kFp16;
      s.recompute = Recompute::kFull;
      // Unfused where vtrain models it (MLA runs fused in Megatron-Core).
      if (model.attention != AttentionKind::kMla) s.attention_impl = AttentionImpl::kUnfused;
      return s;
    case SettingsBase::kMegatronDefaults:
      // megatron/training/arguments.py: every switch below is off by
      // default; no --recompute-granularity; Transformer Engine's fused
      // attention.
      s.source = "Megatron-LM's argument defaults";
      s.dispatcher = MoeDispatcher::kAllGather;  // --moe-token-dispatcher-type
      // With --bf16 gradients accumulate in fp32 unless --grad-reduce-in-bf16
      // (arguments.py); Megatron-Bridge's performance recipes turn it off.
      s.fp32_grads = true;
      return s;
    case SettingsBase::kTuned:
      break;
  }
  s.sequence_parallel = true;
  s.sharding = DataParallelSharding::kOptimizer;
  s.gradient_bucketing = true;
  s.param_gather_overlap = true;
  s.tp_comm_overlap = true;
  s.source = model.is_moe() ? "the generic tuned Megatron-Core MoE run"
                            : "the generic tuned Megatron-Core run";
  if (const PresetRecipe* r = RecipeOf(model)) {
    s.source = std::string(r->source);
    s.recompute = r->recompute;
    s.recompute_modules = r->recompute_modules;
    s.dispatcher = r->dispatcher;
    s.moe_overlap = r->moe_overlap;
    s.gradient_bucketing = r->gradient_bucketing;
    s.tp_comm_overlap = r->tp_comm_overlap;
    s.bf16_moments = r->bf16_moments;
  } else if (ModelPreset(model.name).ok()) {
    s.source = "the Megatron-Bridge / NeMo dense performance recipes";
  }
  return s;
}

void FillSettings(const GivenSettings& given, Job& job) {
  const TrainingSettings s = SettingsFor(job.plan.settings, job.model, job.cluster.gpu);
  ParallelPlan& plan = job.plan;
  if (!given.dtype) plan.dtype = s.dtype;
  if (!given.recompute) {
    plan.recompute = s.recompute;
    if (!given.recompute_modules) plan.recompute_modules = s.recompute_modules;
  }
  // A module the model does not have is not recomputed (a custom dense
  // shape under a MoE recipe's modules).
  if (!given.recompute_modules && plan.recompute == Recompute::kSelective) {
    if (!job.model.is_moe()) plan.recompute_modules &= ~(kRecomputeMoe | kRecomputeMoeAct);
    if (job.model.attention != AttentionKind::kMla) plan.recompute_modules &= ~kRecomputeMlaUpProj;
  }
  if (!given.sequence_parallel) plan.sequence_parallel = s.sequence_parallel;
  if (!given.sharding) plan.data_parallel_sharding = s.sharding;
  if (!given.gradient_bucketing) plan.gradient_bucketing = s.gradient_bucketing;
  if (!given.param_gather_overlap) {
    plan.param_gather_overlap =
        s.param_gather_overlap && plan.data_parallel_sharding == DataParallelSharding::kOptimizer;
  }
  if (!given.tp_comm_overlap) {
    plan.tp_comm_overlap = s.tp_comm_overlap && plan.sequence_parallel_active();
  }
  if (!given.attention_impl) job.model.attention_impl = s.attention_impl;
  if (!given.bf16_moments) plan.bf16_moments = s.bf16_moments;
  if (!given.fp32_grads) plan.fp32_grads = s.fp32_grads && plan.dtype != DType::kFp16;
  if (!job.model.is_moe()) return;
  if (!given.dispatcher) plan.moe.dispatcher = s.dispatcher;
  if (!given.moe_overlap) plan.moe.overlap = s.moe_overlap && AllowsMoeOverlap(plan);
}

namespace {

// The settings of `s` (or of `plan`) as words, one per switch.
std::vector<std::string> Words(const TrainingSettings& s, bool moe) {
  std::vector<std::string> w;
  w.push_back(std::string(DTypeName(s.dtype)));
  w.push_back(
      s.recompute == Recompute::kSelective && s.recompute_modules != 0
          ? absl::StrCat("recompute selective (", RecomputeModulesName(s.recompute_modules), ")")
          : absl::StrCat("recompute ", RecomputeName(s.recompute)));
  w.push_back(s.sequence_parallel ? "sequence parallel" : "no sequence parallel");
  w.push_back(s.sharding == DataParallelSharding::kOptimizer ? "distributed optimizer"
              : s.sharding == DataParallelSharding::kFull    ? "FSDP"
                                                             : "replicated optimizer");
  w.push_back(s.gradient_bucketing ? "grad reduce overlapped" : "grad reduce not overlapped");
  if (s.sharding == DataParallelSharding::kOptimizer) {
    w.push_back(s.param_gather_overlap ? "param gather overlapped" : "param gather not overlapped");
  }
  w.push_back(s.tp_comm_overlap ? "TP comm overlapped" : "TP comm not overlapped");
  if (moe) {
    w.push_back(absl::StrCat(DispatcherName(s.dispatcher), " dispatcher"));
    w.push_back(s.moe_overlap ? "A2A overlapped" : "A2A not overlapped");
  }
  w.push_back(s.attention_impl == AttentionImpl::kUnfused ? "unfused attention"
                                                          : "flash attention");
  w.push_back(s.bf16_moments ? "bf16 optimizer moments" : "fp32 optimizer moments");
  w.push_back(s.fp32_grads && s.dtype != DType::kFp16 ? "fp32 gradient buffer"
                                                      : "16-bit gradient buffer");
  return w;
}

// The settings `job` runs with, as TrainingSettings (sequence parallelism
// as in effect: a no-op at t = 1 is not a setting).
TrainingSettings RunOf(const Job& job) {
  const ParallelPlan& p = job.plan;
  TrainingSettings r;
  r.dtype = p.dtype;
  r.recompute = p.recompute;
  r.recompute_modules = p.recompute_modules;
  r.sequence_parallel = p.sequence_parallel_active();
  r.sharding = p.data_parallel_sharding;
  r.gradient_bucketing = p.gradient_bucketing;
  r.param_gather_overlap = p.param_gather_overlap;
  r.tp_comm_overlap = p.tp_comm_overlap;
  r.dispatcher = p.moe.dispatcher;
  r.moe_overlap = p.moe.overlap;
  r.attention_impl = job.model.attention_impl;
  r.bf16_moments = p.bf16_moments;
  r.fp32_grads = p.fp32_grads;
  return r;
}

}  // namespace

SettingsReport DescribeSettings(const Job& job) {
  const TrainingSettings s = SettingsFor(job.plan.settings, job.model, job.cluster.gpu);
  SettingsReport r;
  r.name = std::string(SettingsName(s.base));
  r.source = s.source;
  const bool moe = job.model.is_moe();
  r.assumed = Words(s, moe);
  // What the job runs, word for word against the base: the base's
  // switches that the plan cannot use (the TP overlap at t = 1) are not
  // changes, so they are compared as the plan would fill them.
  Job filled = job;
  FillSettings(GivenSettings{}, filled);
  const std::vector<std::string> base = Words(RunOf(filled), moe);
  const std::vector<std::string> ran = Words(RunOf(job), moe);
  for (const std::string& word : ran) {
    if (std::find(base.begin(), base.end(), word) == base.end()) r.changed.push_back(word);
  }
  return r;
}

std::string SettingsLine(const SettingsReport& r) {
  std::string line = absl::StrCat(r.name, " (", r.source, "): ", absl::StrJoin(r.assumed, ", "));
  if (!r.changed.empty()) absl::StrAppend(&line, "; changed: ", absl::StrJoin(r.changed, ", "));
  return line;
}

}  // namespace vtrain
