#include "proto/prediction_convert.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/spec/moe.h"
#include "core/spec/pipeline_layout.h"
#include "core/spec/settings.h"
#include "proto/enum_convert.h"
#include "proto/job_convert.h"
#include "proto/reliability_convert.h"

namespace vtrain::proto {

namespace {

// The prediction interval and the paired band, when the set has them.
void IntervalToProto(const Prediction& p, v1::PredictResponse& out) {
  if (p.interval_coverage > 0) {
    v1::Interval* i = out.mutable_interval();
    i->set_low_ms(p.interval_low_ns * 1e-6);
    i->set_high_ms(p.interval_high_ns * 1e-6);
    i->set_coverage(p.interval_coverage);
    i->set_regime(p.regime);
    if (!p.paired_regime.empty()) {
      i->set_paired_error_low(p.paired_error_low);
      i->set_paired_error_high(p.paired_error_high);
      i->set_paired_pairs(p.paired_rows);
      i->set_paired_regime(p.paired_regime);
    }
  }
}

}  // namespace

void PredictionToProto(const Job& job, const Prediction& p, v1::PredictResponse* out) {
  out->set_iteration_time_ms(p.iteration_time_ms());
  out->set_iteration_time_ns(p.iteration_time_ns);
  const absl::StatusOr<std::vector<ChunkLayers>> layout = ResolvePipelineLayout(job);
  if (layout.ok()) out->set_pipeline_layout(FormatPipelineLayout(*layout));
  const int64_t pp = job.plan.pipeline_parallel;
  for (const StageBreakdown& s : p.stages) {
    v1::StageBreakdown* b = out->add_stages();
    b->set_stage(s.stage);
    b->set_first_layer(s.first_layer);
    b->set_num_layers(s.num_layers);
    b->set_compute_ms(static_cast<double>(s.compute_ns) * 1e-6);
    b->set_tensor_parallel_ms(static_cast<double>(s.tensor_parallel_ns) * 1e-6);
    b->set_context_parallel_ms(static_cast<double>(s.context_parallel_ns) * 1e-6);
    b->set_expert_parallel_ms(static_cast<double>(s.expert_parallel_ns) * 1e-6);
    b->set_pipeline_exposed_ms(static_cast<double>(s.pipeline_exposed_ns) * 1e-6);
    b->set_data_parallel_exposed_ms(static_cast<double>(s.data_parallel_exposed_ns) * 1e-6);
    b->set_idle_ms(static_cast<double>(s.idle_ns) * 1e-6);
    b->set_tensor_parallel_hidden_ms(static_cast<double>(s.tensor_parallel_hidden_ns) * 1e-6);
    b->set_data_parallel_hidden_ms(static_cast<double>(s.data_parallel_hidden_ns) * 1e-6);
    b->set_parameters_per_gpu(s.parameters_per_gpu);
    b->set_chunks(job.plan.virtual_stages);
    b->set_layers_per_chunk(s.num_layers / std::max<int64_t>(1, job.plan.virtual_stages));
    for (int64_t k = 0; layout.ok() && k < job.plan.virtual_stages; ++k) {
      const size_t vs = static_cast<size_t>(k * pp + s.stage);
      if (vs >= layout->size()) break;
      b->add_chunk_first_layers((*layout)[vs].first_layer);
      b->add_chunk_num_layers((*layout)[vs].num_layers);
    }
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
  out->set_model_parameters(ModelParameterCount(job.model));
  out->set_active_parameters(ActiveParameterCount(job.model));
  if (job.model.is_moe()) {
    const ExpertLoad load = ExpectedExpertLoad(job.model, job.plan);
    out->set_expert_load_max_over_mean(load.max_over_mean);
    out->set_expert_tokens_kept(load.kept);
  }
  if (job.plan.dtype == DType::kFp8 && job.cluster.gpu.peak_bf16_flops_per_s > 0) {
    out->set_mfu_bf16_peak(p.mfu * job.cluster.gpu.peak_fp8_flops_per_s /
                           job.cluster.gpu.peak_bf16_flops_per_s);
  }
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
    GoodputToProto(p.goodput, out->mutable_goodput());
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
  for (const std::string& e : p.fidelity.estimated) f->add_estimated(e);
  IntervalToProto(p, *out);
  out->set_profile_set_id(p.profile_set);
  out->set_granularity(ToProto(p.granularity));
  out->set_num_tasks(p.num_tasks);
  SimulationToProto(p.simulation, out->mutable_simulation());
  const v1::PredictRequest echo = JobToProto(job);
  *out->mutable_model() = echo.model();
  *out->mutable_plan() = echo.plan();
  *out->mutable_cluster() = echo.cluster();
  SettingsToProto(DescribeSettings(job), out->mutable_settings());
}

void ExplanationToProto(const Explanation& e, v1::Explanation* out) {
  out->set_measured_ms(e.measured_ms);
  out->set_predicted_ms(e.predicted_ms);
  out->set_position(e.position);
  for (const ExplainCandidate& c : e.toward) {
    v1::Explanation::Candidate* o = out->add_toward();
    o->set_change(c.change);
    o->set_iteration_time_ms(c.iteration_time_ms);
    o->set_closes(c.closes);
    o->set_fits(c.fits);
  }
  out->set_away(e.away);
}

void SettingsToProto(const SettingsReport& report, v1::SettingsReport* out) {
  out->set_name(report.name);
  out->set_source(report.source);
  for (const std::string& a : report.assumed) out->add_assumed(a);
  for (const std::string& c : report.changed) out->add_changed(c);
}

void SimulationToProto(const SimulationCost& cost, v1::Simulation* out) {
  out->set_wall_ns(cost.wall_ns);
  out->set_tasks(cost.tasks);
  out->set_actions(cost.actions);
  out->set_actions_skipped(cost.actions_skipped);
  out->set_periods_skipped(cost.periods_skipped);
  out->set_predictions(cost.predictions);
}

SimulationCost SimulationFromProto(const v1::Simulation& s) {
  SimulationCost cost;
  cost.wall_ns = s.wall_ns();
  cost.tasks = s.tasks();
  cost.actions = s.actions();
  cost.actions_skipped = s.actions_skipped();
  cost.periods_skipped = s.periods_skipped();
  cost.predictions = s.predictions();
  return cost;
}

Prediction PredictionFromProto(const v1::PredictResponse& r) {
  auto ns = [](double ms) { return static_cast<int64_t>(std::llround(ms * 1e6)); };
  auto fidelity = [](v1::Fidelity f) { return FromProto(f).value_or(Fidelity::kAnalytical); };
  Prediction p;
  p.iteration_time_ns = r.iteration_time_ns();
  for (const v1::StageBreakdown& s : r.stages()) {
    StageBreakdown b;
    b.stage = s.stage();
    b.first_layer = s.first_layer();
    b.num_layers = s.num_layers();
    b.compute_ns = ns(s.compute_ms());
    b.tensor_parallel_ns = ns(s.tensor_parallel_ms());
    b.context_parallel_ns = ns(s.context_parallel_ms());
    b.expert_parallel_ns = ns(s.expert_parallel_ms());
    b.pipeline_exposed_ns = ns(s.pipeline_exposed_ms());
    b.data_parallel_exposed_ns = ns(s.data_parallel_exposed_ms());
    b.idle_ns = ns(s.idle_ms());
    b.tensor_parallel_hidden_ns = ns(s.tensor_parallel_hidden_ms());
    b.data_parallel_hidden_ns = ns(s.data_parallel_hidden_ms());
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
    p.goodput = GoodputFromProto(r.goodput());
  }
  p.granularity = FromProto(r.granularity()).value_or(Granularity::kOperator);
  p.num_tasks = r.num_tasks();
  p.simulation = SimulationFromProto(r.simulation());
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
  p.fidelity.estimated.assign(f.estimated().begin(), f.estimated().end());
  if (r.has_interval()) {
    p.interval_low_ns = r.interval().low_ms() * 1e6;
    p.interval_high_ns = r.interval().high_ms() * 1e6;
    p.interval_coverage = r.interval().coverage();
    p.regime = r.interval().regime();
    p.paired_error_low = r.interval().paired_error_low();
    p.paired_error_high = r.interval().paired_error_high();
    p.paired_rows = r.interval().paired_pairs();
    p.paired_regime = r.interval().paired_regime();
  }
  return p;
}

}  // namespace vtrain::proto
