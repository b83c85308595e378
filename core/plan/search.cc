#include "core/plan/search.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/graph/pass_templates.h"
#include "core/predict/memory.h"
#include "core/predict/predictor.h"
#include "core/util/parallel.h"
#include "core/util/status_macros.h"

namespace vtrain {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i != 0) continue;
    out.push_back(i);
    if (i != n / i) out.push_back(n / i);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// Enumerates the valid jobs of `space` into `candidates`, counting them in
// result->considered; the memory model drops those that cannot fit
// (result->out_of_memory) before any simulation. RESOURCE_EXHAUSTED above
// options.max_candidates.
absl::Status Enumerate(const SearchSpace& space, const SearchOptions& options, SearchResult* result,
                       std::vector<Job>* candidates) {
  std::vector<int64_t> tps = space.tensor_parallel;
  if (tps.empty()) {
    for (int64_t t = 1; t <= 2 * NvlinkDomainGpus(space.cluster); t *= 2) tps.push_back(t);
  }
  const int64_t limit = space.gpus > 0 ? space.gpus : space.max_gpus;
  // Enumeration alone can be long (every divisor pair): it polls the caller's
  // cancellation and deadline too, not only the predictions.
  int64_t steps = 0;
  auto cancelled = [&] { return ++steps % 4096 == 0 && options.cancelled && options.cancelled(); };
  const std::vector<int64_t> batch_divisors = Divisors(space.global_batch);
  const TrainingOptionSpace& options_space = space.training;
  const std::vector<int64_t> pps = options_space.pipeline_parallel.empty()
                                       ? Divisors(space.model.num_layers)
                                       : options_space.pipeline_parallel;
  // Adds the job of one point of the space, if valid and fitting.
  auto consider = [&](Job job) -> absl::Status {
    if (absl::Status valid = ValidateJob(job); !valid.ok()) {
      if (result->invalid++ == 0) result->first_invalid_reason = std::string(valid.message());
      return absl::OkStatus();
    }
    ++result->considered;
    if (result->considered > options.max_candidates) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the search space has more than max_candidates=", options.max_candidates,
                       " plans; narrow it (tensor-parallel degrees, max micro-batch, "
                       "max data-parallel, the training-option lists)"));
    }
    if (!EstimateMemory(job).fits) {
      ++result->out_of_memory;
      return absl::OkStatus();
    }
    candidates->push_back(std::move(job));
    return absl::OkStatus();
  };
  const bool sp_off_tried =
      std::find(options_space.sequence_parallel.begin(), options_space.sequence_parallel.end(),
                false) != options_space.sequence_parallel.end();
  for (int64_t t : tps) {
    for (int64_t c : options_space.context_parallel) {
      for (int64_t p : pps) {
        for (int64_t d : batch_divisors) {
          if (cancelled()) return absl::CancelledError("search cancelled by the caller");
          if (t * c * p > limit || t * c * p * d > limit) continue;
          if (space.gpus > 0 && t * c * p * d != space.gpus) continue;
          if (space.max_data_parallel > 0 && d > space.max_data_parallel) continue;
          for (int64_t mb : Divisors(space.global_batch / d)) {
            if (cancelled()) return absl::CancelledError("search cancelled by the caller");
            if (space.max_micro_batch > 0 && mb > space.max_micro_batch) continue;
            Job job;
            job.model = space.model;
            job.cluster = space.cluster;
            job.cluster.num_gpus = t * c * p * d;
            job.plan.tensor_parallel = t;
            job.plan.context_parallel = c;
            job.plan.data_parallel = d;
            job.plan.pipeline_parallel = p;
            job.plan.micro_batch = mb;
            job.plan.global_batch = space.global_batch;
            job.plan.dtype = space.dtype;
            for (PipelineSchedule schedule : space.schedules) {
              // Interleaving is 1F1B's; DualPipeV always runs two chunks.
              std::vector<int64_t> chunks = {1};
              if (schedule == PipelineSchedule::k1F1B) chunks = options_space.virtual_stages;
              if (schedule == PipelineSchedule::kDualPipeV) chunks = {2};
              for (Recompute recompute : space.recomputes) {
                for (int64_t v : chunks) {
                  for (bool sp : options_space.sequence_parallel) {
                    // A no-op at t = 1: the same plan as off, when off is tried.
                    if (sp && t == 1 && sp_off_tried) continue;
                    for (DataParallelSharding sharding : options_space.shardings) {
                      job.plan.schedule = schedule;
                      job.plan.recompute = recompute;
                      job.plan.virtual_stages = v;
                      job.plan.sequence_parallel = sp;
                      job.plan.data_parallel_sharding = sharding;
                      VTRAIN_RETURN_IF_ERROR(ForEachExpertLayout(
                          space, options_space, job, [&](Job& j) { return consider(j); }));
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

// Predicts every candidate on options.threads threads; each worker takes the
// next index. The plans that predicted, in candidate order; CANCELLED.
absl::StatusOr<std::vector<PlanResult>> PredictAll(const std::vector<Job>& candidates,
                                                   const SearchSpace& space,
                                                   const ProfileSet& profiles,
                                                   const SearchOptions& options) {
  std::vector<PlanResult> evaluated(candidates.size());
  std::vector<char> ok(candidates.size(), 0);
  std::atomic<int64_t> done{0};
  std::atomic<bool> stop{false};
  LookupMemo own_memo(profiles);
  LookupMemo* memo = options.memo != nullptr ? options.memo : &own_memo;
  PredictOptions po;
  po.memo = memo;
  po.train_tokens = space.train_tokens;
  po.periodic = options.periodic;
  po.cancelled = [&] { return stop.load() || (options.cancelled && options.cancelled()); };
  ParallelFor(static_cast<int64_t>(candidates.size()), options.threads, [&](int64_t i) {
    if (po.cancelled()) {
      stop = true;
      return false;
    }
    absl::StatusOr<Prediction> p = Predict(candidates[i], profiles, po);
    if (p.ok()) {
      PlanResult& r = evaluated[i];
      r.job = candidates[i];
      r.iteration_time_ms = p->iteration_time_ms();
      r.training_days = p->training_time_s / 86400;
      r.cost_usd = p->cost_usd;
      const bool trained = p->train_tokens > 0;
      r.expected_days = trained ? p->goodput.expected_time_s / 86400 : r.training_days;
      r.expected_cost_usd = trained ? p->goodput.expected_cost_usd : r.cost_usd;
      r.goodput = trained ? p->goodput.fraction : 1;
      r.peak_memory_bytes = p->memory.peak_bytes;
      r.simulation = p->simulation;
      ok[i] = 1;
    } else if (p.status().code() == absl::StatusCode::kCancelled) {
      stop = true;
      return false;
    }
    const int64_t n = ++done;
    if (options.progress) options.progress(n, static_cast<int64_t>(candidates.size()));
    return true;
  });
  if (stop) return absl::CancelledError("search cancelled by the caller");

  std::vector<PlanResult> plans;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (ok[i]) plans.push_back(std::move(evaluated[i]));
  }
  return plans;
}

// Sorts result->plans fastest first and picks the Pareto frontier and the
// best plan by options.objective.
void Rank(const SearchSpace& space, const SearchOptions& options, SearchResult* result) {
  std::sort(result->plans.begin(), result->plans.end(),
            [](const PlanResult& a, const PlanResult& b) {
              if (a.iteration_time_ms != b.iteration_time_ms) {
                return a.iteration_time_ms < b.iteration_time_ms;
              }
              return a.job.cluster.num_gpus < b.job.cluster.num_gpus;
            });
  // Pareto frontier of training time against cost: walking from the
  // fastest, keep each plan cheaper than every faster one. With tokens, time
  // and cost are the expected ones (failures reorder plans); without, the
  // iteration time and GPU-time.
  const bool trained = space.train_tokens > 0;
  std::vector<int> by_time(result->plans.size());
  for (size_t i = 0; i < by_time.size(); ++i) by_time[i] = static_cast<int>(i);
  if (trained) {
    std::stable_sort(by_time.begin(), by_time.end(), [&](int a, int b) {
      return result->plans[a].expected_days < result->plans[b].expected_days;
    });
  }
  double cheapest = INFINITY;
  for (int i : by_time) {
    const PlanResult& p = result->plans[i];
    const double cost = trained ? p.expected_cost_usd
                                : p.iteration_time_ms * static_cast<double>(p.job.cluster.num_gpus);
    if (cost < cheapest) {
      cheapest = cost;
      result->pareto.push_back(i);
    }
  }
  for (size_t i = 0; i < result->plans.size(); ++i) {
    const PlanResult& r = result->plans[i];
    const bool in_time = r.expected_days <= options.deadline_days;
    auto better = [&](const PlanResult& b) {
      switch (options.objective) {
        case Objective::kTime:
          return r.iteration_time_ms < b.iteration_time_ms;
        case Objective::kCost:
        case Objective::kCostUnderDeadline:
          return r.expected_cost_usd < b.expected_cost_usd;
        case Objective::kFewestGpusUnderDeadline:
          return r.job.cluster.num_gpus < b.job.cluster.num_gpus ||
                 (r.job.cluster.num_gpus == b.job.cluster.num_gpus &&
                  r.iteration_time_ms < b.iteration_time_ms);
      }
      return false;
    };
    if ((options.objective == Objective::kCostUnderDeadline ||
         options.objective == Objective::kFewestGpusUnderDeadline) &&
        !in_time) {
      continue;
    }
    if (result->best < 0 || better(result->plans[result->best])) {
      result->best = static_cast<int>(i);
    }
  }
}

}  // namespace

std::string NoPlanReason(const SearchSpace& space, const SearchOptions& options,
                         const SearchResult& result) {
  if (result.best >= 0) return "";
  const int64_t limit = space.gpus > 0 ? space.gpus : space.max_gpus;
  if (result.considered == 0 && result.invalid == 0) {
    return absl::StrCat(
        "no combination of t, c, p, d and micro-batch in the space uses ",
        space.gpus > 0 ? "exactly " : "at most ", limit,
        " GPUs with d dividing global_batch=", space.global_batch, " and p ",
        space.training.pipeline_parallel.empty()
            ? absl::StrCat("dividing the model's ", space.model.num_layers, " layers")
            : std::string("among the pipeline degrees given"),
        "; change the GPU count, the batch or the tensor-parallel or pipeline "
        "degrees");
  }
  if (result.considered == 0) {
    return absl::StrCat("none of the ", result.invalid,
                        " points of the space is a valid plan; the first was refused because ",
                        result.first_invalid_reason);
  }
  if (result.out_of_memory == result.considered) {
    return absl::StrCat("every one of the ", result.considered,
                        " valid plans is out of memory; allow more GPUs, tensor or pipeline "
                        "parallelism, recomputation or sharding");
  }
  if (result.plans.empty()) {
    return absl::StrCat("none of the ", result.considered - result.out_of_memory,
                        " plans that fit in memory could be predicted");
  }
  if (options.objective == Objective::kCostUnderDeadline ||
      options.objective == Objective::kFewestGpusUnderDeadline) {
    double soonest = INFINITY;
    for (const PlanResult& p : result.plans) soonest = std::min(soonest, p.expected_days);
    return absl::StrFormat(
        "none of the %d plans that fit trains within the deadline of %g days (the soonest "
        "takes %.1f days with failures and checkpoints); allow more GPUs or a later deadline",
        result.plans.size(), options.deadline_days, soonest);
  }
  return "no plan meets the objective";
}

std::vector<std::string> SearchWarnings(const SearchSpace& space, const SearchOptions& options,
                                        const SearchResult& result) {
  std::vector<std::string> warnings;
  if (options.objective == Objective::kCost && space.gpus == 0 && result.best >= 0) {
    const PlanResult& best = result.plans[static_cast<size_t>(result.best)];
    warnings.push_back(absl::StrFormat(
        "objective 'cost' with no deadline and no fixed GPU count favours the fewest GPUs "
        "whatever the run takes: the cheapest plan uses %d GPUs and trains for %.0f days; "
        "give --deadline-days with --objective deadline-cost, or --gpus N",
        JobGpus(best.job), best.expected_days));
  }
  return warnings;
}

void ApplyPlanSwitches(const PlanSpace& space, ParallelPlan& plan) {
  plan.settings = space.settings;
  plan.recompute_modules = plan.recompute == Recompute::kSelective ? space.recompute_modules : 0;
  if (plan.expert_parallel > 1 || space.moe.overlap) {
    plan.moe.overlap = space.moe.overlap && AllowsMoeOverlap(plan);
  }
  plan.gradient_bucketing = space.gradient_bucketing;
  plan.tp_comm_overlap = space.tp_comm_overlap && plan.sequence_parallel_active();
  plan.param_gather_overlap =
      space.param_gather_overlap && plan.data_parallel_sharding == DataParallelSharding::kOptimizer;
  plan.cp_comm = plan.context_parallel > 1 ? space.cp_comm : ContextParallelComm::kP2P;
  plan.fp8_recipe = plan.dtype == DType::kFp8 ? space.fp8_recipe : Fp8Recipe::kDelayed;
}

absl::Status ForEachExpertLayout(const PlanSpace& space, const TrainingOptionSpace& options,
                                 Job& job, absl::FunctionRef<absl::Status(Job&)> consider) {
  if (!job.model.is_moe()) {
    ApplyPlanSwitches(space, job.plan);
    return consider(job);
  }
  job.plan.moe = space.moe;
  const bool sp = job.plan.sequence_parallel;
  const bool sp_tried =
      std::find(options.sequence_parallel.begin(), options.sequence_parallel.end(), true) !=
      options.sequence_parallel.end();
  for (int64_t ep : options.expert_parallel) {
    for (int64_t etp : options.expert_tensor_parallel) {
      const bool needs_sp = ep > 1 && job.plan.tensor_parallel > 1;
      if (needs_sp && !sp && sp_tried) continue;
      job.plan.expert_parallel = ep;
      job.plan.expert_tensor_parallel = etp;
      job.plan.sequence_parallel = sp || needs_sp;
      ApplyPlanSwitches(space, job.plan);
      VTRAIN_RETURN_IF_ERROR(consider(job));
    }
  }
  job.plan.sequence_parallel = sp;
  return absl::OkStatus();
}

absl::StatusOr<Objective> ParseObjective(const std::string& name) {
  if (name == "time") return Objective::kTime;
  if (name == "cost") return Objective::kCost;
  if (name == "deadline-cost") return Objective::kCostUnderDeadline;
  if (name == "deadline-gpus") return Objective::kFewestGpusUnderDeadline;
  return absl::InvalidArgumentError(absl::StrCat(
      "objective '", name, "' is unknown; use time, cost, deadline-cost or deadline-gpus"));
}

absl::StatusOr<std::vector<Job>> EnumeratePlans(const SearchSpace& space,
                                                const SearchOptions& options,
                                                SearchResult* result) {
  std::vector<Job> candidates;
  VTRAIN_RETURN_IF_ERROR(Enumerate(space, options, result, &candidates));
  return candidates;
}

namespace {

// A lower bound of `job`'s iteration time, cheap next to simulating it: each
// stage's compute stream runs every micro-batch's forward and backward pass
// (each task holds the stream for its duration and gap), so the busiest
// stage's sum bounds the makespan from below.
// `lookup` (of the job's cluster) is shared by the candidates of one count:
// their operators repeat, and it memoises them.
double LowerBoundMs(const Job& job, ProfileLookup& lookup) {
  auto label = [](const std::string&) { return 0; };
  const int64_t p = job.plan.pipeline_parallel, held = job.plan.chunks_per_stage();
  // With interleaving a stage runs V chunks (virtual stages chunk * p + s,
  // or as the schedule places them): the first and last stages hold the
  // model's ends, the others none. DualPipe's two chunks run half the
  // micro-batches each.
  const double share = job.plan.schedule == PipelineSchedule::kDualPipe ? 0.5 : 1.0;
  // Chunks with equal signatures have equal templates: priced once.
  absl::flat_hash_map<std::string, double> priced;
  const std::vector<internal::StageEnds> chunks = internal::JobChunks(job);
  auto pass_ns = [&](int64_t vs) {
    const internal::StageEnds& e = chunks[vs];
    auto [it, fresh] = priced.try_emplace(internal::ChunkSignature(job, e), 0.0);
    if (fresh) {
      const internal::StageTemplates t =
          internal::MakeStageTemplates(job, lookup, Granularity::kOperator, e, label);
      it->second = t.forward.TaskNs() + t.backward.TaskNs();
    }
    return it->second;
  };
  double busiest = 0;
  for (int64_t s = 0; s < p; ++s) {
    double stage = 0;
    for (int64_t c = 0; c < held; ++c) stage += share * pass_ns(job.plan.chunk_position(s, c));
    busiest = std::max(busiest, stage);
  }
  return busiest * static_cast<double>(job.plan.num_micro_batches()) * 1e-6;
}

}  // namespace

absl::StatusOr<std::optional<FastestPlanResult>> FastestPlan(const SearchSpace& space,
                                                             const ProfileSet& profiles,
                                                             const SearchOptions& options,
                                                             SearchResult* counts) {
  const int64_t started_ns = SteadyNowNs();
  SimulationCost cost;
  SearchResult counted;
  VTRAIN_ASSIGN_OR_RETURN(std::vector<Job> candidates,
                          EnumeratePlans(space, options, counts != nullptr ? counts : &counted));
  LookupMemo own_memo(profiles);
  LookupMemo* memo = options.memo != nullptr ? options.memo : &own_memo;
  ProfileLookup lookup(profiles, space.cluster.gpu,
                       LinkBandwidths{space.cluster.intra_node_bandwidth_bytes_per_s,
                                      DomainNetworkBandwidth(space.cluster)},
                       memo);
  std::vector<std::pair<double, size_t>> order;
  for (size_t i = 0; i < candidates.size(); ++i) {
    order.emplace_back(LowerBoundMs(candidates[i], lookup), i);
  }
  std::stable_sort(order.begin(), order.end());
  std::optional<FastestPlanResult> best;
  PredictOptions po;
  po.cancelled = options.cancelled;
  po.memo = memo;
  for (const auto& [bound_ms, i] : order) {
    if (best && bound_ms >= best->prediction.iteration_time_ms()) break;
    absl::StatusOr<Prediction> p = Predict(candidates[i], profiles, po);
    if (!p.ok()) {
      if (p.status().code() == absl::StatusCode::kCancelled) return p.status();
      continue;  // as Search: a plan that does not predict is not a candidate
    }
    cost.Add(p->simulation);
    if (!best || p->iteration_time_ms() < best->prediction.iteration_time_ms()) {
      best = FastestPlanResult{candidates[i], *std::move(p), {}};
    }
  }
  if (best) {
    best->simulation = cost;
    best->simulation.wall_ns = SteadyNowNs() - started_ns;
  }
  return best;
}

absl::StatusOr<SearchResult> Search(const SearchSpace& space, const ProfileSet& profiles,
                                    const SearchOptions& options) {
  if (space.gpus <= 0 && space.max_gpus <= 0) {
    return absl::InvalidArgumentError("give the GPU count (gpus) or a maximum (max_gpus)");
  }
  if (space.global_batch <= 0) return absl::InvalidArgumentError("global_batch must be positive");
  if ((options.objective == Objective::kCostUnderDeadline ||
       options.objective == Objective::kFewestGpusUnderDeadline) &&
      (options.deadline_days <= 0 || space.train_tokens <= 0)) {
    return absl::InvalidArgumentError("deadline objectives need deadline_days and train_tokens");
  }
  if (options.objective == Objective::kCost && space.train_tokens <= 0) {
    return absl::InvalidArgumentError("the cost objective needs train_tokens");
  }
  const int64_t started_ns = SteadyNowNs();
  SearchResult result;
  std::vector<Job> candidates;
  VTRAIN_RETURN_IF_ERROR(Enumerate(space, options, &result, &candidates));
  VTRAIN_ASSIGN_OR_RETURN(result.plans, PredictAll(candidates, space, profiles, options));
  Rank(space, options, &result);
  result.warnings = SearchWarnings(space, options, result);
  if (result.best < 0) result.no_plan_reason = NoPlanReason(space, options, result);
  for (const PlanResult& plan : result.plans) result.simulation.Add(plan.simulation);
  result.simulation.wall_ns = SteadyNowNs() - started_ns;
  return result;
}

}  // namespace vtrain
