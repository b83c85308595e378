#include "client/prediction_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/json_writer.h"
#include "core/spec/model.h"

namespace vtrain::cli {
namespace {

double Ms(int64_t ns) { return static_cast<double>(ns) * 1e-6; }

std::string Human(double value) {
  if (value >= 1e12) return absl::StrFormat("%.2fT", value / 1e12);
  if (value >= 1e9) return absl::StrFormat("%.2fB", value / 1e9);
  if (value >= 1e6) return absl::StrFormat("%.2fM", value / 1e6);
  if (value >= 1e3) return absl::StrFormat("%.1fk", value / 1e3);
  return absl::StrFormat("%.0f", value);
}

}  // namespace

std::string PredictionTable(const Job& job, const Prediction& p, bool show_lookups) {
  const ModelSpec& m = job.model;
  const ParallelPlan& plan = job.plan;
  const ClusterSpec& c = job.cluster;
  std::string out;
  absl::StrAppend(&out, absl::StrFormat(
      "model    %s: %d layers, hidden %d, %d heads, seq %d, vocab %d, ffn %d (%s parameters)\n",
      m.name, m.num_layers, m.hidden_size, m.num_heads, m.seq_len, m.vocab_size, m.ffn(),
      Human(ModelParameterCount(m))));
  absl::StrAppend(&out, absl::StrFormat(
      "plan     t=%d d=%d p=%d, micro-batch %d, global batch %d (%d micro-batches), %s, "
      "recompute %s, %s, bucketing %s\n",
      plan.tensor_parallel, plan.data_parallel, plan.pipeline_parallel, plan.micro_batch,
      plan.global_batch, p.num_micro_batches, ScheduleName(plan.schedule),
      RecomputeName(plan.recompute), DTypeName(plan.dtype),
      plan.gradient_bucketing ? "on" : "off"));
  absl::StrAppend(&out, absl::StrFormat(
      "cluster  %d x %s, %d per node, NVLink %.0f GB/s per GPU, network %.0f Gb/s per node\n\n",
      c.num_gpus, c.gpu.name, c.gpus_per_node, c.intra_node_bandwidth_bytes_per_s / 1e9,
      c.inter_node_bandwidth_bytes_per_s * 8 / 1e9));

  absl::StrAppend(&out, absl::StrFormat("iteration time   %.3f ms\n", p.iteration_time_ms()));
  if (p.interval_coverage > 0) {
    absl::StrAppend(&out, absl::StrFormat(
        "%.0f%% interval     %.1f .. %.1f ms (held-out errors of %s A100 calibration runs)\n",
        100 * p.interval_coverage, p.interval_low_ns * 1e-6, p.interval_high_ns * 1e-6,
        p.regime == "single_node" ? "single-node" : "multi-node"));
  }
  absl::StrAppend(&out, absl::StrFormat("throughput       %s tokens/s\n", Human(p.tokens_per_s)));
  absl::StrAppend(&out, absl::StrFormat("MFU / HFU        %.1f%% / %.1f%%\n", 100 * p.mfu,
                                        100 * p.hfu));
  if (p.train_tokens > 0) {
    absl::StrAppend(&out, absl::StrFormat(
        "training         %s tokens: %d iterations, %.2f days, %s GPU-hours", Human(p.train_tokens),
        p.iterations, p.training_time_s / 86400, Human(p.gpu_hours)));
    if (c.price_usd_per_gpu_hour > 0) {
      absl::StrAppend(&out, absl::StrFormat(", $%s", Human(p.cost_usd)));
    }
    out += "\n";
  }
  constexpr double kGiB = 1 << 30;
  if (p.memory.capacity_bytes > 0) {  // an older server sends no memory estimate
    absl::StrAppend(&out, absl::StrFormat(
        "memory           peak %.1f GiB per GPU of %.1f GiB%s\n", p.memory.peak_bytes / kGiB,
        p.memory.capacity_bytes / kGiB,
        p.memory.fits ? "" : "  ** OUT OF MEMORY: this plan does not fit **"));
  }
  absl::StrAppend(&out, "\nstage  layers     compute_ms      tp_ms  pp_exposed_ms  dp_exposed_ms"
                        "    idle_ms  memory_GiB\n");
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const StageBreakdown& s = p.stages[i];
    const double mem = i < p.memory.stages.size() ? p.memory.stages[i].peak_bytes / kGiB : 0;
    absl::StrAppend(&out, absl::StrFormat(
        "%5d  %-8s %12.3f %10.3f %14.3f %14.3f %10.3f %11.1f\n", s.stage,
        absl::StrCat(s.first_layer, "-", s.first_layer + s.num_layers - 1), Ms(s.compute_ns),
        Ms(s.tensor_parallel_ns), Ms(s.pipeline_exposed_ns), Ms(s.data_parallel_exposed_ns),
        Ms(s.idle_ns), mem));
  }
  const FidelitySummary& f = p.fidelity;
  absl::StrAppend(&out, absl::StrFormat(
      "\nprofiles %s, %s granularity, %d tasks\n"
      "fidelity %d measured, %d interpolated, %d analytical lookups",
      p.profile_set, GranularityName(p.granularity), p.num_tasks,
      f.lookups[static_cast<int>(Fidelity::kMeasured)],
      f.lookups[static_cast<int>(Fidelity::kInterpolated)],
      f.lookups[static_cast<int>(Fidelity::kAnalytical)]));
  if (f.worst == Fidelity::kAnalytical) {
    out += " (the analytical ones are model estimates, not measurements)";
  }
  out += "\n";
  if (show_lookups) {
    for (const LookupRecord& r : f.records) {
      absl::StrAppend(&out, absl::StrFormat("  %-12s %s\n", FidelityName(r.fidelity), r.key));
    }
  }
  return out;
}

std::string PredictionJson(const Job& job, const Prediction& p) {
  JsonWriter w;
  w.BeginObject();
  w.Key("iteration_time_ms").Double(p.iteration_time_ms());
  w.Key("iteration_time_ns").Int(p.iteration_time_ns);
  if (p.interval_coverage > 0) {
    w.Key("interval").BeginObject();
    w.Key("low_ms").Double(p.interval_low_ns * 1e-6);
    w.Key("high_ms").Double(p.interval_high_ns * 1e-6);
    w.Key("coverage").Double(p.interval_coverage);
    w.Key("regime").String(p.regime);
    w.EndObject();
  }
  w.Key("tokens_per_s").Double(p.tokens_per_s);
  w.Key("mfu").Double(p.mfu);
  w.Key("hfu").Double(p.hfu);
  w.Key("model_flops_per_iteration").Double(p.model_flops);
  w.Key("hardware_flops_per_iteration").Double(p.hardware_flops);
  w.Key("num_micro_batches").Int(p.num_micro_batches);
  if (p.train_tokens > 0) {
    w.Key("training").BeginObject();
    w.Key("tokens").Double(p.train_tokens);
    w.Key("iterations").Int(p.iterations);
    w.Key("time_s").Double(p.training_time_s);
    w.Key("time_days").Double(p.training_time_s / 86400);
    w.Key("gpu_hours").Double(p.gpu_hours);
    w.Key("cost_usd").Double(p.cost_usd);
    w.EndObject();
  }
  w.Key("memory").BeginObject();
  w.Key("peak_bytes").Double(p.memory.peak_bytes);
  w.Key("capacity_bytes").Double(p.memory.capacity_bytes);
  w.Key("fits").Bool(p.memory.fits);
  w.EndObject();
  w.Key("stages").BeginArray();
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const StageBreakdown& s = p.stages[i];
    w.BeginObject();
    if (i < p.memory.stages.size()) {
      const StageMemory& sm = p.memory.stages[i];
      w.Key("peak_memory_bytes").Double(sm.peak_bytes);
      w.Key("model_states_bytes").Double(sm.model_states_bytes);
      w.Key("activations_bytes").Double(sm.activations_bytes);
      w.Key("micro_batches_in_flight").Int(sm.micro_batches_in_flight);
    }
    w.Key("stage").Int(s.stage);
    w.Key("first_layer").Int(s.first_layer);
    w.Key("num_layers").Int(s.num_layers);
    w.Key("compute_ms").Double(Ms(s.compute_ns));
    w.Key("tensor_parallel_ms").Double(Ms(s.tensor_parallel_ns));
    w.Key("pipeline_exposed_ms").Double(Ms(s.pipeline_exposed_ns));
    w.Key("data_parallel_exposed_ms").Double(Ms(s.data_parallel_exposed_ns));
    w.Key("idle_ms").Double(Ms(s.idle_ns));
    w.Key("parameters_per_gpu").Double(s.parameters_per_gpu);
    w.EndObject();
  }
  w.EndArray();
  w.Key("fidelity").BeginObject();
  w.Key("worst").String(FidelityName(p.fidelity.worst));
  for (int i = 0; i < kNumFidelities; ++i) {
    w.Key(FidelityName(static_cast<Fidelity>(i))).Int(p.fidelity.lookups[i]);
  }
  w.Key("lookups").BeginArray();
  for (const LookupRecord& r : p.fidelity.records) {
    w.BeginObject().Key("key").String(r.key).Key("fidelity").String(FidelityName(r.fidelity));
    w.EndObject();
  }
  w.EndArray();
  w.Key("missing_keys").BeginArray();
  for (const std::string& k : p.fidelity.missing_keys) w.String(k);
  w.EndArray();
  w.EndObject();
  w.Key("simulation").BeginObject();
  w.Key("granularity").String(GranularityName(p.granularity));
  w.Key("num_tasks").Int(p.num_tasks);
  w.Key("graph_bytes").Int(p.graph_bytes);
  w.Key("profile_set").String(p.profile_set);
  w.EndObject();
  w.Key("job").BeginObject();
  w.Key("model").String(job.model.name);
  w.Key("num_layers").Int(job.model.num_layers);
  w.Key("hidden_size").Int(job.model.hidden_size);
  w.Key("num_heads").Int(job.model.num_heads);
  w.Key("seq_len").Int(job.model.seq_len);
  w.Key("vocab_size").Int(job.model.vocab_size);
  w.Key("ffn_hidden_size").Int(job.model.ffn());
  w.Key("gpu").String(job.cluster.gpu.name);
  w.Key("num_gpus").Int(job.cluster.num_gpus);
  w.Key("gpus_per_node").Int(job.cluster.gpus_per_node);
  w.Key("tensor_parallel").Int(job.plan.tensor_parallel);
  w.Key("data_parallel").Int(job.plan.data_parallel);
  w.Key("pipeline_parallel").Int(job.plan.pipeline_parallel);
  w.Key("micro_batch").Int(job.plan.micro_batch);
  w.Key("global_batch").Int(job.plan.global_batch);
  w.Key("schedule").String(ScheduleName(job.plan.schedule));
  w.Key("recompute").String(RecomputeName(job.plan.recompute));
  w.Key("dtype").String(DTypeName(job.plan.dtype));
  w.EndObject();
  w.EndObject();
  return w.str() + "\n";
}

}  // namespace vtrain::cli
