// Compute-optimal model design under a real budget (the vTrain paper's third
// case study): over a family of realistic model shapes, the largest model
// whose compute-optimal token count (k tokens per parameter, Hoffmann et al.
// 2022) trains within the budget on its best plan, next to the naive answer
// that assumes the GPUs run at their peak.
#ifndef VTRAIN_CORE_PLAN_MODEL_DESIGN_H_
#define VTRAIN_CORE_PLAN_MODEL_DESIGN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/search.h"
#include "core/profile/profile.h"
#include "core/spec/job.h"

namespace vtrain {

// GPT shapes with the GPT-3 / Megatron aspect ratios (Narayanan et al. 2021,
// Table 1: hidden 2304..25600 against 24..128 layers; interpolated between
// its rows): hidden a multiple of 128, head size 128, layers from the hidden
// size; ascending parameter count, within [min_parameters, max_parameters].
// Includes Megatron's 76.1B shape (60 layers x hidden 10,240).
std::vector<ModelSpec> GptFamily(double min_parameters, double max_parameters, int64_t seq_len,
                                 int64_t vocab_size);

// Llama shapes with the Llama 3 aspect ratios ("The Llama 3 Herd of
// Models", Table 3, and Llama 3.2's 1B and 3B model cards: hidden 2048, 3072,
// 4096, 8192 and 16384 against 16, 28, 32, 80 and 126 layers; interpolated
// between them): hidden a multiple of 1024, head size 128, 8 key/value heads
// (grouped-query attention), SwiGLU with FFN width 1.3 x 8h/3 up to hidden
// 8192 and 1.2 x 8h/3 above, rounded up to a multiple of 1024 (Llama 3's
// ffn_dim_multiplier and multiple_of: 14,336, 28,672 and 53,248 for 8B, 70B
// and 405B), untied embeddings. Ascending parameter count.
std::vector<ModelSpec> LlamaFamily(double min_parameters, double max_parameters, int64_t seq_len,
                                   int64_t vocab_size);

// Chinchilla's parametric loss L(N, D) = E + A / N^alpha + B / D^beta with
// the fitted coefficients of Hoffmann et al. 2022 (Approach 3): E = 1.69,
// A = 406.4, B = 410.7, alpha = 0.34, beta = 0.28.
double HoffmannLoss(double parameters, double tokens);

enum class DesignRule {
  kTokensPerParameter,  // the largest model whose k x N tokens fit the budget
  kHoffmann,            // the candidate minimising L(N, tokens trainable in the budget)
};

struct DesignSpec {
  std::vector<ModelSpec> candidates;  // ascending size
  ClusterSpec cluster;                // GPU, GPUs per node, bandwidths, price
  int64_t max_gpus = 0;               // plans use at most this many
  int64_t global_batch = 0;
  double days = 0;        // the time budget, and/or
  double budget_usd = 0;  // a money budget (needs the cluster's price)
  double tokens_per_parameter = 20;
  DesignRule rule = DesignRule::kTokensPerParameter;
  SearchSpace plan_space;  // tensor-parallel values, micro-batch bound...; model,
                           // cluster, batch and GPUs are filled in per candidate
};

struct DesignedModel {
  ModelSpec model;
  double parameters = 0;
  bool fits = false;  // some plan on <= max_gpus fits in memory
  Job job;            // its fastest plan
  double iteration_time_ms = 0;
  double mfu = 0;
  // Tokens that plan trains within the budget, failures and checkpoints
  // taken out (the goodput of a run as long as the budget).
  double budget_tokens = 0;
  double optimal_tokens = 0;  // tokens_per_parameter x parameters
  // Wall days the plan needs for optimal_tokens, expected with failures,
  // checkpoints and restarts (core/predict/goodput.h), and without.
  double days_for_optimal = 0;
  double failure_free_days = 0;
  double goodput = 1;                  // failure_free_days / days_for_optimal
  double days_low = 0, days_high = 0;  // days_for_optimal through the prediction interval
  double cost_usd = 0;                 // of days_for_optimal at the cluster's price
  double loss = 0;                     // HoffmannLoss(parameters, min(budget, optimal) tokens)
  SimulationCost simulation;           // planning it (FastestPlan); zero when nothing fits
};

struct DesignResult {
  std::vector<DesignedModel> candidates;
  // The naive estimate: 6 N D = GPUs x peak FLOP/s x seconds with D = k N,
  // its N and D, and the largest candidate not above that N, planned for real.
  double naive_parameters = 0;
  double naive_tokens = 0;
  std::optional<DesignedModel> naive;
  std::optional<DesignedModel> optimal;  // nullopt: no candidate fits the budget
  SimulationCost simulation;             // the whole call: wall time, every prediction's counts
  // Caveats about the answer (BatchWarning).
  std::vector<std::string> warnings;
};

// The inverse question: the fewest GPUs on which the family's shape nearest
// to `parameters` trains `tokens` within spec.days, expected with failures
// and checkpoints.
struct InverseResult {
  // The shape on its fastest plan at the answer; when infeasible, at
  // spec.max_gpus (fits == false: no plan fits there at all).
  DesignedModel model;
  bool feasible = false;
  int64_t gpus = 0;    // the plan's GPUs
  std::string reason;  // why not, when infeasible
  std::vector<std::string> warnings;
  SimulationCost simulation;
};

struct DesignOptions {
  std::function<bool()> cancelled;
  std::function<void(int64_t, int64_t)> progress;  // (candidates done, candidates)
};

// INVALID_ARGUMENT naming the field for an empty family, no budget, a
// non-positive GPU count or batch; CANCELLED.
absl::StatusOr<DesignResult> DesignModel(const DesignSpec& spec, const ProfileSet& profiles,
                                         const DesignOptions& options = {});

// The fastest plan allowed at most g GPUs is never slower than with fewer,
// so the fewest GPUs (a multiple of a node, up to spec.max_gpus) are found by
// bisection over node counts: about log2(max_gpus / node) plan searches.
// INVALID_ARGUMENT as DesignModel, and for parameters, tokens or spec.days
// not positive; CANCELLED.
absl::StatusOr<InverseResult> DesignForModel(const DesignSpec& spec, double parameters,
                                             double tokens, const ProfileSet& profiles,
                                             const DesignOptions& options = {});

// A warning when the global batch is what limits a plan's efficiency: its
// m = batch / (d x micro-batch) micro-batches leave a pipeline bubble of
// (p - 1) / (V m + p - 1) above a quarter. Empty otherwise.
std::string BatchWarning(const Job& job);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PLAN_MODEL_DESIGN_H_
