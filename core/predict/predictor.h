// One prediction: build the iteration graph, simulate it, and derive the
// iteration time, its per-stage breakdown, utilisation, throughput, training
// time and cost, with the fidelity of every profile lookup used.
#ifndef VTRAIN_CORE_PREDICT_PREDICTOR_H_
#define VTRAIN_CORE_PREDICT_PREDICTOR_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/graph/iteration.h"
#include "core/predict/goodput.h"
#include "core/predict/memory.h"
#include "core/profile/lookup.h"
#include "core/profile/profile.h"
#include "core/spec/job.h"

namespace vtrain {

// Where one pipeline stage's iteration went. The five parts add up to the
// iteration time.
struct StageBreakdown {
  int64_t stage = 0;
  int64_t first_layer = 0;
  int64_t num_layers = 0;
  int64_t compute_ns = 0;                // kernels and the gaps between them
  int64_t tensor_parallel_ns = 0;        // TP collectives (they block compute)
  int64_t context_parallel_ns = 0;       // CP exchanges that blocked compute
  int64_t expert_parallel_ns = 0;        // MoE dispatch and combine that blocked compute
  int64_t pipeline_exposed_ns = 0;       // sending (blocking) and waiting on transfers
  int64_t data_parallel_exposed_ns = 0;  // waiting on gradient all-reduces
  int64_t idle_ns = 0;                   // pipeline bubble and other waiting
  // Not part of the five: communication that ran under compute, hidden.
  // TP collectives covered by GEMMs (tp_comm_overlap), and data-parallel
  // collectives that ran while the stage computed (gradient bucketing, the
  // parameter gather under the next forward with param_gather_overlap).
  int64_t tensor_parallel_hidden_ns = 0;
  int64_t data_parallel_hidden_ns = 0;
  double parameters_per_gpu = 0;
};

struct FidelitySummary {
  std::array<int64_t, kNumFidelities> lookups{};  // count by Fidelity
  Fidelity worst = Fidelity::kMeasured;
  std::vector<LookupRecord> records;
  std::vector<std::string> missing_keys;
  // The MoE and long-context pieces priced without a measurement
  // (EstimatedPieces), in words.
  std::vector<std::string> estimated;
};

// What one answer cost to compute, in process: its wall time and how much
// was simulated.
struct SimulationCost {
  int64_t wall_ns = 0;  // wall time of the whole computation (steady clock)
  int64_t tasks = 0;    // tasks run on stream timelines
  // Pipeline actions (a forward or backward pass of one micro-batch on one
  // stage) run one by one, and those the periodic fast path accounted for by
  // jumping over repeating periods (engine/periodic.h).
  int64_t actions = 0;
  int64_t actions_skipped = 0;
  int64_t periods_skipped = 0;
  int64_t predictions = 0;  // 1 for a prediction; summed by searches and curves

  // Adds `other`'s counts (not its wall time: callers time the whole).
  void Add(const SimulationCost& other) {
    tasks += other.tasks;
    actions += other.actions;
    actions_skipped += other.actions_skipped;
    periods_skipped += other.periods_skipped;
    predictions += other.predictions;
  }
};

// Nanoseconds on the steady clock since an arbitrary epoch, for wall times.
int64_t SteadyNowNs();

struct Prediction {
  int64_t iteration_time_ns = 0;
  std::vector<StageBreakdown> stages;
  int64_t num_micro_batches = 0;
  // FLOPs of one iteration over all GPUs: the model's (forward + backward)
  // and the hardware's (plus the recomputed forward).
  double model_flops = 0;
  double hardware_flops = 0;
  double mfu = 0;  // model FLOPs / (time * GPUs * peak)
  double hfu = 0;
  double tokens_per_s = 0;
  // Set when PredictOptions::train_tokens > 0.
  double train_tokens = 0;
  int64_t iterations = 0;
  double training_time_s = 0;
  double gpu_hours = 0;
  double cost_usd = 0;  // 0 when the cluster has no price
  // With failures, checkpoints and restarts (cluster.reliability); set with
  // train_tokens.
  Goodput goodput;
  // How it was computed.
  Granularity granularity = Granularity::kOperator;
  int64_t num_tasks = 0;
  int64_t graph_bytes = 0;  // memory of the materialised graph (kernel granularity only)
  std::string profile_set;
  FidelitySummary fidelity;
  // Where measured iteration times fell around predictions like this one,
  // from the profile set's calibration residuals for this regime; all zero
  // when the set has no band for it.
  // Per-GPU memory by stage; a plan that does not fit is still simulated
  // and marked here (memory.fits == false).
  MemoryEstimate memory;
  // RegimeOf(job), or "uncalibrated_gpu/" + it when the set's band for it
  // was carried over from another GPU's calibration (default_profiles.h).
  std::string regime;
  double interval_low_ns = 0;
  double interval_high_ns = 0;
  double interval_coverage = 0;
  // The band of the ratio of two plans of one job (PairedBandOf): predictions
  // whose ratio is outside [1 + paired_error_low, 1 + paired_error_high]
  // are ordered as measured with the band's coverage. 0 when the set has
  // none; paired_regime names it ("uncalibrated_gpu/paired" when carried
  // over from another GPU).
  double paired_error_low = 0, paired_error_high = 0;
  int64_t paired_rows = 0;
  std::string paired_regime;
  SimulationCost simulation;

  double iteration_time_ms() const { return static_cast<double>(iteration_time_ns) * 1e-6; }
};

// The largest training-token count a prediction takes: beyond it the
// iteration count would not fit an int64 (about 1000x any corpus so far).
inline constexpr double kMaxTrainTokens = 1e18;

struct PredictOptions {
  Granularity granularity = Granularity::kOperator;
  int64_t max_tasks = 100'000'000;
  // The most memory a kernel-granularity graph may take (estimated before
  // anything is allocated).
  int64_t max_graph_bytes = int64_t{16} << 30;
  double train_tokens = 0;  // 0 or in (0, kMaxTrainTokens]
  // Jump over repeating periods of the schedule (operator granularity; same
  // result either way, see engine/periodic.h).
  bool periodic = true;
  std::function<bool()> cancelled;
  // Operator and collective resolutions shared with other predictions over
  // the same profile set (lookup.h); nullptr: resolved for this one only.
  // Same result either way.
  LookupMemo* memo = nullptr;
};

// Predicts `job` with `profiles` (whose GPU should be the cluster's; lookups
// for another GPU fall back to ANALYTICAL). INVALID_ARGUMENT for a bad job, or
// for options.train_tokens negative, non-finite or above kMaxTrainTokens;
// RESOURCE_EXHAUSTED, before any expensive work, for a plan whose weights
// alone exceed kMaxWeightsOverMemory times a GPU's memory, a graph over
// options.max_tasks or options.max_graph_bytes; CANCELLED.
inline constexpr double kMaxWeightsOverMemory = 64;
absl::StatusOr<Prediction> Predict(const Job& job, const ProfileSet& profiles,
                                   const PredictOptions& options = {});

// The calibration regime of a job, from the job alone (its prediction-error
// band is computed per regime; core/calibrate/bands.h):
//  - "multi_node_large_params": the job's t*d*p GPUs span nodes and a GPU
//    holds over kLargeParamsPerGpu parameters (deep 175B-class stages: the
//    optimizer and memory pressure dominate what the model misses);
//  - "multi_node_small_params": other jobs spanning nodes;
//  - "single_node_tp_node": one node, t equal to the GPUs per node (the
//    tensor-parallel collectives span the whole node);
//  - "single_node_host_bound": one node, and a decoder layer's forward GEMMs
//    for one micro-batch take under kHostBoundGemmNs at the GPU's peak (the
//    host's kernel dispatch, not the GPU, sets the pace);
//  - "single_node_gpu_bound": the rest (GPU-bound, one node).
// The base regimes "single_node" and "multi_node" hold all of their fine
// regimes' jobs.
std::string RegimeOf(const Job& job);
// "single_node" (t*d*p GPUs within one node) or "multi_node": the band used
// when a set has none for the job's fine regime (too few calibration rows,
// or a calibration made before the fine regimes).
std::string BaseRegimeOf(const Job& job);
inline constexpr double kLargeParamsPerGpu = 1e9;
inline constexpr double kHostBoundGemmNs = 500'000;

// Model FLOPs of one iteration (Narayanan et al. 2021, §5.1, generalised to
// any FFN width): 3 * tokens * (L * (8h^2 + 4hf + 4sh) + 2hV).
double ModelFlopsPerIteration(const Job& job);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PREDICT_PREDICTOR_H_
