#include "proto/search_convert.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/predict/predictor.h"
#include "core/spec/pipeline_layout.h"
#include "proto/enum_convert.h"
#include "proto/job_convert.h"
#include "proto/moe_convert.h"
#include "proto/prediction_convert.h"

namespace vtrain::proto {
namespace {

constexpr int64_t kMaxGpus = int64_t{1} << 24;
constexpr int kDefaultTop = 10;
constexpr int kMaxTop = 1000;

// Appends the distinct values of a repeated enum, mapped to core, to `into`
// (cleared first when the list is not empty).
template <typename ProtoEnum, typename Core>
void EnumList(const google::protobuf::RepeatedField<int>& list, const char* field, Core fallback,
              std::vector<Core>& into, std::vector<std::string>& problems) {
  if (!list.empty()) into.clear();
  for (int i = 0; i < list.size(); ++i) {
    absl::StatusOr<Core> v = FromProtoOr(static_cast<ProtoEnum>(list.Get(i)), fallback,
                                         absl::StrCat(field, "[", i, "]"));
    if (!v.ok()) {
      problems.emplace_back(v.status().message());
    } else if (std::find(into.begin(), into.end(), *v) == into.end()) {
      into.push_back(*v);
    }
  }
}

void PlanToProto(const PlanResult& p, v1::PlanSummary* out) {
  *out->mutable_plan() = JobToProto(p.job).plan();
  // A plan the automatic layout lays out unevenly says how (Megatron's
  // notation), so that it can be given back as it ran.
  if (p.job.plan.layout.is_default()) {
    absl::StatusOr<std::vector<ChunkLayers>> chunks = ResolvePipelineLayout(p.job);
    if (chunks.ok() && !IsEvenLayout(*chunks)) {
      out->mutable_plan()->set_pipeline_layout(FormatPipelineLayout(*chunks));
    }
  }
  out->set_gpus(p.job.cluster.num_gpus);
  out->set_iteration_time_ms(p.iteration_time_ms);
  out->set_training_days(p.training_days);
  out->set_cost_usd(p.cost_usd);
  out->set_expected_days(p.expected_days);
  out->set_expected_cost_usd(p.expected_cost_usd);
  out->set_goodput(p.goodput);
  out->set_peak_memory_bytes(p.peak_memory_bytes);
  // MFU as Predict reports it: model FLOPs over the job's GPUs' peak.
  const double peak =
      static_cast<double>(JobGpus(p.job)) * p.job.cluster.gpu.PeakFlops(p.job.plan.dtype);
  if (p.iteration_time_ms > 0 && peak > 0) {
    out->set_mfu(ModelFlopsPerIteration(p.job) / (p.iteration_time_ms * 1e-3 * peak));
  }
  SimulationToProto(p.simulation, out->mutable_simulation());
}

}  // namespace

void PlanSpaceFromProto(const v1::PlanSpace& in, PlanSpace& space,
                        std::vector<std::string>& problems) {
  // A list of degrees: each in [1, 1024], repeats removed, at most
  // kMaxSearchListSize of them.
  auto ints = [&](const google::protobuf::RepeatedField<int64_t>& values, const char* field,
                  const char* flag, std::vector<int64_t>& out) {
    if (values.empty()) return;
    out.clear();
    for (int64_t v : values) {
      if (v < 1 || v > 1024) {
        problems.push_back(
            absl::StrCat("space.", field, " value ", v, " (", flag, ") must be in [1, 1024]"));
      } else if (std::find(out.begin(), out.end(), v) == out.end()) {
        out.push_back(v);
      }
    }
    if (out.size() > static_cast<size_t>(kMaxSearchListSize)) {
      problems.push_back(absl::StrCat("space.", field, " has ", out.size(),
                                      " distinct values; give at most ", kMaxSearchListSize));
    }
  };
  ints(in.tensor_parallel(), "tensor_parallel", "--tp-values", space.tensor_parallel);
  ints(in.context_parallel_values(), "context_parallel_values", "--cp-values",
       space.training.context_parallel);
  ints(in.virtual_stages_values(), "virtual_stages_values", "--virtual-stages-values",
       space.training.virtual_stages);
  ints(in.pipeline_parallel_values(), "pipeline_parallel_values", "--pp-values",
       space.training.pipeline_parallel);
  ints(in.expert_parallel_values(), "expert_parallel_values", "--ep-values",
       space.training.expert_parallel);
  ints(in.expert_tensor_parallel_values(), "expert_tensor_parallel_values", "--etp-values",
       space.training.expert_tensor_parallel);
  {
    v1::ParallelPlan routing;
    routing.set_moe_dispatcher(in.moe_dispatcher());
    if (in.has_moe_overlap()) routing.set_moe_overlap(in.moe_overlap());
    if (in.has_capacity_factor()) routing.set_capacity_factor(in.capacity_factor());
    if (in.has_routing_sigma()) routing.set_routing_sigma(in.routing_sigma());
    ParallelPlan plan;
    MoePlanFromProto(routing, plan, problems);
    space.moe = plan.moe;
  }
  if (in.max_data_parallel() < 0 || in.max_micro_batch() < 0) {
    problems.push_back(
        "space.max_data_parallel (--max-dp) and space.max_micro_batch (--max-micro-batch) must "
        "not be negative (0: no bound)");
  }
  space.gradient_bucketing = in.gradient_bucketing();
  space.tp_comm_overlap = in.tp_comm_overlap();
  space.param_gather_overlap = in.param_gather_overlap();
  if (absl::StatusOr<SettingsBase> base =
          FromProtoOr(in.settings(), SettingsBase::kTuned, "space.settings");
      base.ok()) {
    space.settings = *base;
  } else {
    problems.emplace_back(base.status().message());
  }
  {
    absl::StatusOr<Fp8Recipe> recipe =
        FromProtoOr(in.fp8_recipe(), Fp8Recipe::kDelayed, "space.fp8_recipe");
    if (recipe.ok()) {
      space.fp8_recipe = *recipe;
    } else {
      problems.emplace_back(recipe.status().message());
    }
    absl::StatusOr<ContextParallelComm> comm =
        FromProtoOr(in.cp_comm(), ContextParallelComm::kP2P, "space.cp_comm");
    if (comm.ok()) {
      space.cp_comm = *comm;
    } else {
      problems.emplace_back(comm.status().message());
    }
  }
  space.max_data_parallel = in.max_data_parallel();
  space.max_micro_batch = in.max_micro_batch();
  EnumList<v1::PipelineSchedule>(in.schedules(), "space.schedules", PipelineSchedule::k1F1B,
                                 space.schedules, problems);
  EnumList<v1::Recompute>(in.recomputes(), "space.recomputes", Recompute::kFull, space.recomputes,
                          problems);
  if (!in.sequence_parallel_values().empty()) {
    space.training.sequence_parallel.clear();
    for (bool v : in.sequence_parallel_values()) {
      if (std::find(space.training.sequence_parallel.begin(),
                    space.training.sequence_parallel.end(),
                    v) == space.training.sequence_parallel.end()) {
        space.training.sequence_parallel.push_back(v);
      }
    }
  }
  EnumList<v1::DataParallelSharding>(in.shardings(), "space.shardings", DataParallelSharding::kNone,
                                     space.training.shardings, problems);
}

GivenSpace GivenSpaceOf(const v1::PlanSpace& in, v1::DType dtype, const v1::ModelSpec& model) {
  GivenSpace g;
  g.dtype = dtype != v1::DTYPE_UNSPECIFIED;
  g.recomputes = !in.recomputes().empty();
  g.sequence_parallel = !in.sequence_parallel_values().empty();
  g.shardings = !in.shardings().empty();
  g.gradient_bucketing = in.has_gradient_bucketing();
  g.tp_comm_overlap = in.has_tp_comm_overlap();
  g.param_gather_overlap = in.has_param_gather_overlap();
  g.dispatcher = in.moe_dispatcher() != v1::MOE_DISPATCHER_UNSPECIFIED;
  g.moe_overlap = in.has_moe_overlap();
  g.attention_impl = model.attention_impl() != v1::ATTENTION_IMPL_UNSPECIFIED;
  g.pipeline_parallel = !in.pipeline_parallel_values().empty();
  g.virtual_stages = !in.virtual_stages_values().empty();
  g.context_parallel = !in.context_parallel_values().empty();
  g.expert_parallel = !in.expert_parallel_values().empty();
  return g;
}

absl::StatusOr<SearchCall> SearchFromProto(const v1::SearchRequest& r, GpuLookup gpus) {
  SearchCall call;
  SearchSpace& s = call.space;
  std::vector<std::string> problems;
  absl::StatusOr<ModelSpec> model = ModelFromProto(r.model());
  if (model.ok()) {
    s.model = *model;
  } else {
    problems.emplace_back(model.status().message());
  }
  absl::StatusOr<ClusterSpec> cluster = ClusterFromProto(r.cluster(), gpus);
  if (cluster.ok()) {
    s.cluster = *cluster;
    s.cluster.num_gpus = 0;
    if (s.cluster.price_usd_per_gpu_hour < 0 || !std::isfinite(s.cluster.price_usd_per_gpu_hour)) {
      problems.push_back("cluster.price_usd_per_gpu_hour (--price-usd-per-gpu-hour) must be >= 0");
    }
    if (r.has_memory_headroom()) s.cluster.memory_headroom = r.memory_headroom();
    if (!(s.cluster.memory_headroom >= 0 && s.cluster.memory_headroom <= kMaxMemoryHeadroom)) {
      problems.push_back(absl::StrCat("memory_headroom (--memory-headroom) must be in [0, ",
                                      kMaxMemoryHeadroom, "], e.g. 0.03"));
    }
    if (s.cluster.gpus_per_node < 1 || s.cluster.gpus_per_node > 1024) {
      problems.push_back("cluster.gpus_per_node (--gpus-per-node) must be in [1, 1024]");
    }
  } else {
    problems.emplace_back(cluster.status().message());
  }
  if (r.global_batch() <= 0) {
    problems.push_back("global_batch (--global-batch) is required and must be positive");
  }
  if (r.gpus() < 0 || r.max_gpus() < 0 || (r.gpus() == 0 && r.max_gpus() == 0) ||
      r.gpus() > kMaxGpus || r.max_gpus() > kMaxGpus) {
    problems.push_back(
        absl::StrCat("give gpus (--gpus) or max_gpus (--max-gpus), between 1 and ", kMaxGpus));
  }
  s.global_batch = r.global_batch();
  s.gpus = r.gpus();
  s.max_gpus = r.max_gpus();
  PlanSpaceFromProto(r.space(), s, problems);
  absl::StatusOr<DType> dtype = FromProtoOr(r.dtype(), DType::kFp16, "dtype");
  if (dtype.ok()) {
    s.dtype = *dtype;
  } else {
    problems.emplace_back(dtype.status().message());
  }
  if (!(r.train_tokens() >= 0 && r.train_tokens() <= kMaxTrainTokens)) {
    problems.push_back(absl::StrCat("train_tokens=", r.train_tokens(),
                                    " (--tokens) must be a number in [0, ", kMaxTrainTokens, "]"));
  }
  s.train_tokens = r.train_tokens();
  absl::StatusOr<Objective> objective = FromProtoOr(r.objective(), Objective::kTime, "objective");
  if (objective.ok()) {
    call.options.objective = *objective;
  } else {
    problems.emplace_back(objective.status().message());
  }
  if (!std::isfinite(r.deadline_days()) || r.deadline_days() < 0) {
    problems.push_back("deadline_days (--deadline-days) must be a finite number >= 0");
  }
  call.options.deadline_days = r.deadline_days();
  if (r.top() < 0 || r.top() > kMaxTop) {
    problems.push_back(absl::StrCat("top (--top) must be in [0, ", kMaxTop, "] (0: 10)"));
  }
  call.top = r.top() == 0 ? kDefaultTop : r.top();
  call.include_all_plans = r.include_all_plans();
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  FillSpaceSettings(GivenSpaceOf(r.space(), r.dtype(), r.model()), s.cluster.gpu, s.model, s,
                    s.dtype);
  return call;
}

void SearchResultToProto(const SearchResult& r, const SearchCall& call, v1::SearchResult* out) {
  out->set_considered(r.considered);
  out->set_out_of_memory(r.out_of_memory);
  out->set_invalid(r.invalid);
  out->set_evaluated(static_cast<int64_t>(r.plans.size()));
  SimulationToProto(r.simulation, out->mutable_simulation());
  for (const std::string& w : r.warnings) out->add_warnings(w);
  out->set_no_plan_reason(r.no_plan_reason);
  std::vector<bool> on_frontier(r.plans.size(), false);
  for (int i : r.pareto) on_frontier[static_cast<size_t>(i)] = true;
  auto add = [&](int i, v1::PlanSummary* summary) {
    PlanToProto(r.plans[static_cast<size_t>(i)], summary);
    summary->set_best(i == r.best);
    summary->set_pareto(on_frontier[static_cast<size_t>(i)]);
  };
  if (r.best >= 0) add(r.best, out->mutable_best());
  for (int i : r.pareto) add(i, out->add_pareto());
  const int n = static_cast<int>(r.plans.size());
  for (int i = 0; i < call.top && i < n; ++i) add(i, out->add_fastest());
  if (call.include_all_plans) {
    for (int i = 0; i < n; ++i) add(i, out->add_plans());
  }
}

}  // namespace vtrain::proto
