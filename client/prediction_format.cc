#include "client/prediction_format.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/graph/iteration.h"
#include "core/profile/default_profiles.h"
#include "core/profile/profile.h"
#include "core/spec/fabric.h"
#include "core/spec/job.h"
#include "core/spec/model.h"
#include "proto/enum_convert.h"

namespace vtrain::client {
namespace {

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

// "; MoE 256 experts, top-8, 1 shared, ep 64 (37.6B active)" for a MoE model.
std::string MoeText(const v1::PredictResponse& r) {
  const v1::ModelSpec& m = r.model();
  if (!m.has_moe() || m.moe().num_experts() == 0) return "";
  std::string text = absl::StrFormat("\nmoe      %d experts, top-%d, expert ffn %d",
                                     m.moe().num_experts(), m.moe().top_k(), m.moe().expert_ffn());
  if (m.moe().shared_experts() > 0)
    absl::StrAppend(&text, ", ", m.moe().shared_experts(), " shared");
  if (m.moe().dense_layers() > 0) {
    absl::StrAppend(&text, ", first ", m.moe().dense_layers(), " layers dense");
  }
  if (m.attention() == v1::ATTENTION_KIND_MLA) absl::StrAppend(&text, ", MLA");
  if (m.mtp_layers() > 0) absl::StrAppend(&text, ", ", m.mtp_layers(), " MTP");
  const v1::ParallelPlan& q = r.plan();
  absl::StrAppend(
      &text, absl::StrFormat("; ep=%d etp=%d, %s dispatch%s; %s active parameters",
                             std::max<int64_t>(1, q.expert_parallel()),
                             std::max<int64_t>(1, q.expert_tensor_parallel()),
                             q.moe_dispatcher() == v1::MOE_DISPATCHER_UNSPECIFIED
                                 ? "alltoall"
                                 : EnumName(q.moe_dispatcher()),
                             q.moe_overlap() ? " overlapped" : "", Human(r.active_parameters())));
  absl::StrAppend(&text,
                  absl::StrFormat("\nrouting  %s: busiest EP rank %.2fx the mean load, "
                                  "%.1f%% of token copies kept",
                                  q.has_routing_sigma()
                                      ? absl::StrFormat("log-normal sigma %.2f", q.routing_sigma())
                                      : std::string("forced balance"),
                                  r.expert_load_max_over_mean(), 100 * r.expert_tokens_kept()));
  return text;
}

std::string ModelLine(const v1::PredictResponse& r) {
  const v1::ModelSpec& m = r.model();
  const bool gpt = m.arch() == v1::ARCHITECTURE_UNSPECIFIED || m.arch() == v1::ARCHITECTURE_GPT;
  return absl::StrFormat(
      "model    %s%s: %d layers, hidden %d, %d heads%s, seq %d, vocab %d, ffn %d (%s "
      "parameters)%s\n",
      m.preset().empty() ? "custom" : m.preset(),
      gpt ? "" : absl::StrCat(" (", EnumName(m.arch()), ")"), m.num_layers(), m.hidden_size(),
      m.num_heads(),
      m.has_num_kv_heads() && m.num_kv_heads() != m.num_heads()
          ? absl::StrCat(" (", m.num_kv_heads(), " kv)")
          : "",
      m.seq_len(), m.vocab_size(), m.ffn_hidden_size(), Human(r.model_parameters()), MoeText(r));
}

// Every option of the plan, those at their defaults only when they are part
// of the paper's plan line (so that a printed plan can be given back).
std::string PlanLine(const v1::PredictResponse& r) {
  const v1::ParallelPlan& q = r.plan();
  std::string degrees = absl::StrCat("t=", q.tensor_parallel());
  if (q.context_parallel() > 1) absl::StrAppend(&degrees, " c=", q.context_parallel());
  absl::StrAppend(&degrees, " d=", q.data_parallel(), " p=", q.pipeline_parallel());
  if (q.virtual_stages() > 1) absl::StrAppend(&degrees, " v=", q.virtual_stages());
  std::string extras;
  if (q.virtual_stages() > 1) absl::StrAppend(&extras, ", interleaved");
  if (q.sequence_parallel() && q.tensor_parallel() > 1) {
    absl::StrAppend(&extras, ", sequence parallel");
  }
  if (q.data_parallel_sharding() != v1::DATA_PARALLEL_SHARDING_UNSPECIFIED &&
      q.data_parallel_sharding() != v1::DATA_PARALLEL_SHARDING_NONE) {
    absl::StrAppend(&extras, ", sharding ", EnumName(q.data_parallel_sharding()));
  }
  if (q.context_parallel() > 1 && q.cp_comm() != v1::CONTEXT_PARALLEL_COMM_UNSPECIFIED &&
      q.cp_comm() != v1::CONTEXT_PARALLEL_COMM_P2P) {
    absl::StrAppend(&extras, ", cp ", EnumName(q.cp_comm()));
    if (q.has_cp_a2a_size()) absl::StrAppend(&extras, " (", q.cp_a2a_size(), " per all-to-all)");
  }
  if (q.tp_comm_overlap() && q.tensor_parallel() > 1) absl::StrAppend(&extras, ", tp overlap");
  if (q.param_gather_overlap()) absl::StrAppend(&extras, ", param-gather overlap");
  // An uneven pipeline layout gets a line of its own, in Megatron's notation.
  std::optional<int64_t> layers;  // of the first chunk
  bool uneven = false;
  for (const v1::StageBreakdown& s : r.stages()) {
    for (int64_t n : s.chunk_num_layers()) {
      if (!layers) layers = n;
      uneven = uneven || n != *layers;
    }
  }
  return absl::StrFormat(
      "plan     %s, micro-batch %d, global batch %d (%d micro-batches), %s%s, recompute %s, %s, "
      "bucketing %s\n%s",
      degrees, q.micro_batch(), q.global_batch(), r.num_micro_batches(), EnumName(q.schedule()),
      extras,
      q.recompute_modules_size() > 0 ? absl::StrCat(EnumName(q.recompute()), " (",
                                                    absl::StrJoin(q.recompute_modules(), ","), ")")
                                     : EnumName(q.recompute()),
      q.fp8_recipe() != v1::FP8_RECIPE_UNSPECIFIED && q.fp8_recipe() != v1::FP8_RECIPE_DELAYED
          ? absl::StrCat(EnumName(q.dtype()), " (", EnumName(q.fp8_recipe()), " scaling)")
          : EnumName(q.dtype()),
      q.gradient_bucketing() ? "on" : "off",
      uneven ? absl::StrCat("layout   ", r.pipeline_layout(), " (uneven)\n") : "");
}

// Where the settings the request left unset came from, and what it changed.
std::string SettingsLines(const v1::PredictResponse& r) {
  const v1::SettingsReport& s = r.settings();
  if (s.name().empty()) return "";  // an older server
  std::string out = absl::StrCat("settings ", s.name(), " (", s.source(), ")\n");
  if (s.changed_size() > 0) {
    absl::StrAppend(&out, "         changed: ", absl::StrJoin(s.changed(), ", "), "\n");
  }
  return out;
}

std::string ClusterLines(const v1::PredictResponse& r) {
  const v1::ClusterSpec& c = r.cluster();
  const v1::ParallelPlan& q = r.plan();
  std::string fabric;
  if (c.fabric().nodes_per_leaf() > 0) {
    const std::string placement =
        c.fabric().nodes_size() > 0
            ? absl::StrCat("on nodes ",
                           NodeListName({c.fabric().nodes().begin(), c.fabric().nodes().end()}))
            : std::string(EnumName(c.fabric().placement()));
    fabric = absl::StrFormat("\nfabric   leaf/spine, %d nodes per leaf, %g:1 oversubscribed, %s",
                             c.fabric().nodes_per_leaf(), c.fabric().oversubscription(), placement);
    if (c.fabric().nodes_size() == 0 && c.fabric().cluster_nodes() > 0) {
      absl::StrAppend(&fabric, " over ", c.fabric().cluster_nodes(), " nodes");
    }
  }
  const std::string domain = c.has_nvlink_domain() && c.nvlink_domain() != c.gpus_per_node()
                                 ? absl::StrFormat(", NVLink domains of %d GPUs", c.nvlink_domain())
                                 : "";
  std::string out = absl::StrFormat(
      "cluster  %d x %s, %d per node%s, NVLink %.0f GB/s per GPU, network %.0f Gb/s per "
      "node%s\n\n",
      c.num_gpus(), c.gpu(), c.gpus_per_node(), domain, c.intra_node_bandwidth_bytes_per_s() / 1e9,
      c.inter_node_bandwidth_bytes_per_s() * 8 / 1e9, fabric);
  const int64_t job_gpus = q.tensor_parallel() * std::max<int64_t>(1, q.context_parallel()) *
                           q.data_parallel() * q.pipeline_parallel();
  if (job_gpus < c.num_gpus()) {
    // The cluster is larger than the job: utilisation and cost count the
    // job's GPUs only.
    absl::StrAppend(&out, absl::StrFormat("         the job uses %d of the cluster's %d GPUs\n\n",
                                          job_gpus, c.num_gpus()));
  }
  return out;
}

// 5.67e12 -> "5.67 TB".
std::string HumanBytes(double bytes) {
  if (bytes >= 1e12) return absl::StrFormat("%.2f TB", bytes / 1e12);
  if (bytes >= 1e9) return absl::StrFormat("%.1f GB", bytes / 1e9);
  return absl::StrFormat("%.1f MB", bytes / 1e6);
}

// The "with failures" lines of a prediction with training tokens.
std::string FormatGoodput(const v1::PredictResponse& r) {
  const v1::Goodput& g = r.goodput();
  std::string out = absl::StrFormat("with failures    %.2f days expected, goodput %.3f",
                                    g.expected_days(), g.fraction());
  if (r.cluster().price_usd_per_gpu_hour() > 0) {
    absl::StrAppend(&out, absl::StrFormat(", $%s", Human(g.expected_cost_usd())));
  }
  if (g.job_mtbf_s() <= 0) return out + " (no failures assumed)\n";
  absl::StrAppend(&out, absl::StrFormat(": %.0f interruptions (one every %.1f h)\n",
                                        g.expected_interruptions(), g.job_mtbf_s() / 3600));
  absl::StrAppend(
      &out, absl::StrFormat(
                "checkpoints      every %d iterations (%.1f min); %s written by %d nodes "
                "in %.1f s, training blocked %.1f s; restart %.1f min; %.1f min of work "
                "lost a failure\n",
                g.checkpoint_interval_iterations(), g.checkpoint_interval_s() / 60,
                HumanBytes(g.checkpoint_bytes()), g.writer_nodes(), g.checkpoint_write_s(),
                g.checkpoint_blocking_s(), g.restart_s() / 60, g.lost_work_per_failure_s() / 60));
  return out;
}

std::string TimeLines(const v1::PredictResponse& r) {
  std::string out = absl::StrFormat("iteration time   %.3f ms\n", r.iteration_time_ms());
  if (r.has_interval() && r.interval().coverage() > 0) {
    // "uncalibrated_gpu/single_node": another GPU's bands, widened;
    // "published_fp8_runs/multi_node": fitted on published runs (the H100's
    // for the H200).
    absl::string_view regime = r.interval().regime();
    const bool uncalibrated = absl::ConsumePrefix(&regime, kUncalibratedGpuRegimePrefix);
    const bool published = absl::ConsumePrefix(&regime, kPublishedRunsRegimePrefix);
    const bool bf16_runs = absl::ConsumePrefix(&regime, kPublishedBf16RunsRegimePrefix);
    const char* runs = uncalibrated ? "calibration runs on another GPU"
                       : published  ? "the published fp8 runs its set was fitted on"
                       : bf16_runs  ? "published bf16 runs on this GPU, not fitted on"
                                    : "A100 calibration runs";
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%.0f%% interval     %.1f .. %.1f ms (held-out errors of %s, regime %s%s)\n",
                  100 * r.interval().coverage(), r.interval().low_ms(), r.interval().high_ms(),
                  runs, regime,
                  uncalibrated ? absl::StrFormat(", widened %gx: this GPU has no calibration",
                                                 kUncalibratedGpuSpread)
                               : ""));
  }
  absl::StrAppend(&out, absl::StrFormat("throughput       %s tokens/s\n", Human(r.tokens_per_s())));
  absl::StrAppend(
      &out, absl::StrFormat("MFU / HFU        %.1f%% / %.1f%%", 100 * r.mfu(), 100 * r.hfu()));
  if (r.mfu_bf16_peak() > 0) {
    absl::StrAppend(&out, absl::StrFormat(" of the fp8 peak; MFU %.1f%% of the bf16 peak",
                                          100 * r.mfu_bf16_peak()));
  }
  out += "\n";
  if (r.has_training() && r.training().tokens() > 0) {
    const v1::Training& t = r.training();
    absl::StrAppend(
        &out, absl::StrFormat("training         %s tokens: %d iterations, %.2f days, %s GPU-hours",
                              Human(t.tokens()), t.iterations(), t.time_s() / 86400,
                              Human(t.gpu_hours())));
    if (r.cluster().price_usd_per_gpu_hour() > 0) {
      absl::StrAppend(&out, absl::StrFormat(", $%s", Human(t.cost_usd())));
    }
    out += "\n";
    if (r.has_goodput()) absl::StrAppend(&out, FormatGoodput(r));
  }
  constexpr double kGiB = 1 << 30;
  if (r.memory().capacity_bytes() > 0) {  // an older server sends no memory estimate
    absl::StrAppend(
        &out,
        absl::StrFormat("memory           peak %.1f GiB per GPU of %.1f GiB%s\n",
                        r.memory().peak_bytes() / kGiB, r.memory().capacity_bytes() / kGiB,
                        r.memory().fits() ? "" : "  ** OUT OF MEMORY: this plan does not fit **"));
  }
  return out;
}

// A stage's layers: "0-5", or with interleaving its chunks ("0-1,8-9") or,
// past four chunks, "6 x 2 layers".
std::string StageLayers(const v1::StageBreakdown& s, int64_t pipeline_parallel) {
  auto range = [](int64_t first, int64_t n) {
    return n == 0 ? std::string("-") : absl::StrCat(first, "-", first + n - 1);
  };
  const int64_t chunks = std::max<int64_t>(1, s.chunks());
  if (chunks == 1) return range(s.first_layer(), s.num_layers());
  const bool listed = s.chunk_num_layers_size() == chunks && s.chunk_first_layers_size() == chunks;
  if (chunks > 4) {
    if (!listed || std::adjacent_find(s.chunk_num_layers().begin(), s.chunk_num_layers().end(),
                                      std::not_equal_to<>()) == s.chunk_num_layers().end()) {
      return absl::StrCat(chunks, " x ", listed ? s.chunk_num_layers(0) : s.layers_per_chunk(),
                          " layers");
    }
    return absl::StrCat(s.num_layers(), " in ", chunks);
  }
  std::string out;
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t per = listed ? s.chunk_num_layers(k) : s.layers_per_chunk();
    const int64_t first =
        listed ? s.chunk_first_layers(k) : (k * pipeline_parallel + s.stage()) * per;
    absl::StrAppend(&out, k > 0 ? "," : "", range(first, per));
  }
  return out;
}

std::string StageTable(const v1::PredictResponse& r) {
  constexpr double kGiB = 1 << 30;
  // The CP and EP columns where the plan has them.
  const bool cp = r.plan().context_parallel() > 1;
  const bool ep = r.plan().expert_parallel() > 1;
  std::string out = absl::StrCat("\nstage  layers     compute_ms      tp_ms",
                                 cp ? "      cp_ms" : "", ep ? "      ep_ms" : "",
                                 "  pp_exposed_ms  dp_exposed_ms    idle_ms  memory_GiB\n");
  for (const v1::StageBreakdown& s : r.stages()) {
    absl::StrAppend(&out, absl::StrFormat("%5d  %-8s %12.3f %10.3f", s.stage(),
                                          StageLayers(s, r.plan().pipeline_parallel()),
                                          s.compute_ms(), s.tensor_parallel_ms()));
    if (cp) absl::StrAppend(&out, absl::StrFormat(" %10.3f", s.context_parallel_ms()));
    if (ep) absl::StrAppend(&out, absl::StrFormat(" %10.3f", s.expert_parallel_ms()));
    absl::StrAppend(&out, absl::StrFormat(" %14.3f %14.3f %10.3f %11.1f\n", s.pipeline_exposed_ms(),
                                          s.data_parallel_exposed_ms(), s.idle_ms(),
                                          s.peak_memory_bytes() / kGiB));
  }
  double tp_hidden = 0, dp_hidden = 0;
  for (const v1::StageBreakdown& s : r.stages()) {
    tp_hidden = std::max(tp_hidden, s.tensor_parallel_hidden_ms());
    dp_hidden = std::max(dp_hidden, s.data_parallel_hidden_ms());
  }
  // Only where an overlap was asked for: without one the little that runs
  // beside a stage's last dispatch gap is no news (the JSON still has it).
  const v1::ParallelPlan& q = r.plan();
  const bool overlapped = q.gradient_bucketing() || q.tp_comm_overlap() || q.param_gather_overlap();
  if (overlapped && (tp_hidden >= 0.0005 || dp_hidden >= 0.0005)) {
    absl::StrAppend(&out, absl::StrFormat("hidden under compute, not charged (most on a stage): "
                                          "tp %.3f ms, dp %.3f ms\n",
                                          tp_hidden, dp_hidden));
  }
  return out;
}

std::string FidelityLines(const v1::PredictResponse& r, bool show_lookups) {
  const v1::FidelitySummary& f = r.fidelity();
  std::string out = absl::StrFormat(
      "\nprofiles %s, %s granularity, %d tasks\n"
      "fidelity %d measured, %d interpolated, %d analytical lookups",
      r.profile_set_id(), EnumName(r.granularity()), r.num_tasks(), f.measured(), f.interpolated(),
      f.analytical());
  if (f.worst() == v1::FIDELITY_ANALYTICAL) {
    out += " (the analytical ones are model estimates, not measurements)";
  }
  out += "\n";
  for (const std::string& e : f.estimated()) absl::StrAppend(&out, "estimated ", e, "\n");
  for (const std::string& w : r.warnings()) absl::StrAppend(&out, "warning: ", w, "\n");
  if (show_lookups) {
    for (const v1::Lookup& l : f.lookups()) {
      absl::StrAppend(&out, absl::StrFormat("  %-12s %s\n", EnumName(l.fidelity()), l.key()));
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
  if (!response.has_model() || !response.has_plan() || !response.has_cluster()) {
    return absl::InternalError("the response does not echo its job (model, plan and cluster)");
  }
  return ModelLine(response) + PlanLine(response) + SettingsLines(response) +
         ClusterLines(response) + TimeLines(response) + StageTable(response) +
         FidelityLines(response, show_lookups) + SimulationLine(response.simulation());
}

}  // namespace vtrain::client
