#include "core/predict/predictor.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/streaming.h"
#include "core/graph/builder.h"
#include "core/spec/model.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

// Forward FLOPs per token of one decoder layer and of the logit layer.
double LayerForwardFlopsPerToken(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size);
  const double f = static_cast<double>(m.ffn());
  const double s = static_cast<double>(m.seq_len);
  return 8 * h * h + 4 * h * f + 4 * s * h;
}
double LogitForwardFlopsPerToken(const ModelSpec& m) {
  return 2 * static_cast<double>(m.hidden_size) * static_cast<double>(m.vocab_size);
}

}  // namespace

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
  return 3 * tokens *
         (static_cast<double>(job.model.num_layers) * LayerForwardFlopsPerToken(job.model) +
          LogitForwardFlopsPerToken(job.model));
}

absl::StatusOr<Prediction> Predict(const Job& job, const ProfileSet& profiles,
                                   const PredictOptions& options) {
  VTRAIN_RETURN_IF_ERROR(ValidateJob(job));
  if (!(options.train_tokens >= 0 && options.train_tokens <= kMaxTrainTokens)) {
    return absl::InvalidArgumentError(absl::StrCat("train_tokens=", options.train_tokens,
                                                   " must be in [0, ", kMaxTrainTokens, "]"));
  }
  // Cheap checks before expensive work: a plan whose weights alone are many
  // times a GPU's memory is not a plan (its optimizer step alone would be
  // millions of kernel launches to generate).
  const MemoryEstimate memory = EstimateMemory(job);
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
  ProfileLookup lookup(profiles, job.cluster.gpu,
                       LinkBandwidths{job.cluster.intra_node_bandwidth_bytes_per_s,
                                      job.cluster.inter_node_bandwidth_bytes_per_s});
  BuildOptions build;
  build.granularity = options.granularity;
  build.max_tasks = options.max_tasks;
  build.max_graph_bytes = options.max_graph_bytes;
  build.cancelled = options.cancelled;
  Prediction p;
  IterationSimulation sim;
  if (options.granularity == Granularity::kKernel) {
    // Kernel granularity materialises the whole graph and runs the engine.
    VTRAIN_ASSIGN_OR_RETURN(IterationGraph graph, BuildIterationGraph(job, lookup, build));
    SimulationOptions sim_options;
    sim_options.cancelled = options.cancelled;
    VTRAIN_ASSIGN_OR_RETURN(sim.result, Simulate(graph.graph, sim_options));
    sim.stages = std::move(graph.stages);
    sim.num_micro_batches = graph.num_micro_batches;
    sim.num_tasks = graph.graph.num_tasks();
    p.graph_bytes = graph.graph.MemoryBytes();
  } else {
    // The fast path merges operators and runs tasks as they are generated.
    VTRAIN_ASSIGN_OR_RETURN(sim, SimulateIteration(job, lookup, build));
  }
  const SimulationResult& result = sim.result;
  p.iteration_time_ns = result.makespan_ns;
  p.num_micro_batches = sim.num_micro_batches;
  p.granularity = options.granularity;
  p.num_tasks = sim.num_tasks;
  p.profile_set = profiles.id.empty() ? profiles.name : profiles.id;

  for (size_t s = 0; s < sim.stages.size(); ++s) {
    const StageInfo& info = sim.stages[s];
    const StreamStats& c = result.streams[info.compute_stream];
    StageBreakdown b;
    b.stage = static_cast<int64_t>(s);
    b.first_layer = info.first_layer;
    b.num_layers = info.num_layers;
    b.parameters_per_gpu = info.parameters_per_gpu;
    int64_t busy = c.gap_ns;
    for (int64_t k : c.busy_ns) busy += k;
    const int64_t sends = info.pipeline_send_ns;
    b.tensor_parallel_ns = info.tensor_parallel_ns;
    b.compute_ns = busy - info.tensor_parallel_ns - sends;
    b.pipeline_exposed_ns = sends + c.exposed_wait_ns[static_cast<int>(TaskKind::kPipeline)];
    b.data_parallel_exposed_ns = c.exposed_wait_ns[static_cast<int>(TaskKind::kDataParallel)];
    b.idle_ns = c.idle_ns + c.exposed_wait_ns[static_cast<int>(TaskKind::kTensorParallel)];
    p.stages.push_back(b);
  }

  const Job& j = job;
  const double tokens =
      static_cast<double>(j.plan.global_batch) * static_cast<double>(j.model.seq_len);
  p.model_flops = ModelFlopsPerIteration(j);
  const double recompute_flops =
      j.plan.recompute == Recompute::kFull
          ? tokens * static_cast<double>(j.model.num_layers) * LayerForwardFlopsPerToken(j.model)
          : 0;
  p.hardware_flops = p.model_flops + recompute_flops;
  const double seconds = static_cast<double>(p.iteration_time_ns) * 1e-9;
  const double peak = static_cast<double>(JobGpus(j)) * j.cluster.gpu.PeakFlops(j.plan.dtype);
  if (seconds > 0) {
    p.mfu = p.model_flops / (seconds * peak);
    p.hfu = p.hardware_flops / (seconds * peak);
    p.tokens_per_s = tokens / seconds;
  }
  if (options.train_tokens > 0) {
    p.train_tokens = options.train_tokens;
    p.iterations = static_cast<int64_t>(std::ceil(options.train_tokens / tokens));
    p.training_time_s = static_cast<double>(p.iterations) * seconds;
    // The GPUs the job uses: a larger cluster's idle GPUs are not its cost.
    p.gpu_hours = p.training_time_s / 3600 * static_cast<double>(JobGpus(j));
    p.cost_usd = p.gpu_hours * j.cluster.price_usd_per_gpu_hour;
  }

  for (const LookupRecord& r : lookup.records()) {
    ++p.fidelity.lookups[static_cast<int>(r.fidelity)];
    p.fidelity.worst = std::max(p.fidelity.worst, r.fidelity);
  }
  p.fidelity.records = lookup.records();
  p.memory = memory;
  p.regime = RegimeOf(job);
  // The job's own regime's band, else (a set calibrated before the finer
  // regimes) its base regime's.
  const ErrorBand* chosen = nullptr;
  for (const std::string& regime : {p.regime, BaseRegimeOf(job)}) {
    for (const ErrorBand& band : profiles.error_bands) {
      if (chosen == nullptr && band.regime == regime) chosen = &band;
    }
  }
  if (chosen != nullptr) {
    const ErrorBand& band = *chosen;
    // error = (predicted - measured) / measured, so measured = predicted / (1 + error).
    const double t = static_cast<double>(p.iteration_time_ns);
    p.interval_low_ns = t / (1 + band.error_high);
    p.interval_high_ns = t / (1 + band.error_low);
    p.interval_coverage = band.coverage;
  }
  p.fidelity.missing_keys = lookup.MissingKeys();
  return p;
}

}  // namespace vtrain
