#include "proto/convert.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "core/util/status_macros.h"
#include "proto/sha256.h"

namespace vtrain::convert {
namespace {

DType FromProto(v1::DType d) { return d == v1::DTYPE_BF16 ? DType::kBf16 : DType::kFp16; }
v1::DType ToProto(DType d) { return d == DType::kBf16 ? v1::DTYPE_BF16 : v1::DTYPE_FP16; }

v1::Fidelity ToProto(Fidelity f) {
  switch (f) {
    case Fidelity::kMeasured:
      return v1::FIDELITY_MEASURED;
    case Fidelity::kInterpolated:
      return v1::FIDELITY_INTERPOLATED;
    case Fidelity::kAnalytical:
      return v1::FIDELITY_ANALYTICAL;
  }
  return v1::FIDELITY_UNSPECIFIED;
}

// Each field of AnalyticalParams with its proto accessors.
struct ParamField {
  double AnalyticalParams::*member;
  double (v1::AnalyticalParams::*get)() const;
  void (v1::AnalyticalParams::*set)(double);
};
#define VTRAIN_PARAM(name) \
  {&AnalyticalParams::name, &v1::AnalyticalParams::name, &v1::AnalyticalParams::set_##name}
constexpr ParamField kParamFields[] = {
    VTRAIN_PARAM(gemm_max_efficiency),      VTRAIN_PARAM(gemm_overhead_ns),
    VTRAIN_PARAM(gemm_misaligned_factor),   VTRAIN_PARAM(memory_efficiency),
    VTRAIN_PARAM(kernel_min_ns),            VTRAIN_PARAM(host_dispatch_ns),
    VTRAIN_PARAM(operator_overhead_ns),     VTRAIN_PARAM(intra_node_latency_ns),
    VTRAIN_PARAM(intra_node_latency_per_rank_ns), VTRAIN_PARAM(inter_node_latency_ns),
    VTRAIN_PARAM(intra_node_efficiency),    VTRAIN_PARAM(inter_node_efficiency),
    VTRAIN_PARAM(tp_collective_overhead_ns), VTRAIN_PARAM(tp_collective_overhead_per_rank_ns),
};
#undef VTRAIN_PARAM

std::string KeyText(const v1::OperatorKey& k) { return k.SerializeAsString(); }

}  // namespace

absl::StatusOr<Job> JobFromProto(const v1::PredictRequest& r) {
  Job job;
  const v1::ModelSpec& m = r.model();
  if (!m.preset().empty()) {
    absl::StatusOr<ModelSpec> preset = ModelPreset(m.preset());
    if (!preset.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("model.preset: ", preset.status().message()));
    }
    job.model = *preset;
  } else {
    job.model.name = "custom";
    if (m.num_layers() == 0 || m.hidden_size() == 0 || m.num_heads() == 0 || m.seq_len() == 0) {
      return absl::InvalidArgumentError(
          "model: give model.preset, or model.num_layers, model.hidden_size, model.num_heads "
          "and model.seq_len");
    }
  }
  if (m.num_layers() != 0) job.model.num_layers = m.num_layers();
  if (m.hidden_size() != 0) job.model.hidden_size = m.hidden_size();
  if (m.num_heads() != 0) job.model.num_heads = m.num_heads();
  if (m.seq_len() != 0) job.model.seq_len = m.seq_len();
  if (m.vocab_size() != 0) job.model.vocab_size = m.vocab_size();
  if (m.ffn_hidden_size() != 0) job.model.ffn_hidden_size = m.ffn_hidden_size();

  const v1::ClusterSpec& c = r.cluster();
  absl::StatusOr<GpuSpec> gpu = GpuByName(c.gpu().empty() ? "a100-sxm4-80gb" : c.gpu());
  if (!gpu.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cluster.gpu: ", gpu.status().message()));
  }
  job.cluster = DefaultCluster(*gpu, c.num_gpus());
  if (c.gpus_per_node() != 0) job.cluster.gpus_per_node = c.gpus_per_node();
  if (c.intra_node_bandwidth_bytes_per_s() != 0) {
    job.cluster.intra_node_bandwidth_bytes_per_s = c.intra_node_bandwidth_bytes_per_s();
  }
  if (c.inter_node_bandwidth_bytes_per_s() != 0) {
    job.cluster.inter_node_bandwidth_bytes_per_s = c.inter_node_bandwidth_bytes_per_s();
  }
  job.cluster.price_usd_per_gpu_hour = c.price_usd_per_gpu_hour();

  const v1::ParallelPlan& p = r.plan();
  ParallelPlan& plan = job.plan;
  if (p.tensor_parallel() != 0) plan.tensor_parallel = p.tensor_parallel();
  if (p.pipeline_parallel() != 0) plan.pipeline_parallel = p.pipeline_parallel();
  if (p.micro_batch() != 0) plan.micro_batch = p.micro_batch();
  if (p.global_batch() == 0) {
    return absl::InvalidArgumentError("plan.global_batch is required; give the batch in sequences");
  }
  plan.global_batch = p.global_batch();
  if (p.data_parallel() != 0) {
    plan.data_parallel = p.data_parallel();
  } else if (job.cluster.num_gpus > 0 && plan.tensor_parallel > 0 && plan.pipeline_parallel > 0 &&
             plan.tensor_parallel <= (int64_t{1} << 20) &&
             plan.pipeline_parallel <= (int64_t{1} << 20)) {
    const int64_t tp_pp = plan.tensor_parallel * plan.pipeline_parallel;
    if (job.cluster.num_gpus % tp_pp != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster.num_gpus=", job.cluster.num_gpus,
          " is not divisible by plan.tensor_parallel * plan.pipeline_parallel = ", tp_pp,
          "; choose a GPU count that is a multiple of it, or set plan.data_parallel"));
    }
    plan.data_parallel = job.cluster.num_gpus / tp_pp;
  }
  if (job.cluster.num_gpus == 0) {
    job.cluster.num_gpus = plan.tensor_parallel * plan.data_parallel * plan.pipeline_parallel;
  }
  plan.schedule = p.schedule() == v1::PIPELINE_SCHEDULE_GPIPE ? PipelineSchedule::kGpipe
                                                                : PipelineSchedule::k1F1B;
  plan.recompute = p.recompute() == v1::RECOMPUTE_NONE ? Recompute::kNone : Recompute::kFull;
  plan.gradient_bucketing = p.gradient_bucketing();
  if (p.bucket_size_bytes() != 0) plan.bucket_size_bytes = p.bucket_size_bytes();
  plan.dtype = FromProto(p.dtype());
  VTRAIN_RETURN_IF_ERROR(ValidateJob(job));
  return job;
}

PredictOptions OptionsFromProto(const v1::PredictRequest& r) {
  PredictOptions o;
  o.granularity =
      r.granularity() == v1::GRANULARITY_KERNEL ? Granularity::kKernel : Granularity::kOperator;
  o.train_tokens = r.train_tokens() > 0 ? r.train_tokens() : 0;
  return o;
}

v1::PredictRequest JobToProto(const Job& job) {
  v1::PredictRequest r;
  v1::ModelSpec* m = r.mutable_model();
  m->set_num_layers(job.model.num_layers);
  m->set_hidden_size(job.model.hidden_size);
  m->set_num_heads(job.model.num_heads);
  m->set_seq_len(job.model.seq_len);
  m->set_vocab_size(job.model.vocab_size);
  m->set_ffn_hidden_size(job.model.ffn());
  v1::ClusterSpec* c = r.mutable_cluster();
  c->set_gpu(job.cluster.gpu.name);
  c->set_num_gpus(job.cluster.num_gpus);
  c->set_gpus_per_node(job.cluster.gpus_per_node);
  c->set_intra_node_bandwidth_bytes_per_s(job.cluster.intra_node_bandwidth_bytes_per_s);
  c->set_inter_node_bandwidth_bytes_per_s(job.cluster.inter_node_bandwidth_bytes_per_s);
  c->set_price_usd_per_gpu_hour(job.cluster.price_usd_per_gpu_hour);
  v1::ParallelPlan* p = r.mutable_plan();
  p->set_tensor_parallel(job.plan.tensor_parallel);
  p->set_data_parallel(job.plan.data_parallel);
  p->set_pipeline_parallel(job.plan.pipeline_parallel);
  p->set_micro_batch(job.plan.micro_batch);
  p->set_global_batch(job.plan.global_batch);
  p->set_schedule(job.plan.schedule == PipelineSchedule::kGpipe ? v1::PIPELINE_SCHEDULE_GPIPE
                                                                : v1::PIPELINE_SCHEDULE_1F1B);
  p->set_recompute(job.plan.recompute == Recompute::kNone ? v1::RECOMPUTE_NONE
                                                          : v1::RECOMPUTE_FULL);
  p->set_gradient_bucketing(job.plan.gradient_bucketing);
  p->set_bucket_size_bytes(job.plan.bucket_size_bytes);
  p->set_dtype(ToProto(job.plan.dtype));
  return r;
}

void PredictionToProto(const Job& job, const Prediction& p, v1::PredictResponse* out) {
  out->set_iteration_time_ms(p.iteration_time_ms());
  out->set_iteration_time_ns(p.iteration_time_ns);
  for (const StageBreakdown& s : p.stages) {
    v1::StageBreakdown* b = out->add_stages();
    b->set_stage(s.stage);
    b->set_first_layer(s.first_layer);
    b->set_num_layers(s.num_layers);
    b->set_compute_ms(static_cast<double>(s.compute_ns) * 1e-6);
    b->set_tensor_parallel_ms(static_cast<double>(s.tensor_parallel_ns) * 1e-6);
    b->set_pipeline_exposed_ms(static_cast<double>(s.pipeline_exposed_ns) * 1e-6);
    b->set_data_parallel_exposed_ms(static_cast<double>(s.data_parallel_exposed_ns) * 1e-6);
    b->set_idle_ms(static_cast<double>(s.idle_ns) * 1e-6);
    b->set_parameters_per_gpu(s.parameters_per_gpu);
    const size_t i = static_cast<size_t>(out->stages_size() - 1);
    if (i < p.memory.stages.size()) {
      const StageMemory& sm = p.memory.stages[i];
      b->set_peak_memory_bytes(sm.peak_bytes);
      b->set_model_states_bytes(sm.model_states_bytes);
      b->set_activations_bytes(sm.activations_bytes);
      b->set_micro_batches_in_flight(sm.micro_batches_in_flight);
    }
  }
  out->mutable_memory()->set_peak_bytes(p.memory.peak_bytes);
  out->mutable_memory()->set_capacity_bytes(p.memory.capacity_bytes);
  out->mutable_memory()->set_fits(p.memory.fits);
  out->set_num_micro_batches(p.num_micro_batches);
  out->set_mfu(p.mfu);
  out->set_hfu(p.hfu);
  out->set_tokens_per_s(p.tokens_per_s);
  out->set_model_flops_per_iteration(p.model_flops);
  out->set_hardware_flops_per_iteration(p.hardware_flops);
  if (p.train_tokens > 0) {
    v1::Training* t = out->mutable_training();
    t->set_tokens(p.train_tokens);
    t->set_iterations(p.iterations);
    t->set_time_s(p.training_time_s);
    t->set_gpu_hours(p.gpu_hours);
    t->set_cost_usd(p.cost_usd);
  }
  v1::FidelitySummary* f = out->mutable_fidelity();
  f->set_worst(ToProto(p.fidelity.worst));
  f->set_measured(p.fidelity.lookups[static_cast<int>(Fidelity::kMeasured)]);
  f->set_interpolated(p.fidelity.lookups[static_cast<int>(Fidelity::kInterpolated)]);
  f->set_analytical(p.fidelity.lookups[static_cast<int>(Fidelity::kAnalytical)]);
  for (const LookupRecord& r : p.fidelity.records) {
    v1::Lookup* l = f->add_lookups();
    l->set_key(r.key);
    l->set_fidelity(ToProto(r.fidelity));
    l->set_missing(r.missing);
  }
  for (const std::string& k : p.fidelity.missing_keys) f->add_missing_keys(k);
  if (p.interval_coverage > 0) {
    v1::Interval* i = out->mutable_interval();
    i->set_low_ms(p.interval_low_ns * 1e-6);
    i->set_high_ms(p.interval_high_ns * 1e-6);
    i->set_coverage(p.interval_coverage);
    i->set_regime(p.regime);
  }
  out->set_profile_set_id(p.profile_set);
  out->set_granularity(p.granularity == Granularity::kKernel ? v1::GRANULARITY_KERNEL
                                                             : v1::GRANULARITY_OPERATOR);
  out->set_num_tasks(p.num_tasks);
  const v1::PredictRequest echo = JobToProto(job);
  *out->mutable_model() = echo.model();
  out->mutable_model()->set_preset(job.model.name == "custom" ? "" : job.model.name);
  *out->mutable_plan() = echo.plan();
  *out->mutable_cluster() = echo.cluster();
}

Prediction PredictionFromProto(const v1::PredictResponse& r) {
  auto ns = [](double ms) { return static_cast<int64_t>(std::llround(ms * 1e6)); };
  auto fidelity = [](v1::Fidelity f) {
    return f == v1::FIDELITY_MEASURED      ? Fidelity::kMeasured
           : f == v1::FIDELITY_INTERPOLATED ? Fidelity::kInterpolated
                                             : Fidelity::kAnalytical;
  };
  Prediction p;
  p.iteration_time_ns = r.iteration_time_ns();
  for (const v1::StageBreakdown& s : r.stages()) {
    StageBreakdown b;
    b.stage = s.stage();
    b.first_layer = s.first_layer();
    b.num_layers = s.num_layers();
    b.compute_ns = ns(s.compute_ms());
    b.tensor_parallel_ns = ns(s.tensor_parallel_ms());
    b.pipeline_exposed_ns = ns(s.pipeline_exposed_ms());
    b.data_parallel_exposed_ns = ns(s.data_parallel_exposed_ms());
    b.idle_ns = ns(s.idle_ms());
    b.parameters_per_gpu = s.parameters_per_gpu();
    p.stages.push_back(b);
    StageMemory sm;
    sm.stage = s.stage();
    sm.parameters = s.parameters_per_gpu();
    sm.peak_bytes = s.peak_memory_bytes();
    sm.model_states_bytes = s.model_states_bytes();
    sm.activations_bytes = s.activations_bytes();
    sm.micro_batches_in_flight = s.micro_batches_in_flight();
    p.memory.stages.push_back(sm);
  }
  p.memory.peak_bytes = r.memory().peak_bytes();
  p.memory.capacity_bytes = r.memory().capacity_bytes();
  p.memory.fits = r.memory().fits();
  p.num_micro_batches = r.num_micro_batches();
  p.model_flops = r.model_flops_per_iteration();
  p.hardware_flops = r.hardware_flops_per_iteration();
  p.mfu = r.mfu();
  p.hfu = r.hfu();
  p.tokens_per_s = r.tokens_per_s();
  if (r.has_training()) {
    p.train_tokens = r.training().tokens();
    p.iterations = r.training().iterations();
    p.training_time_s = r.training().time_s();
    p.gpu_hours = r.training().gpu_hours();
    p.cost_usd = r.training().cost_usd();
  }
  p.granularity = r.granularity() == v1::GRANULARITY_KERNEL ? Granularity::kKernel
                                                             : Granularity::kOperator;
  p.num_tasks = r.num_tasks();
  p.profile_set = r.profile_set_id();
  const v1::FidelitySummary& f = r.fidelity();
  p.fidelity.worst = fidelity(f.worst());
  p.fidelity.lookups[static_cast<int>(Fidelity::kMeasured)] = f.measured();
  p.fidelity.lookups[static_cast<int>(Fidelity::kInterpolated)] = f.interpolated();
  p.fidelity.lookups[static_cast<int>(Fidelity::kAnalytical)] = f.analytical();
  for (const v1::Lookup& l : f.lookups()) {
    p.fidelity.records.push_back({l.key(), fidelity(l.fidelity()), l.missing()});
  }
  p.fidelity.missing_keys.assign(f.missing_keys().begin(), f.missing_keys().end());
  if (r.has_interval()) {
    p.interval_low_ns = r.interval().low_ms() * 1e6;
    p.interval_high_ns = r.interval().high_ms() * 1e6;
    p.interval_coverage = r.interval().coverage();
    p.regime = r.interval().regime();
  }
  return p;
}

absl::StatusOr<SearchSpace> SearchSpaceFromProto(const v1::SearchRequest& r) {
  // Reuse the request path for the model and cluster defaults.
  v1::PredictRequest probe;
  *probe.mutable_model() = r.model();
  *probe.mutable_cluster() = r.cluster();
  probe.mutable_cluster()->set_num_gpus(1);
  probe.mutable_plan()->set_global_batch(1);
  probe.mutable_plan()->set_tensor_parallel(1);
  absl::StatusOr<Job> base = JobFromProto(probe);
  if (!base.ok() && base.status().message().find("model") != std::string::npos) return base.status();
  if (!base.ok() && base.status().message().find("cluster.gpu") != std::string::npos) {
    return base.status();
  }
  SearchSpace s;
  if (base.ok()) {
    s.model = base->model;
    s.cluster = base->cluster;
  }
  if (r.global_batch() <= 0) return absl::InvalidArgumentError("global_batch must be positive");
  if (r.gpus() < 0 || r.max_gpus() < 0 || (r.gpus() == 0 && r.max_gpus() == 0) ||
      r.gpus() > (1 << 24) || r.max_gpus() > (1 << 24)) {
    return absl::InvalidArgumentError("give gpus or max_gpus, between 1 and 16777216");
  }
  s.global_batch = r.global_batch();
  s.gpus = r.gpus();
  s.max_gpus = r.max_gpus();
  for (int64_t t : r.tensor_parallel()) {
    if (t < 1 || t > 1024) return absl::InvalidArgumentError("tensor_parallel values must be in [1, 1024]");
    s.tensor_parallel.push_back(t);
  }
  if (r.max_data_parallel() < 0 || r.max_micro_batch() < 0) {
    return absl::InvalidArgumentError("max_data_parallel and max_micro_batch must not be negative");
  }
  s.max_data_parallel = r.max_data_parallel();
  s.max_micro_batch = r.max_micro_batch();
  if (r.schedules_size() > 0) {
    s.schedules.clear();
    for (int x : r.schedules()) {
      s.schedules.push_back(x == v1::PIPELINE_SCHEDULE_GPIPE ? PipelineSchedule::kGpipe
                                                             : PipelineSchedule::k1F1B);
    }
  }
  if (r.recomputes_size() > 0) {
    s.recomputes.clear();
    for (int x : r.recomputes()) {
      s.recomputes.push_back(x == v1::RECOMPUTE_NONE ? Recompute::kNone : Recompute::kFull);
    }
  }
  s.dtype = FromProto(r.dtype());
  if (r.train_tokens() < 0) return absl::InvalidArgumentError("train_tokens must not be negative");
  s.train_tokens = r.train_tokens();
  return s;
}

absl::StatusOr<SearchOptions> SearchOptionsFromProto(const v1::SearchRequest& r) {
  SearchOptions o;
  absl::StatusOr<Objective> objective = ParseObjective(r.objective().empty() ? "time" : r.objective());
  if (!objective.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("objective: ", objective.status().message()));
  }
  o.objective = *objective;
  o.deadline_days = r.deadline_days();
  return o;
}

v1::SearchRequest SearchToProto(const SearchSpace& s, const std::string& objective,
                                double deadline_days, int top) {
  const v1::PredictRequest job = JobToProto(Job{s.model, ParallelPlan{}, s.cluster});
  v1::SearchRequest r;
  *r.mutable_model() = job.model();
  *r.mutable_cluster() = job.cluster();
  r.mutable_cluster()->set_num_gpus(0);
  r.set_global_batch(s.global_batch);
  r.set_gpus(s.gpus);
  r.set_max_gpus(s.max_gpus);
  for (int64_t t : s.tensor_parallel) r.add_tensor_parallel(t);
  r.set_max_data_parallel(s.max_data_parallel);
  r.set_max_micro_batch(s.max_micro_batch);
  for (PipelineSchedule x : s.schedules) {
    r.add_schedules(x == PipelineSchedule::kGpipe ? v1::PIPELINE_SCHEDULE_GPIPE
                                                  : v1::PIPELINE_SCHEDULE_1F1B);
  }
  for (Recompute x : s.recomputes) {
    r.add_recomputes(x == Recompute::kNone ? v1::RECOMPUTE_NONE : v1::RECOMPUTE_FULL);
  }
  r.set_dtype(ToProto(s.dtype));
  r.set_train_tokens(s.train_tokens);
  r.set_objective(objective);
  r.set_deadline_days(deadline_days);
  r.set_top(top);
  return r;
}

namespace {
void PlanToProto(const PlanResult& p, v1::PlanSummary* out) {
  *out->mutable_plan() = JobToProto(p.job).plan();
  out->set_gpus(p.job.cluster.num_gpus);
  out->set_iteration_time_ms(p.iteration_time_ms);
  out->set_training_days(p.training_days);
  out->set_cost_usd(p.cost_usd);
  out->set_peak_memory_bytes(p.peak_memory_bytes);
}
PlanResult PlanFromProto(const v1::PlanSummary& s, const SearchSpace& space) {
  PlanResult p;
  p.job.model = space.model;
  p.job.cluster = space.cluster;
  p.job.cluster.num_gpus = s.gpus();
  const v1::ParallelPlan& q = s.plan();
  p.job.plan.tensor_parallel = q.tensor_parallel();
  p.job.plan.data_parallel = q.data_parallel();
  p.job.plan.pipeline_parallel = q.pipeline_parallel();
  p.job.plan.micro_batch = q.micro_batch();
  p.job.plan.global_batch = q.global_batch();
  p.job.plan.schedule =
      q.schedule() == v1::PIPELINE_SCHEDULE_GPIPE ? PipelineSchedule::kGpipe : PipelineSchedule::k1F1B;
  p.job.plan.recompute = q.recompute() == v1::RECOMPUTE_NONE ? Recompute::kNone : Recompute::kFull;
  p.iteration_time_ms = s.iteration_time_ms();
  p.training_days = s.training_days();
  p.cost_usd = s.cost_usd();
  p.peak_memory_bytes = s.peak_memory_bytes();
  return p;
}
}  // namespace

void SearchResultToProto(const SearchResult& r, int top, v1::SearchResult* out) {
  out->set_considered(r.considered);
  out->set_out_of_memory(r.out_of_memory);
  out->set_evaluated(static_cast<int64_t>(r.plans.size()));
  if (r.best >= 0) PlanToProto(r.plans[r.best], out->mutable_best());
  for (int i : r.pareto) PlanToProto(r.plans[i], out->add_pareto());
  for (int i = 0; i < top && i < static_cast<int>(r.plans.size()); ++i) {
    PlanToProto(r.plans[i], out->add_fastest());
  }
}

SearchResult SearchResultFromProto(const v1::SearchResult& in, const SearchSpace& space) {
  // Plans: the fastest first, then frontier plans not among them; best and
  // pareto index into that list.
  SearchResult r;
  r.considered = in.considered();
  r.out_of_memory = in.out_of_memory();
  auto index_of = [&](const v1::PlanSummary& s) {
    for (size_t i = 0; i < r.plans.size(); ++i) {
      const PlanResult& p = r.plans[i];
      if (p.job.cluster.num_gpus == s.gpus() && p.iteration_time_ms == s.iteration_time_ms() &&
          p.job.plan.tensor_parallel == s.plan().tensor_parallel() &&
          p.job.plan.pipeline_parallel == s.plan().pipeline_parallel() &&
          p.job.plan.micro_batch == s.plan().micro_batch()) {
        return static_cast<int>(i);
      }
    }
    r.plans.push_back(PlanFromProto(s, space));
    return static_cast<int>(r.plans.size() - 1);
  };
  for (const v1::PlanSummary& s : in.fastest()) index_of(s);
  for (const v1::PlanSummary& s : in.pareto()) r.pareto.push_back(index_of(s));
  if (in.has_best()) r.best = index_of(in.best());
  return r;
}

absl::StatusOr<ProfileSet> ProfileSetFromProto(const v1::ProfileSet& in) {
  ProfileSet set;
  set.name = in.id().empty() ? in.name() : in.id();
  set.gpu = in.gpu();
  if (set.gpu.empty()) return absl::InvalidArgumentError("profile_set.gpu is required");
  set.provenance = in.provenance().note();
  if (in.has_params()) {
    for (const ParamField& f : kParamFields) set.params.*(f.member) = (in.params().*(f.get))();
  }
  for (int i = 0; i < in.operators_size(); ++i) {
    const v1::OperatorProfile& op = in.operators(i);
    const std::string where = absl::StrCat("profile_set.operators[", i, "]");
    absl::StatusOr<OperatorKind> kind = ParseOperatorKind(op.key().op());
    if (!kind.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".key.op: ", kind.status().message()));
    }
    const v1::OperatorKey& k = op.key();
    OperatorKey key = MakeOperatorKey(k.gpu().empty() ? set.gpu : k.gpu(), FromProto(k.dtype()),
                                      *kind, k.hidden(), k.heads(), k.ffn(), k.seq(),
                                      k.micro_batch(), std::max<int64_t>(1, k.tensor_parallel()),
                                      k.vocab(), k.num_parameters());
    OperatorProfile profile;
    profile.fidelity = Fidelity::kMeasured;
    if (op.kernels_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".kernels is empty"));
    }
    for (int j = 0; j < op.kernels_size(); ++j) {
      const v1::Kernel& kernel = op.kernels(j);
      if (kernel.duration_ns() < 0 || kernel.gap_ns() < 0 || kernel.host_ns() < 0 ||
          kernel.duration_ns() > (int64_t{1} << 40) || kernel.gap_ns() > (int64_t{1} << 40)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".kernels[", j, "]: duration_ns, gap_ns and host_ns must be in [0, 2^40]"));
      }
      profile.kernels.push_back({kernel.name(), kernel.duration_ns(), kernel.gap_ns(),
                                 kernel.host_ns()});
    }
    if (!set.operators.emplace(key, std::move(profile)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".key duplicates an earlier operator (", key.ToString(), ")"));
    }
  }
  for (int i = 0; i < in.collectives_size(); ++i) {
    const v1::CollectiveCurve& c = in.collectives(i);
    const std::string where = absl::StrCat("profile_set.collectives[", i, "]");
    absl::StatusOr<Collective> collective = ParseCollective(c.collective());
    if (!collective.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".collective: ", collective.status().message()));
    }
    if (c.scope() != "intra_node" && c.scope() != "inter_node") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".scope='", c.scope(), "' must be intra_node or inter_node"));
    }
    if (c.ranks() < 2 || c.ranks() > (1 << 24)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".ranks must be at least 2"));
    }
    std::vector<CollectivePoint> points;
    for (const v1::CollectivePoint& p : c.points()) points.push_back({p.bytes(), p.latency_ns()});
    absl::StatusOr<CollectiveCurve> curve = CollectiveCurve::Create(std::move(points));
    if (!curve.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".points: ", curve.status().message()));
    }
    CollectiveKey key{c.gpu().empty() ? set.gpu : c.gpu(),
                      c.scope() == "intra_node" ? LinkScope::kIntraNode : LinkScope::kInterNode,
                      *collective, c.ranks()};
    set.collectives.insert_or_assign(key, *std::move(curve));
  }
  for (const v1::ErrorBand& b : in.error_bands()) {
    set.error_bands.push_back(
        {b.regime(), b.error_low(), b.error_high(), b.coverage(), b.rows()});
  }
  return set;
}

v1::ProfileSet ProfileSetToProto(const ProfileSet& set) {
  v1::ProfileSet out;
  out.set_name(set.name);
  out.set_gpu(set.gpu);
  out.mutable_provenance()->set_note(set.provenance);
  for (const ParamField& f : kParamFields) {
    (out.mutable_params()->*(f.set))(set.params.*(f.member));
  }
  for (const auto& [key, profile] : set.operators) {
    v1::OperatorProfile* op = out.add_operators();
    v1::OperatorKey* k = op->mutable_key();
    k->set_gpu(key.gpu);
    k->set_dtype(ToProto(key.dtype));
    k->set_op(std::string(OperatorKindName(key.op)));
    k->set_hidden(key.hidden);
    k->set_heads(key.heads);
    k->set_ffn(key.ffn);
    k->set_seq(key.seq);
    k->set_micro_batch(key.micro_batch);
    k->set_tensor_parallel(key.tensor_parallel);
    k->set_vocab(key.vocab);
    k->set_num_parameters(key.num_parameters);
    for (const KernelRecord& kr : profile.kernels) {
      v1::Kernel* kernel = op->add_kernels();
      kernel->set_name(kr.name);
      kernel->set_duration_ns(kr.duration_ns);
      kernel->set_gap_ns(kr.gap_ns);
      kernel->set_host_ns(kr.host_ns);
    }
  }
  for (const auto& [key, curve] : set.collectives) {
    v1::CollectiveCurve* c = out.add_collectives();
    c->set_gpu(key.gpu);
    c->set_scope(std::string(LinkScopeName(key.scope)));
    c->set_collective(std::string(CollectiveName(key.collective)));
    c->set_ranks(key.ranks);
    for (const CollectivePoint& p : curve.points()) {
      v1::CollectivePoint* point = c->add_points();
      point->set_bytes(p.bytes);
      point->set_latency_ns(p.latency_ns);
    }
  }
  for (const ErrorBand& b : set.error_bands) {
    v1::ErrorBand* band = out.add_error_bands();
    band->set_regime(b.regime);
    band->set_error_low(b.error_low);
    band->set_error_high(b.error_high);
    band->set_coverage(b.coverage);
    band->set_rows(b.rows);
  }
  Canonicalize(&out);
  return out;
}

void Canonicalize(v1::ProfileSet* set) {
  std::sort(set->mutable_operators()->begin(), set->mutable_operators()->end(),
            [](const v1::OperatorProfile& a, const v1::OperatorProfile& b) {
              return KeyText(a.key()) < KeyText(b.key());
            });
  std::sort(set->mutable_collectives()->begin(), set->mutable_collectives()->end(),
            [](const v1::CollectiveCurve& a, const v1::CollectiveCurve& b) {
              return std::make_tuple(a.gpu(), a.scope(), a.collective(), a.ranks()) <
                     std::make_tuple(b.gpu(), b.scope(), b.collective(), b.ranks());
            });
}

std::string ContentId(const v1::ProfileSet& set) {
  v1::ProfileSet content = set;
  content.clear_id();
  content.clear_created_at();
  Canonicalize(&content);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    content.SerializeToCodedStream(&coded);
  }
  return absl::StrCat("sha256:", Sha256Hex(bytes));
}

absl::StatusOr<Job> JobFromVtrainConfig(const std::string& json) {
  google::protobuf::Struct config;
  {
    google::protobuf::util::JsonParseOptions options;
    auto status = google::protobuf::util::JsonStringToMessage(json, &config, options);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a vTrain configuration (JSON object): ", std::string(status.message())));
    }
  }
  const auto& f = config.fields();
  auto number = [&](const char* key, double fallback, bool required) -> absl::StatusOr<double> {
    auto it = f.find(key);
    if (it == f.end()) {
      if (required) {
        return absl::InvalidArgumentError(absl::StrCat("vTrain config: '", key, "' is required"));
      }
      return fallback;
    }
    if (it->second.kind_case() != google::protobuf::Value::kNumberValue) {
      return absl::InvalidArgumentError(absl::StrCat("vTrain config: '", key, "' must be a number"));
    }
    return it->second.number_value();
  };
  auto text = [&](const char* key, const std::string& fallback) {
    auto it = f.find(key);
    return it != f.end() && it->second.kind_case() == google::protobuf::Value::kStringValue
               ? it->second.string_value()
               : fallback;
  };
  auto flag = [&](const char* key, bool fallback) {
    auto it = f.find(key);
    return it != f.end() && it->second.kind_case() == google::protobuf::Value::kBoolValue
               ? it->second.bool_value()
               : fallback;
  };
  v1::PredictRequest r;
  struct IntField {
    const char* key;
    bool required;
    void (*set)(v1::PredictRequest&, int64_t);
  };
  const IntField ints[] = {
      {"num_layers", true, [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_num_layers(v); }},
      {"hidden_size", true, [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_hidden_size(v); }},
      {"num_attention_heads", true, [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_num_heads(v); }},
      {"max_length", true, [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_seq_len(v); }},
      {"vocab_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_vocab_size(v); }},
      {"num_gpus", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_cluster()->set_num_gpus(v); }},
      {"node_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_cluster()->set_gpus_per_node(v); }},
      {"tensor_parallel_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_tensor_parallel(v); }},
      {"data_parallel_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_data_parallel(v); }},
      {"pipeline_parallel_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_pipeline_parallel(v); }},
      {"global_batch_size", true, [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_global_batch(v); }},
      {"micro_batch_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_micro_batch(v); }},
  };
  for (const IntField& field : ints) {
    absl::StatusOr<double> v = number(field.key, 0, field.required);
    if (!v.ok()) return v.status();
    if (*v != std::floor(*v) || std::abs(*v) > 9e15) {
      return absl::InvalidArgumentError(absl::StrCat("vTrain config: '", field.key, "' must be an integer"));
    }
    field.set(r, static_cast<int64_t>(*v));
  }
  absl::StatusOr<double> bucket_mb = number("ddp_bucket_size", 0, false);
  absl::StatusOr<double> inter_gbit = number("inter_node_bandwidth", 0, false);
  absl::StatusOr<double> intra_gbyte = number("intra_node_bandwidth", 0, false);
  for (const auto* s : {&bucket_mb, &inter_gbit, &intra_gbyte}) {
    if (!s->ok()) return s->status();
  }
  if (*bucket_mb < 0 || *inter_gbit < 0 || *intra_gbyte < 0) {
    return absl::InvalidArgumentError(
        "vTrain config: ddp_bucket_size and the bandwidths must not be negative");
  }
  r.mutable_plan()->set_bucket_size_bytes(static_cast<int64_t>(*bucket_mb * 1e6));
  r.mutable_cluster()->set_inter_node_bandwidth_bytes_per_s(*inter_gbit * 1e9 / 8);
  r.mutable_cluster()->set_intra_node_bandwidth_bytes_per_s(*intra_gbyte * 1e9);
  r.mutable_plan()->set_recompute(flag("use_checkpoint", true) ? v1::RECOMPUTE_FULL : v1::RECOMPUTE_NONE);
  r.mutable_plan()->set_gradient_bucketing(flag("use_gradient_bucket", false));
  const std::string schedule = text("pipeline_scheduling", "1f1b");
  if (schedule == "gpipe" || schedule == "GPipe") {
    r.mutable_plan()->set_schedule(v1::PIPELINE_SCHEDULE_GPIPE);
  } else if (schedule == "1f1b" || schedule == "1F1B") {
    r.mutable_plan()->set_schedule(v1::PIPELINE_SCHEDULE_1F1B);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "vTrain config: pipeline_scheduling='", schedule, "' is unknown; use 1f1b or gpipe"));
  }
  // vTrain names GPUs loosely ("A100", "a100-80gb", "H100"...).
  std::string gpu = text("gpu_name", "a100-sxm4-80gb");
  std::string lower;
  for (char c : gpu) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("a100") != std::string::npos) {
    gpu = lower.find("40") != std::string::npos ? "a100-sxm4-40gb" : "a100-sxm4-80gb";
  } else if (lower.find("h100") != std::string::npos) {
    gpu = "h100-sxm5-80gb";
  } else if (lower.find("h200") != std::string::npos) {
    gpu = "h200-sxm-141gb";
  } else if (lower.find("v100") != std::string::npos) {
    gpu = "v100-sxm2-32gb";
  }
  r.mutable_cluster()->set_gpu(gpu);
  return JobFromProto(r);
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return absl::InternalError(std::string(status.message()));
  return out;
}

absl::Status FromJson(const std::string& json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(json, message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a valid ", message->GetDescriptor()->full_name(),
                     " in JSON form: ", std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace vtrain::convert
