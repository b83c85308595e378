// Plan search: enumerate parallel plans (t, c, d, p, micro-batch, schedule,
// recomputation, virtual stages, sequence parallelism, sharding) for a model on a cluster, drop
// those that do not fit in memory, predict the rest in parallel, and pick the best by an objective;
// always also the Pareto frontier of training time against cost.
#ifndef VTRAIN_CORE_PLAN_SEARCH_H_
#define VTRAIN_CORE_PLAN_SEARCH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "core/predict/predictor.h"
#include "core/profile/profile.h"
#include "core/spec/job.h"
#include "core/spec/settings.h"

namespace vtrain {

// The training options a search tries besides t, d, p, micro-batch, schedule
// and recomputation; every combination (each list non-empty; the defaults
// are the single plain value). Combinations ValidateJob refuses (V without
// a deep enough pipeline, c that does not split the sequence) are skipped,
// as is sequence parallelism with t = 1 (a no-op, the same plan).
struct TrainingOptionSpace {
  // Pipeline degrees; empty: every divisor of the layers. Others get the
  // automatic uneven layout (core/spec/pipeline_layout.h).
  std::vector<int64_t> pipeline_parallel;
  std::vector<int64_t> context_parallel = {1};
  std::vector<int64_t> virtual_stages = {1};
  std::vector<bool> sequence_parallel = {false};
  std::vector<DataParallelSharding> shardings = {DataParallelSharding::kNone};
  // MoE models: expert-parallel and expert tensor-parallel degrees to try.
  std::vector<int64_t> expert_parallel = {1};
  std::vector<int64_t> expert_tensor_parallel = {1};
};

// The parallel plans a search, a throughput curve or a model plan
// considers: every combination of these lists that Megatron's rules allow.
// One struct for the three (vtrain.v1.PlanSpace on the wire).
struct PlanSpace {
  // Tensor-parallel degrees to try; empty: powers of two up to twice the
  // GPUs per node.
  std::vector<int64_t> tensor_parallel;
  int64_t max_data_parallel = 0;  // 0: no bound
  int64_t max_micro_batch = 0;    // 0: every divisor of the per-replica batch
  std::vector<PipelineSchedule> schedules = {PipelineSchedule::k1F1B};
  std::vector<Recompute> recomputes = {Recompute::kFull};
  TrainingOptionSpace training;
  // MoE models: the dispatcher, overlap and routing every plan runs with.
  MoeRouting moe;
  // Megatron-Core's overlaps every plan runs with where it allows them
  // (ApplyPlanSwitches): gradient bucketing (--overlap-grad-reduce), the TP
  // overlap with sequence parallelism, the parameter gather under the next
  // forward with the distributed optimizer.
  bool gradient_bucketing = false;
  bool tp_comm_overlap = false;
  bool param_gather_overlap = false;
  // How plans with context parallelism exchange the sequence.
  ContextParallelComm cp_comm = ContextParallelComm::kP2P;
  // How fp8 plans scale their tensors.
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  // The modules selective plans recompute (RecomputeModule bits; 0:
  // core_attn), and the settings base every plan names.
  uint32_t recompute_modules = 0;
  SettingsBase settings = SettingsBase::kTuned;
};

// Which parts of a plan space a request gave; the others FillSpaceSettings
// fills from the space's settings base.
struct GivenSpace {
  bool dtype = false, recomputes = false, sequence_parallel = false, shardings = false,
       gradient_bucketing = false, tp_comm_overlap = false, param_gather_overlap = false,
       dispatcher = false, moe_overlap = false, attention_impl = false;
  bool pipeline_parallel = false, virtual_stages = false, context_parallel = false,
       expert_parallel = false;
};

// Fills what `given` leaves unset from SettingsFor(space.settings, model,
// gpu): the dtype; tuned tries recomputation none, selective (the recipe's
// modules) and full, with sequence parallelism, the distributed optimizer,
// the recipe's overlaps and MoE dispatcher, and the plans an expert would
// (TunedDegrees); megatron-defaults and paper try their single values.
// `model`'s attention kernel when not given.
void FillSpaceSettings(const GivenSpace& given, const GpuSpec& gpu, ModelSpec& model,
                       PlanSpace& space, DType& dtype);

// Every divisor of n, ascending.
std::vector<int64_t> Divisors(int64_t n);

// The degrees a tuned space tries where the request gives none: pipeline
// degrees that divide the layers, every depth up to 16 and the powers of two
// up to 128 (those that do not divide the layers laid out unevenly), interleaving 1, 2, 4 and 8,
// context parallelism 1, 2, 4 and 8 from 16K tokens (1, 2 from 8K), and for a MoE model every power
// of two up to 64 that divides its experts.
struct TunedDegrees {
  std::vector<int64_t> pipeline_parallel, virtual_stages, context_parallel, expert_parallel;
};
TunedDegrees TunedDegreesFor(const ModelSpec& model);

// Sets `plan`'s overlap, context-parallel and fp8 switches from `space`,
// each only where the plan allows it: the TP overlap needs sequence
// parallelism in effect, the MoE overlap what Megatron-Core asks of it
// (AllowsMoeOverlap), the parameter gather the distributed optimizer
// (so asking for them never turns a valid plan into an invalid one),
// cp_comm goes to plans with context parallelism (those whose heads an
// all-to-all cannot split are then refused by ValidateJob), the fp8 recipe
// to fp8 plans.
void ApplyPlanSwitches(const PlanSpace& space, ParallelPlan& plan);

// A plan search: the plan space over a model, a cluster and a GPU count.
struct SearchSpace : PlanSpace {
  ModelSpec model;
  ClusterSpec cluster;  // GPU, GPUs per node, bandwidths, price; num_gpus is ignored
  int64_t global_batch = 0;
  int64_t gpus = 0;      // exactly this many GPUs, or 0
  int64_t max_gpus = 0;  // at most this many (when gpus == 0)
  DType dtype = DType::kFp16;
  double train_tokens = 0;  // for training time and cost; 0: per iteration only
};

// Calls `consider` with `job` under every expert layout of the space (a
// dense model: once, unchanged), with the space's MoE routing. Expert and
// tensor parallelism together need sequence parallelism (Megatron-Core): such
// a plan turns it on, unless the space also tries it on, where the plan with
// it off is skipped.
absl::Status ForEachExpertLayout(const PlanSpace& space, const TrainingOptionSpace& options,
                                 Job& job, absl::FunctionRef<absl::Status(Job&)> consider);

enum class Objective {
  kTime,                    // fastest iteration
  kCost,                    // cheapest training run
  kCostUnderDeadline,       // cheapest that trains within the deadline
  kFewestGpusUnderDeadline  // fewest GPUs that train within the deadline
};
absl::StatusOr<Objective> ParseObjective(const std::string& name);

struct SearchOptions {
  Objective objective = Objective::kTime;
  double deadline_days = 0;
  int threads = 1;
  int64_t max_candidates = 1'000'000;  // refuse larger spaces (RESOURCE_EXHAUSTED)
  // Called from worker threads with (evaluated, to evaluate); may be empty.
  std::function<void(int64_t, int64_t)> progress;
  std::function<bool()> cancelled;
  // Resolutions shared by the search's predictions (lookup.h); nullptr: the
  // search makes its own for the run.
  LookupMemo* memo = nullptr;
  bool periodic = true;  // PredictOptions::periodic (false only to compare)
};

struct PlanResult {
  Job job;
  double iteration_time_ms = 0;
  double training_days = 0;  // failure-free
  double cost_usd = 0;
  // With failures, checkpoints and restarts (Prediction::goodput): what the
  // cost objective and deadlines rank by. Equal to the above without tokens.
  double expected_days = 0;
  double expected_cost_usd = 0;
  double goodput = 1;
  double peak_memory_bytes = 0;
  SimulationCost simulation;  // of its prediction
};

struct SearchResult {
  std::vector<PlanResult> plans;  // every plan that fits, fastest first
  int64_t considered = 0;         // valid plans enumerated
  int64_t out_of_memory = 0;      // of those, dropped by the memory model
  int best = -1;                  // index into plans; -1 when none qualifies
  std::vector<int> pareto;        // indices, fastest first: no other plan is both faster and
                                  // cheaper (expected days and cost with tokens)
  // The whole search: its wall time and every prediction's counts summed.
  SimulationCost simulation;
  // Caveats the caller should see (SearchWarnings).
  std::vector<std::string> warnings;
  // When no plan meets the objective (best == -1): why, for people (no point
  // of the space is a valid plan, and the first reason one was not; every
  // valid plan is out of memory; none trains within the deadline).
  std::string no_plan_reason;
  // Points of the space that are not valid plans (ValidateJob refused them),
  // and the reason given for the first one.
  int64_t invalid = 0;
  std::string first_invalid_reason;
};

// Why a result has no best plan ("" when it has one), for people.
std::string NoPlanReason(const SearchSpace& space, const SearchOptions& options,
                         const SearchResult& result);

// The valid plans of `space` that fit in memory (the candidates Search
// predicts), counting them in result->considered and result->out_of_memory.
// RESOURCE_EXHAUSTED above options.max_candidates; CANCELLED.
absl::StatusOr<std::vector<Job>> EnumeratePlans(const SearchSpace& space,
                                                const SearchOptions& options, SearchResult* result);

// The fastest plan of `space` (objective time), found exactly but cheaply:
// the candidates are simulated in order of a lower bound of their iteration
// time (the busiest stage's forward and backward passes over every
// micro-batch) until the next bound cannot beat the fastest so far. nullopt
// when no plan fits. CANCELLED; RESOURCE_EXHAUSTED as Search. `counts`, when
// given, receives the enumeration's counts (considered, out_of_memory,
// invalid and the first invalid reason), which NoPlanReason reads.
struct FastestPlanResult {
  Job job;
  Prediction prediction;
  SimulationCost simulation;  // the whole call: wall time, every prediction's counts
};
absl::StatusOr<std::optional<FastestPlanResult>> FastestPlan(const SearchSpace& space,
                                                             const ProfileSet& profiles,
                                                             const SearchOptions& options,
                                                             SearchResult* counts = nullptr);

// Caveats about `result`: objective cost with no deadline and no exact GPU
// count (space.gpus == 0) names the best plan's GPUs and training days, since
// cost alone favours the fewest GPUs however long they take.
std::vector<std::string> SearchWarnings(const SearchSpace& space, const SearchOptions& options,
                                        const SearchResult& result);

// INVALID_ARGUMENT for a space no plan can satisfy the constraints of (the
// message says which), RESOURCE_EXHAUSTED above options.max_candidates,
// CANCELLED.
absl::StatusOr<SearchResult> Search(const SearchSpace& space, const ProfileSet& profiles,
                                    const SearchOptions& options);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PLAN_SEARCH_H_
