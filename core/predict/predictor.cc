#include "core/predict/predictor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/streaming.h"
#include "core/graph/builder.h"
#include "core/predict/estimated.h"
#include "core/profile/default_profiles.h"
#include "core/spec/model.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

// Forward FLOPs per token of one decoder layer and of the logit layer, as
// Megatron-LM counts them for MFU (num_floating_point_operations in
// megatron/training/training.py): 2 FLOPs per weight, Q/output projections
// 4h * heads*d, K/V projections 4h * kv*d (grouped-query attention), scores
// and context 4s * heads*d (not halved for the causal mask), the MLP 4hf, or
// 6hf for SwiGLU's three GEMMs; MLA its five projections and scores over
// (d + rope) + v; a MoE layer's top_k routed experts and its shared experts
// (the router is not counted, as Megatron does not); the logit layer over
// the padded vocabulary.
double AttentionForwardFlopsPerToken(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size);
  const double s = static_cast<double>(m.seq_len);
  const double heads = static_cast<double>(m.num_heads);
  if (m.arch != Architecture::kLlama) return 4 * h * h + 4 * h * h + 4 * s * h;
  const double d = static_cast<double>(m.head_width());
  if (m.attention == AttentionKind::kMla) {
    const double ql = static_cast<double>(m.mla.q_lora_rank);
    const double kl = static_cast<double>(m.mla.kv_lora_rank);
    const double r = static_cast<double>(m.mla.rope_head_dim);
    const double v = static_cast<double>(m.mla.value_head_dim);
    const double q = ql > 0 ? h * ql + ql * heads * (d + r) : h * heads * (d + r);
    return 2 * (q + h * (kl + r) + kl * heads * (d + v) + heads * v * h) +
           2 * s * heads * (d + r + v);
  }
  const double kv = static_cast<double>(m.kv_heads());
  return 4 * h * heads * d + 4 * h * kv * d + 4 * s * heads * d;
}
double LayerForwardFlopsPerToken(const ModelSpec& m, bool moe_layer = false) {
  const double h = static_cast<double>(m.hidden_size);
  const double attention = AttentionForwardFlopsPerToken(m);
  if (moe_layer) {
    const double routed = static_cast<double>(m.moe.top_k * m.moe.expert_ffn);
    return attention + 6 * h * (routed + static_cast<double>(m.moe.shared_width()));
  }
  const double mlp_gemms = m.arch == Architecture::kLlama ? 3 : 2;
  return attention + 2 * mlp_gemms * h * static_cast<double>(m.ffn());
}
// Every layer's forward FLOPs per token, the MTP modules' included.
double LayersForwardFlopsPerToken(const ModelSpec& m) {
  const double moe_layers = static_cast<double>(m.MoeLayersIn(0, m.num_layers));
  const double dense_layers = static_cast<double>(m.num_layers) - moe_layers;
  double flops = dense_layers * LayerForwardFlopsPerToken(m) +
                 moe_layers * LayerForwardFlopsPerToken(m, /*moe_layer=*/true);
  if (m.mtp_layers > 0) {
    const double h = static_cast<double>(m.hidden_size);
    flops += static_cast<double>(m.mtp_layers) *
             (LayerForwardFlopsPerToken(m, m.IsMoeLayer(m.num_layers - 1)) + 4 * h * h);
  }
  return flops;
}
double LogitForwardFlopsPerToken(const ModelSpec& m, int64_t tensor_parallel) {
  return 2 * static_cast<double>(m.hidden_size) *
         static_cast<double>(PaddedVocab(m, tensor_parallel));
}

}  // namespace

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string BaseRegimeOf(const Job& job) {
  return JobGpus(job) <= job.cluster.gpus_per_node ? "single_node" : "multi_node";
}

std::string RegimeOf(const Job& job) {
  const ModelSpec& m = job.model;
  const ParallelPlan& plan = job.plan;
  const double t = static_cast<double>(plan.tensor_parallel);
  if (BaseRegimeOf(job) == "multi_node") {
    const double layers_per_stage =
        static_cast<double>(m.num_layers) /
        static_cast<double>(std::max<int64_t>(1, plan.pipeline_parallel));
    const double params_per_gpu = layers_per_stage * LayerParameterCount(m) / t;
    return params_per_gpu > kLargeParamsPerGpu ? "multi_node_large_params"
                                               : "multi_node_small_params";
  }
  if (plan.tensor_parallel == job.cluster.gpus_per_node) return "single_node_tp_node";
  // Forward GEMMs of one layer: QKV, projection, FFN up and down.
  const double h = static_cast<double>(m.hidden_size);
  const double f = static_cast<double>(m.ffn());
  const double tokens = static_cast<double>(plan.micro_batch) * static_cast<double>(m.seq_len);
  const double gemm_flops = 2 * tokens * (4 * h * h + 2 * h * f) / t;
  const double peak = job.cluster.gpu.PeakFlops(plan.dtype);
  if (peak > 0 && gemm_flops / peak * 1e9 < kHostBoundGemmNs) return "single_node_host_bound";
  return "single_node_gpu_bound";
}

double ModelFlopsPerIteration(const Job& job) {
  const double tokens =
      static_cast<double>(job.plan.global_batch) * static_cast<double>(job.model.seq_len);
  const double logits = static_cast<double>(1 + job.model.mtp_layers) *
                        LogitForwardFlopsPerToken(job.model, job.plan.tensor_parallel);
  return 3 * tokens * (LayersForwardFlopsPerToken(job.model) + logits);
}

namespace {

// Cheap checks before expensive work: a plan whose weights alone are many
// times a GPU's memory is not a plan (its optimizer step alone would be
// millions of kernel launches to generate).
absl::Status CheckWeightsFit(const Job& job, const MemoryEstimate& memory) {
  for (const StageMemory& stage : memory.stages) {
    const double weight_bytes = stage.parameters * 2;
    const double limit = kMaxWeightsOverMemory * static_cast<double>(job.cluster.gpu.memory_bytes);
    if (weight_bytes > limit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "pipeline stage ", stage.stage, " would hold ", stage.parameters, " parameters per GPU (",
          weight_bytes / 1e12, " TB of 16-bit weights), over ", kMaxWeightsOverMemory,
          " times the ", job.cluster.gpu.name,
          "'s memory; raise plan.pipeline_parallel or plan.tensor_parallel"));
    }
  }
  return absl::OkStatus();
}

// Runs the iteration at the options' granularity; the kernel path's graph
// size goes to *graph_bytes.
absl::StatusOr<IterationSimulation> RunIteration(const Job& job, ProfileLookup& lookup,
                                                 const PredictOptions& options,
                                                 int64_t* graph_bytes) {
  BuildOptions build;
  build.granularity = options.granularity;
  build.max_tasks = options.max_tasks;
  build.max_graph_bytes = options.max_graph_bytes;
  build.cancelled = options.cancelled;
  build.periodic = options.periodic;
  if (options.granularity != Granularity::kKernel) {
    // The fast path merges operators and runs tasks as they are generated.
    return SimulateIteration(job, lookup, build);
  }
  // Kernel granularity materialises the whole graph and runs the engine.
  IterationSimulation sim;
  VTRAIN_ASSIGN_OR_RETURN(IterationGraph graph, BuildIterationGraph(job, lookup, build));
  SimulationOptions sim_options;
  sim_options.cancelled = options.cancelled;
  VTRAIN_ASSIGN_OR_RETURN(sim.result, Simulate(graph.graph, sim_options));
  sim.stages = std::move(graph.stages);
  sim.num_micro_batches = graph.num_micro_batches;
  sim.num_tasks = graph.graph.num_tasks();
  *graph_bytes = graph.graph.MemoryBytes();
  sim.actions_stepped = 2 * job.plan.pipeline_parallel * graph.num_micro_batches;
  return sim;
}

// Where each stage's time went, from its compute stream's statistics.
std::vector<StageBreakdown> Breakdown(const IterationSimulation& sim) {
  std::vector<StageBreakdown> stages;
  for (size_t s = 0; s < sim.stages.size(); ++s) {
    const StageInfo& info = sim.stages[s];
    const StreamStats& c = sim.result.streams[info.compute_stream];
    StageBreakdown b;
    b.stage = static_cast<int64_t>(s);
    b.first_layer = info.first_layer;
    b.num_layers = info.num_layers;
    b.parameters_per_gpu = info.parameters_per_gpu;
    int64_t busy = c.gap_ns;
    for (int64_t k : c.busy_ns) busy += k;
    const int64_t sends = info.pipeline_send_ns;
    // The blocking collectives, by whose they are.
    b.context_parallel_ns = info.context_parallel_ns;
    b.expert_parallel_ns = info.expert_parallel_ns;
    b.tensor_parallel_ns =
        info.tensor_parallel_ns - info.context_parallel_ns - info.expert_parallel_ns;
    b.tensor_parallel_hidden_ns = info.tensor_parallel_hidden_ns;
    // The distributed optimizer's parameter gather holds the compute stream.
    b.compute_ns = busy - info.tensor_parallel_ns - sends - info.param_gather_ns;
    b.pipeline_exposed_ns = sends + c.exposed_wait_ns[static_cast<int>(TaskKind::kPipeline)];
    const int64_t dp_wait = c.exposed_wait_ns[static_cast<int>(TaskKind::kDataParallel)];
    b.data_parallel_exposed_ns = dp_wait + info.param_gather_ns;
    // What the data-parallel stream ran that the compute stream did not wait for.
    int64_t dp_busy = 0;
    for (int64_t k : sim.result.streams[info.data_parallel_stream].busy_ns) dp_busy += k;
    b.data_parallel_hidden_ns =
        std::max<int64_t>(0, dp_busy - dp_wait) + info.param_gather_hidden_ns;
    b.idle_ns = c.idle_ns + c.exposed_wait_ns[static_cast<int>(TaskKind::kTensorParallel)];
    stages.push_back(b);
  }
  return stages;
}

// FLOPs, utilisation, throughput and, with train_tokens, time and cost.
void FillRates(const Job& j, double train_tokens, Prediction& p) {
  const double tokens =
      static_cast<double>(j.plan.global_batch) * static_cast<double>(j.model.seq_len);
  p.model_flops = ModelFlopsPerIteration(j);
  // Full recomputation re-runs each layer's forward; selective only its
  // attention core, 4*s*h FLOPs per token (Korthikanti et al. 2022, §5).
  const double layer_tokens = tokens * static_cast<double>(j.model.num_layers);
  double recompute_flops = 0;
  if (j.plan.recompute == Recompute::kFull) {
    recompute_flops = tokens * LayersForwardFlopsPerToken(j.model);
  } else if (j.plan.recompute == Recompute::kSelective) {
    recompute_flops = layer_tokens * 4 * static_cast<double>(j.model.seq_len) *
                      static_cast<double>(j.model.num_heads * j.model.head_width());
  }
  p.hardware_flops = p.model_flops + recompute_flops;
  const double seconds = static_cast<double>(p.iteration_time_ns) * 1e-9;
  const double peak = static_cast<double>(JobGpus(j)) * j.cluster.gpu.PeakFlops(j.plan.dtype);
  if (seconds > 0) {
    p.mfu = p.model_flops / (seconds * peak);
    p.hfu = p.hardware_flops / (seconds * peak);
    p.tokens_per_s = tokens / seconds;
  }
  if (train_tokens > 0) {
    p.train_tokens = train_tokens;
    p.iterations = static_cast<int64_t>(std::ceil(train_tokens / tokens));
    p.training_time_s = static_cast<double>(p.iterations) * seconds;
    // The GPUs the job uses: a larger cluster's idle GPUs are not its cost.
    p.gpu_hours = p.training_time_s / 3600 * static_cast<double>(JobGpus(j));
    p.cost_usd = p.gpu_hours * j.cluster.price_usd_per_gpu_hour;
    p.goodput = EstimateGoodput(j, seconds, p.training_time_s);
  }
}

// The interval from the set's error band for the job's regime: its own
// regime's band, else (a set calibrated before the finer regimes) its base
// regime's; for a set fitted on published fp8 runs (fp8 jobs) or carried
// over from another GPU, the band labelled as such.
void FillInterval(const Job& job, const ProfileSet& profiles, Prediction& p) {
  p.regime = RegimeOf(job);
  const ErrorBand* chosen = nullptr;
  const std::string base = BaseRegimeOf(job);
  // Bands of published fp8 (bf16) runs serve fp8 (bf16) jobs only, before
  // any other.
  // Compared as prefix + name, without building the strings (every
  // prediction of a search passes here).
  const absl::string_view published = job.plan.dtype == DType::kFp8 ? kPublishedRunsRegimePrefix
                                      : job.plan.dtype == DType::kBf16
                                          ? kPublishedBf16RunsRegimePrefix
                                          : "-/";
  const std::pair<absl::string_view, absl::string_view> candidates[] = {
      {published, p.regime},
      {published, base},
      {"", p.regime},
      {kUncalibratedGpuRegimePrefix, p.regime},
      {"", base},
      {kUncalibratedGpuRegimePrefix, base}};
  for (const auto& [prefix, name] : candidates) {
    for (const ErrorBand& band : profiles.error_bands) {
      const absl::string_view r = band.regime;
      if (chosen == nullptr && r.size() == prefix.size() + name.size() &&
          absl::StartsWith(r, prefix) && absl::EndsWith(r, name)) {
        chosen = &band;
      }
    }
  }
  for (const ErrorBand& b : profiles.error_bands) {
    const absl::string_view r = b.regime;
    if (p.paired_regime.empty() &&
        (r == kPairedRegime ||
         (absl::StartsWith(r, kUncalibratedGpuRegimePrefix) && absl::EndsWith(r, kPairedRegime) &&
          r.size() == sizeof(kUncalibratedGpuRegimePrefix) - 1 + sizeof(kPairedRegime) - 1))) {
      p.paired_regime = b.regime;
      p.paired_error_low = b.error_low;
      p.paired_error_high = b.error_high;
      p.paired_rows = b.rows;
    }
  }
  if (chosen == nullptr) return;
  const ErrorBand& band = *chosen;
  p.regime = band.regime;  // labels an interval borrowed from another GPU
  // error = (predicted - measured) / measured, so measured = predicted / (1 + error).
  const double t = static_cast<double>(p.iteration_time_ns);
  p.interval_low_ns = t / (1 + band.error_high);
  p.interval_high_ns = t / (1 + band.error_low);
  p.interval_coverage = band.coverage;
}

}  // namespace

absl::StatusOr<Prediction> Predict(const Job& job, const ProfileSet& profiles,
                                   const PredictOptions& options) {
  const int64_t started_ns = SteadyNowNs();
  VTRAIN_RETURN_IF_ERROR(ValidateJob(job));
  if (!(options.train_tokens >= 0 && options.train_tokens <= kMaxTrainTokens)) {
    return absl::InvalidArgumentError(absl::StrCat("train_tokens=", options.train_tokens,
                                                   " must be in [0, ", kMaxTrainTokens, "]"));
  }
  const MemoryEstimate memory = EstimateMemory(job);
  VTRAIN_RETURN_IF_ERROR(CheckWeightsFit(job, memory));
  ProfileLookup lookup(profiles, job.cluster.gpu,
                       LinkBandwidths{job.cluster.intra_node_bandwidth_bytes_per_s,
                                      DomainNetworkBandwidth(job.cluster)},
                       options.memo);
  Prediction p;
  VTRAIN_ASSIGN_OR_RETURN(IterationSimulation sim,
                          RunIteration(job, lookup, options, &p.graph_bytes));
  p.simulation.predictions = 1;
  p.simulation.tasks = sim.num_tasks - sim.tasks_skipped;
  p.simulation.actions = sim.actions_stepped;
  p.simulation.actions_skipped = sim.actions_skipped;
  p.simulation.periods_skipped = sim.periods_skipped;
  p.iteration_time_ns = sim.result.makespan_ns;
  p.num_micro_batches = sim.num_micro_batches;
  p.granularity = options.granularity;
  p.num_tasks = sim.num_tasks;
  p.profile_set = profiles.id.empty() ? profiles.name : profiles.id;
  p.stages = Breakdown(sim);
  FillRates(job, options.train_tokens, p);
  for (const LookupRecord& r : lookup.records()) {
    ++p.fidelity.lookups[static_cast<int>(r.fidelity)];
    p.fidelity.worst = std::max(p.fidelity.worst, r.fidelity);
  }
  p.fidelity.records = lookup.records();
  p.fidelity.estimated = EstimatedPieces(job, p.fidelity.records);
  p.memory = memory;
  FillInterval(job, profiles, p);
  p.fidelity.missing_keys = lookup.MissingKeys();
  p.simulation.wall_ns = SteadyNowNs() - started_ns;
  return p;
}

}  // namespace vtrain
