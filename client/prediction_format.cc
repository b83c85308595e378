#include "client/prediction_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/profile/default_profiles.h"
#include "core/spec/model.h"
#include "proto/job_convert.h"
#include "proto/prediction_convert.h"

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

// 1234567 -> "1,234,567".
std::string Thousands(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string Duration(int64_t ns) {
  if (ns < 1000) return absl::StrCat(ns, " ns");
  if (ns < 1'000'000) return absl::StrFormat("%.0f µs", static_cast<double>(ns) * 1e-3);
  if (ns < 1'000'000'000) return absl::StrFormat("%.1f ms", static_cast<double>(ns) * 1e-6);
  return absl::StrFormat("%.2f s", static_cast<double>(ns) * 1e-9);
}

std::string PredictionTable(const Job& job, const Prediction& p, bool show_lookups) {
  const ModelSpec& m = job.model;
  const ParallelPlan& plan = job.plan;
  const ClusterSpec& c = job.cluster;
  std::string out;
  absl::StrAppend(
      &out,
      absl::StrFormat(
          "model    %s%s: %d layers, hidden %d, %d heads%s, seq %d, vocab %d, ffn %d (%s "
          "parameters)\n",
          m.name, m.arch == Architecture::kGpt ? "" : " (llama)", m.num_layers, m.hidden_size,
          m.num_heads, m.kv_heads() == m.num_heads ? "" : absl::StrCat(" (", m.kv_heads(), " kv)"),
          m.seq_len, m.vocab_size, m.ffn(), Human(ModelParameterCount(m))));
  absl::StrAppend(
      &out, absl::StrFormat(
                "plan     t=%d d=%d p=%d, micro-batch %d, global batch %d (%d micro-batches), %s, "
                "recompute %s, %s, bucketing %s\n",
                plan.tensor_parallel, plan.data_parallel, plan.pipeline_parallel, plan.micro_batch,
                plan.global_batch, p.num_micro_batches, ScheduleName(plan.schedule),
                RecomputeName(plan.recompute), DTypeName(plan.dtype),
                plan.gradient_bucketing ? "on" : "off"));
  absl::StrAppend(
      &out,
      absl::StrFormat(
          "cluster  %d x %s, %d per node, NVLink %.0f GB/s per GPU, network %.0f Gb/s per node\n\n",
          c.num_gpus, c.gpu.name, c.gpus_per_node, c.intra_node_bandwidth_bytes_per_s / 1e9,
          c.inter_node_bandwidth_bytes_per_s * 8 / 1e9));
  if (JobGpus(job) < c.num_gpus) {
    // The cluster is larger than the job: utilisation and cost count the
    // job's GPUs only.
    absl::StrAppend(&out, absl::StrFormat("         the job uses %d of the cluster's %d GPUs\n\n",
                                          JobGpus(job), c.num_gpus));
  }

  absl::StrAppend(&out, absl::StrFormat("iteration time   %.3f ms\n", p.iteration_time_ms()));
  if (p.interval_coverage > 0) {
    // "uncalibrated_gpu/single_node": A100 bands widened for another GPU.
    absl::string_view regime = p.regime;
    const bool uncalibrated = absl::ConsumePrefix(&regime, kUncalibratedGpuRegimePrefix);
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "%.0f%% interval     %.1f .. %.1f ms (held-out errors of A100 calibration runs, "
            "regime %s%s)\n",
            100 * p.interval_coverage, p.interval_low_ns * 1e-6, p.interval_high_ns * 1e-6, regime,
            uncalibrated ? absl::StrFormat(", widened %gx: this GPU has no calibration",
                                           kUncalibratedGpuSpread)
                         : ""));
  }
  absl::StrAppend(&out, absl::StrFormat("throughput       %s tokens/s\n", Human(p.tokens_per_s)));
  absl::StrAppend(&out,
                  absl::StrFormat("MFU / HFU        %.1f%% / %.1f%%\n", 100 * p.mfu, 100 * p.hfu));
  if (p.train_tokens > 0) {
    absl::StrAppend(
        &out, absl::StrFormat("training         %s tokens: %d iterations, %.2f days, %s GPU-hours",
                              Human(p.train_tokens), p.iterations, p.training_time_s / 86400,
                              Human(p.gpu_hours)));
    if (c.price_usd_per_gpu_hour > 0) {
      absl::StrAppend(&out, absl::StrFormat(", $%s", Human(p.cost_usd)));
    }
    out += "\n";
  }
  constexpr double kGiB = 1 << 30;
  if (p.memory.capacity_bytes > 0) {  // an older server sends no memory estimate
    absl::StrAppend(
        &out,
        absl::StrFormat("memory           peak %.1f GiB per GPU of %.1f GiB%s\n",
                        p.memory.peak_bytes / kGiB, p.memory.capacity_bytes / kGiB,
                        p.memory.fits ? "" : "  ** OUT OF MEMORY: this plan does not fit **"));
  }
  absl::StrAppend(&out,
                  "\nstage  layers     compute_ms      tp_ms  pp_exposed_ms  dp_exposed_ms"
                  "    idle_ms  memory_GiB\n");
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const StageBreakdown& s = p.stages[i];
    const double mem = i < p.memory.stages.size() ? p.memory.stages[i].peak_bytes / kGiB : 0;
    absl::StrAppend(
        &out, absl::StrFormat("%5d  %-8s %12.3f %10.3f %14.3f %14.3f %10.3f %11.1f\n", s.stage,
                              absl::StrCat(s.first_layer, "-", s.first_layer + s.num_layers - 1),
                              Ms(s.compute_ns), Ms(s.tensor_parallel_ns), Ms(s.pipeline_exposed_ns),
                              Ms(s.data_parallel_exposed_ns), Ms(s.idle_ns), mem));
  }
  const FidelitySummary& f = p.fidelity;
  absl::StrAppend(&out,
                  absl::StrFormat("\nprofiles %s, %s granularity, %d tasks\n"
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

}  // namespace

std::string SimulationLine(const v1::Simulation& s) {
  std::string out = "simulated ";
  if (s.predictions() > 1) absl::StrAppend(&out, Thousands(s.predictions()), " predictions, ");
  absl::StrAppend(&out, Thousands(s.actions() + s.actions_skipped()), " actions");
  if (s.actions_skipped() > 0) {
    absl::StrAppend(&out, " (", Thousands(s.actions_skipped()), " by periodic jumps)");
  }
  absl::StrAppend(&out, " in ", Duration(s.wall_ns()));
  if (s.cached()) absl::StrAppend(&out, " (the server's cached answer to this same request)");
  absl::StrAppend(&out, "\n");
  return out;
}

absl::StatusOr<std::string> PredictionTable(const v1::PredictResponse& response,
                                            bool show_lookups) {
  v1::PredictRequest echo;
  *echo.mutable_model() = response.model();
  *echo.mutable_plan() = response.plan();
  *echo.mutable_cluster() = response.cluster();
  absl::StatusOr<Job> job = convert::JobFromProto(echo);
  if (!job.ok()) {
    return absl::InternalError(
        absl::StrCat("the response's job does not read back: ", job.status().message()));
  }
  return PredictionTable(*job, convert::PredictionFromProto(response), show_lookups) +
         SimulationLine(response.simulation());
}

}  // namespace vtrain::cli
