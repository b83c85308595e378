#include "core/plan/search.h"

#include "core/predict/memory.h"
#include "core/profile/default_profiles.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

SearchSpace Space() {
  SearchSpace s;
  s.model = *ModelPreset("gpt3-2.7b");
  s.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  s.cluster.price_usd_per_gpu_hour = 4.096;
  s.global_batch = 128;
  s.max_gpus = 32;
  s.train_tokens = 10e9;
  return s;
}

TEST(SearchTest, EveryPlanIsValidFitsAndRespectsTheBounds) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  SearchOptions o;
  o.threads = 2;
  absl::StatusOr<SearchResult> r = Search(Space(), profiles, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->plans.empty());
  EXPECT_EQ(r->considered, static_cast<int64_t>(r->plans.size()) + r->out_of_memory);
  for (size_t i = 0; i < r->plans.size(); ++i) {
    const PlanResult& p = r->plans[i];
    EXPECT_TRUE(ValidateJob(p.job).ok());
    EXPECT_LE(p.job.cluster.num_gpus, 32);
    EXPECT_TRUE(EstimateMemory(p.job).fits);
    if (i > 0) {
      EXPECT_GE(p.iteration_time_ms, r->plans[i - 1].iteration_time_ms);
    }
  }
  // Objective time: the best is the fastest.
  ASSERT_GE(r->best, 0);
  EXPECT_EQ(r->plans[r->best].iteration_time_ms, r->plans[0].iteration_time_ms);
}

TEST(SearchTest, TrainingOptionListsMultiplyTheSpace) {
  SearchSpace space = Space();
  space.max_gpus = 16;
  SearchResult plain;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const std::vector<Job> base, EnumeratePlans(space, {}, &plain));
  EXPECT_FALSE(base.empty());
  space.training.shardings = {DataParallelSharding::kNone, DataParallelSharding::kOptimizer};
  space.training.sequence_parallel = {false, true};
  space.training.virtual_stages = {1, 2};
  space.training.context_parallel = {1, 2};
  space.recomputes = {Recompute::kFull, Recompute::kSelective};
  SearchResult more;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const std::vector<Job> all, EnumeratePlans(space, {}, &more));
  EXPECT_GT(more.considered, 4 * plain.considered);
  bool saw[5] = {false, false, false, false, false};
  for (const Job& job : all) {
    EXPECT_TRUE(ValidateJob(job).ok());
    EXPECT_LE(job.cluster.num_gpus, 16);
    // Sequence parallelism with t = 1 is the same plan as without: skipped.
    EXPECT_FALSE(job.plan.sequence_parallel && job.plan.tensor_parallel == 1);
    saw[0] |= job.plan.context_parallel == 2;
    saw[1] |= job.plan.virtual_stages == 2;
    saw[2] |= job.plan.sequence_parallel;
    saw[3] |= job.plan.data_parallel_sharding == DataParallelSharding::kOptimizer;
    saw[4] |= job.plan.recompute == Recompute::kSelective;
  }
  for (bool s : saw) EXPECT_TRUE(s);
  // The pruned fastest-plan search agrees with the full one on the new space.
  space.gpus = 8;
  space.training.context_parallel = {1};
  space.training.virtual_stages = {1, 2};
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  SearchOptions o;
  o.threads = 2;
  absl::StatusOr<SearchResult> full = Search(space, profiles, o);
  ASSERT_TRUE(full.ok()) << full.status();
  absl::StatusOr<std::optional<FastestPlanResult>> fastest = FastestPlan(space, profiles, o);
  ASSERT_TRUE(fastest.ok() && fastest->has_value());
  EXPECT_DOUBLE_EQ((*fastest)->prediction.iteration_time_ms(), full->plans[0].iteration_time_ms);
}

// The space's overlaps reach every plan that allows them and no other: the
// TP overlap only plans with sequence parallelism in effect, the parameter
// gather only plans with the distributed optimizer.
TEST(SearchTest, OverlapsReachThePlansThatAllowThem) {
  SearchSpace space = Space();
  space.max_gpus = 16;
  space.training.shardings = {DataParallelSharding::kNone, DataParallelSharding::kOptimizer};
  space.training.sequence_parallel = {false, true};
  space.gradient_bucketing = true;
  space.tp_comm_overlap = true;
  space.param_gather_overlap = true;
  SearchResult counts;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const std::vector<Job> all, EnumeratePlans(space, {}, &counts));
  int64_t tp = 0, gather = 0;
  for (const Job& job : all) {
    EXPECT_TRUE(ValidateJob(job).ok());
    EXPECT_TRUE(job.plan.gradient_bucketing);
    EXPECT_EQ(job.plan.tp_comm_overlap, job.plan.sequence_parallel_active());
    EXPECT_EQ(job.plan.param_gather_overlap,
              job.plan.data_parallel_sharding == DataParallelSharding::kOptimizer);
    tp += job.plan.tp_comm_overlap ? 1 : 0;
    gather += job.plan.param_gather_overlap ? 1 : 0;
  }
  EXPECT_GT(tp, 0);
  EXPECT_GT(gather, 0);
  // Hiding communication never makes the fastest plan slower.
  space.gpus = 16;
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const SearchResult overlapped, Search(space, profiles, {}));
  space.gradient_bucketing = space.tp_comm_overlap = space.param_gather_overlap = false;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const SearchResult plain, Search(space, profiles, {}));
  ASSERT_FALSE(overlapped.plans.empty());
  ASSERT_FALSE(plain.plans.empty());
  EXPECT_LT(overlapped.plans[0].iteration_time_ms, plain.plans[0].iteration_time_ms);
}

TEST(SearchTest, ParetoFrontierHoldsOnlyUndominatedPlans) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  SearchOptions o;
  o.threads = 2;
  o.objective = Objective::kCost;
  absl::StatusOr<SearchResult> r = Search(Space(), profiles, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->pareto.empty());
  for (int i : r->pareto) {
    for (const PlanResult& q : r->plans) {
      const PlanResult& p = r->plans[i];
      const bool dominates = q.iteration_time_ms < p.iteration_time_ms && q.cost_usd < p.cost_usd;
      EXPECT_FALSE(dominates);
    }
  }
  // Objective cost: nothing is cheaper than the best, and the cheapest plan
  // is on the frontier.
  for (const PlanResult& q : r->plans) EXPECT_GE(q.cost_usd, r->plans[r->best].cost_usd);
  EXPECT_EQ(r->pareto.back(), r->best);
}

TEST(SearchTest, DeadlineObjectivesRespectTheDeadline) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  SearchOptions o;
  o.threads = 2;
  absl::StatusOr<SearchResult> all = Search(Space(), profiles, o);
  ASSERT_TRUE(all.ok());
  // A deadline between the fastest and the slowest plan's training time.
  const double deadline = (all->plans.front().training_days + all->plans.back().training_days) / 2;
  o.deadline_days = deadline;
  for (Objective objective : {Objective::kCostUnderDeadline, Objective::kFewestGpusUnderDeadline}) {
    o.objective = objective;
    absl::StatusOr<SearchResult> r = Search(Space(), profiles, o);
    ASSERT_TRUE(r.ok());
    ASSERT_GE(r->best, 0);
    const PlanResult& best = r->plans[r->best];
    EXPECT_LE(best.training_days, deadline);
    for (const PlanResult& q : r->plans) {
      if (q.training_days > deadline) continue;
      if (objective == Objective::kCostUnderDeadline) {
        EXPECT_GE(q.cost_usd, best.cost_usd);
      }
      if (objective == Objective::kFewestGpusUnderDeadline) {
        EXPECT_GE(q.job.cluster.num_gpus, best.job.cluster.num_gpus);
      }
    }
  }
  // An impossible deadline: no best plan.
  o.deadline_days = 1e-9;
  absl::StatusOr<SearchResult> none = Search(Space(), profiles, o);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->best, -1);
}

TEST(SearchTest, ExactGpuCountAndInvalidSpaces) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  SearchSpace s = Space();
  s.max_gpus = 0;
  s.gpus = 16;
  absl::StatusOr<SearchResult> r = Search(s, profiles, SearchOptions{});
  ASSERT_TRUE(r.ok());
  for (const PlanResult& p : r->plans) EXPECT_EQ(p.job.cluster.num_gpus, 16);
  s.gpus = 0;
  EXPECT_EQ(Search(s, profiles, SearchOptions{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  SearchOptions o;
  o.objective = Objective::kCostUnderDeadline;  // without a deadline
  EXPECT_EQ(Search(Space(), profiles, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SearchOptions{};
  o.max_candidates = 3;
  EXPECT_EQ(Search(Space(), profiles, o).status().code(), absl::StatusCode::kResourceExhausted);
  o = SearchOptions{};
  o.cancelled = [] { return true; };
  EXPECT_EQ(Search(Space(), profiles, o).status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace vtrain

namespace vtrain {
namespace {

// Regression (issue 12): enumeration alone (every divisor pair) ran on after
// the caller's deadline; it polls cancellation too.
TEST(SearchCancellationTest, EnumerationStopsWhenCancelled) {
  SearchSpace space;
  space.model = *ModelPreset("gpt3-175b");
  space.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  // 4096 * 81 * 25 * 7 has 390 divisors: a long enumeration, and on at most
  // 8 GPUs every plan is out of memory, so nothing but the enumeration would
  // ever see the cancellation.
  space.global_batch = int64_t{4096} * 81 * 25 * 7;
  space.max_gpus = 8;
  SearchOptions options;
  int64_t polls = 0;
  options.cancelled = [&] { return ++polls > 0; };
  absl::StatusOr<SearchResult> r = Search(space, DefaultProfileSet(space.cluster.gpu), options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_GT(polls, 0);
}

// A search with no best plan says why, in the terms of its space.
TEST(SearchTest, NoPlanSaysWhy) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  // Every valid plan of 175B on one node is out of memory.
  SearchSpace oom = Space();
  oom.model = *ModelPreset("gpt3-175b");
  oom.global_batch = 64;
  oom.max_gpus = 0;
  oom.gpus = 8;
  absl::StatusOr<SearchResult> r = Search(oom, profiles, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->best, -1);
  EXPECT_GT(r->considered, 0);
  EXPECT_EQ(r->out_of_memory, r->considered);
  EXPECT_NE(r->no_plan_reason.find("out of memory"), std::string::npos) << r->no_plan_reason;
  // No t of the list divides the heads: no valid point, and the first reason.
  SearchSpace heads = Space();
  heads.tensor_parallel = {3};
  heads.gpus = 3;
  heads.max_gpus = 0;
  heads.global_batch = 3;
  r = Search(heads, profiles, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->considered, 0);
  EXPECT_GT(r->invalid, 0);
  EXPECT_NE(r->no_plan_reason.find("tensor_parallel"), std::string::npos) << r->no_plan_reason;
  // A GPU count no combination reaches.
  SearchSpace none = Space();
  none.gpus = 7;
  none.max_gpus = 0;
  none.tensor_parallel = {2};
  r = Search(none, profiles, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->no_plan_reason.find("exactly 7 GPUs"), std::string::npos) << r->no_plan_reason;
  // A deadline no plan meets.
  SearchOptions late;
  late.objective = Objective::kCostUnderDeadline;
  late.deadline_days = 1e-6;
  r = Search(Space(), profiles, late);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->best, -1);
  EXPECT_NE(r->no_plan_reason.find("within the deadline"), std::string::npos) << r->no_plan_reason;
  // With a best plan, no reason.
  r = Search(Space(), profiles, {});
  ASSERT_TRUE(r.ok());
  EXPECT_GE(r->best, 0);
  EXPECT_TRUE(r->no_plan_reason.empty());
}

}  // namespace
}  // namespace vtrain
