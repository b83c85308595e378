// The schedules that split the backward pass (zb-h1, dualpipe, dualpipev):
// their pass lists, their bubbles on unit-cost passes against the closed
// forms of DeepSeek's DualPipe README, the walker against those lists, their
// memory and their validation.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/streaming.h"
#include "core/graph/builder.h"
#include "core/graph/pass_templates.h"
#include "core/graph/schedule.h"
#include "core/predict/memory.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "core/spec/gpu.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/unit_profile.h"

namespace vtrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

constexpr PipelineSchedule kSplit[] = {PipelineSchedule::kZbH1, PipelineSchedule::kDualPipe,
                                       PipelineSchedule::kDualPipeV};

ParallelPlan Plan(PipelineSchedule schedule, int64_t p, int64_t m) {
  ParallelPlan plan;
  plan.schedule = schedule;
  plan.pipeline_parallel = p;
  plan.global_batch = m;
  plan.virtual_stages = schedule == PipelineSchedule::kDualPipeV ? 2 : 1;
  return plan;
}

// The place in the model of every micro-batch's chunk on `stage`, as the
// walker puts it, and the stage that runs place q for micro-batch mb.
int64_t StageOf(const ParallelPlan& plan, int64_t q, int64_t mb) {
  const int64_t p = plan.pipeline_parallel, m = plan.num_micro_batches();
  if (plan.schedule == PipelineSchedule::kDualPipeV) return q < p ? q : 2 * p - 1 - q;
  if (plan.schedule == PipelineSchedule::kDualPipe) return 2 * mb < m ? q : p - 1 - q;
  return q;
}

// A dependency simulation of the pass lists alone: each stage runs its
// passes in order, a forward after the previous place's forward of its
// micro-batch, a backward after the next place's backward (the last
// place's after its own forward), a paired forward and its backward once
// both inputs are there; free transfers. Returns the makespan.
double ListMakespan(const ParallelPlan& plan, double f, double b, double w) {
  const int64_t p = plan.pipeline_parallel, places = p * plan.virtual_stages;
  std::vector<std::vector<ScheduledPass>> lists(p);
  for (int64_t s = 0; s < p; ++s) lists[s] = ScheduledPasses(plan, s);
  std::map<std::pair<int64_t, int64_t>, double> forward_done, backward_done;
  std::vector<double> clock(p, 0);
  std::vector<size_t> next(p, 0);
  auto ready = [&](int64_t s, const ScheduledPass& x, double* at) {
    const int64_t q = plan.chunk_position(s, static_cast<int>(x.chunk));
    *at = 0;
    std::map<std::pair<int64_t, int64_t>, double>* done = nullptr;
    std::pair<int64_t, int64_t> key;
    if (x.kind == PassKind::kForward && q > 0) {
      done = &forward_done, key = {q - 1, x.micro_batch};
    } else if ((x.kind == PassKind::kBackward || x.kind == PassKind::kInputGrad) &&
               q + 1 < places) {
      done = &backward_done, key = {q + 1, x.micro_batch};
    }
    if (done == nullptr) return true;
    auto it = done->find(key);
    if (it == done->end()) return false;
    *at = it->second;
    return true;
  };
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int64_t s = 0; s < p; ++s) {
      while (next[s] < lists[s].size()) {
        const ScheduledPass& x = lists[s][next[s]];
        double at = 0, other = 0;
        if (!ready(s, x, &at)) break;
        if (x.paired && x.kind == PassKind::kForward && !ready(s, lists[s][next[s] + 1], &other)) {
          break;
        }
        const double start = std::max({clock[s], at, other});
        const double cost = x.kind == PassKind::kForward     ? f
                            : x.kind == PassKind::kBackward  ? b
                            : x.kind == PassKind::kInputGrad ? b - w
                                                             : w;
        clock[s] = start + cost;
        const int64_t q = plan.chunk_position(s, x.chunk);
        if (x.kind == PassKind::kForward) forward_done[{q, x.micro_batch}] = clock[s];
        if (x.kind == PassKind::kBackward || x.kind == PassKind::kInputGrad) {
          backward_done[{q, x.micro_batch}] = clock[s];
        }
        ++next[s];
        progressed = true;
      }
    }
  }
  for (int64_t s = 0; s < p; ++s) {
    EXPECT_EQ(next[s], lists[s].size()) << "stage " << s << " deadlocked";
  }
  return *std::max_element(clock.begin(), clock.end());
}

TEST(SplitScheduleTest, EveryChunkOfEveryMicroBatchRunsOnceInOrder) {
  for (PipelineSchedule schedule : kSplit) {
    for (int64_t p : {2, 4, 6, 8}) {
      for (int64_t m : {2 * p, 2 * p + 2, 5 * p}) {
        const ParallelPlan plan = Plan(schedule, p, m);
        SCOPED_TRACE(absl::StrCat(ScheduleName(schedule), " p=", p, " m=", m));
        int64_t total = 0;
        for (int64_t s = 0; s < p; ++s) {
          // Per (chunk, micro-batch): 1 forward, then 1 backward (or B then W).
          std::map<std::pair<int, int64_t>, std::string> seen;
          for (const ScheduledPass& x : ScheduledPasses(plan, s)) {
            const char c = "FBIW"[static_cast<int>(x.kind)];
            seen[{x.chunk, x.micro_batch}].push_back(c);
            // The walker's place of it runs on this stage.
            EXPECT_EQ(StageOf(plan, plan.chunk_position(s, x.chunk), x.micro_batch), s);
            ++total;
          }
          const size_t expected_chunks = static_cast<size_t>(m * (p > 0 ? 1 : 0)) *
                                         (schedule == PipelineSchedule::kDualPipeV ? 2 : 1);
          EXPECT_EQ(seen.size(), expected_chunks) << "stage " << s;
          for (const auto& [key, passes] : seen) {
            EXPECT_TRUE(passes == "FB" || passes == "FIW")
                << "stage " << s << " chunk " << key.first << " mb " << key.second << ": "
                << passes;
          }
        }
        EXPECT_GT(total, 0);
      }
    }
  }
}

TEST(SplitScheduleTest, ZbH1DefersStageWeightGradients) {
  // Stage s keeps s W passes waiting: the last stage of four runs three
  // behind, the first none.
  auto render = [](int64_t stage) {
    std::string out;
    for (const ScheduledPass& x : ScheduledPasses(Plan(PipelineSchedule::kZbH1, 4, 6), stage)) {
      absl::StrAppend(&out, out.empty() ? "" : " ",
                      std::string(1, "FBBW"[static_cast<int>(x.kind)]), x.micro_batch);
    }
    return out;
  };
  EXPECT_EQ(render(0), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5");
  EXPECT_EQ(render(3), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5");
}

// DualPipe README (github.com/deepseek-ai/DualPipe), with PP the pipeline
// stages (DualPipeV: 2p over p ranks) and B the whole backward:
//   ZB1P (p - 1)(F + B - 2W); DualPipe(V) (PP/2 - 1)(F&B + B - 3W).
// On unit-cost passes, F = B_input = W = 1 (B = 2), F&B = F + B.
TEST(SplitScheduleTest, BubblesOnUnitCostPassesMatchTheClosedForms) {
  const double f = 1, b = 2, w = 1;
  for (int64_t p : {2, 4, 8}) {
    for (int64_t m : {2 * p, 3 * p, 8 * p}) {
      SCOPED_TRACE(absl::StrCat("p=", p, " m=", m));
      const double zb = ListMakespan(Plan(PipelineSchedule::kZbH1, p, m), f, b, w);
      EXPECT_DOUBLE_EQ(zb - m * (f + b), (p - 1) * (f + b - 2 * w));
      // A stage's work: m chunk pairs; DualPipeV's chunks are half a stage.
      const double v = ListMakespan(Plan(PipelineSchedule::kDualPipeV, p, m), f, b, w);
      EXPECT_DOUBLE_EQ(v - 2 * m * (f + b), (2 * p / 2 - 1) * ((f + b) + b - 3 * w));
      const double d = ListMakespan(Plan(PipelineSchedule::kDualPipe, p, m), f, b, w);
      EXPECT_DOUBLE_EQ(d - m * (f + b), (p / 2.0 - 1) * ((f + b) + b - 3 * w));
    }
  }
  // ZB-H1's holds for any costs: (p - 1)(F + B - 2W).
  EXPECT_DOUBLE_EQ(ListMakespan(Plan(PipelineSchedule::kZbH1, 4, 8), 1, 2.5, 0.75) - 8 * 3.5,
                   3 * (1 + 2.5 - 1.5));
}

// TinyJob (8 layers) under `schedule`, p stages, m micro-batches of 1, free
// links, on the unit profile set (every chunk the same cost).
Job UnitJob(PipelineSchedule schedule, int64_t p, int64_t m) {
  Job job = testing::WithPlan(testing::TinyJob(), 1, 1, p, 1, m);
  job.plan.schedule = schedule;
  job.plan.virtual_stages = schedule == PipelineSchedule::kDualPipeV ? 2 : 1;
  job.plan.recompute = Recompute::kNone;
  testing::UseFreeLinks(job);
  return job;
}

TEST(SplitScheduleTest, WalkerRunsThePassListsExactly) {
  const testing::UnitTimes unit;
  for (PipelineSchedule schedule : kSplit) {
    for (int64_t p : {2, 4}) {
      for (int64_t m : {2 * p, 3 * p}) {
        for (Granularity granularity : {Granularity::kKernel, Granularity::kOperator}) {
          SCOPED_TRACE(absl::StrCat(ScheduleName(schedule), " p=", p, " m=", m, " ",
                                    GranularityName(granularity)));
          const Job job = UnitJob(schedule, p, m);
          VTRAIN_ASSERT_OK(ValidateJob(job));
          const ProfileSet set = testing::UnitProfileSet(job, unit);
          ProfileLookup lookup(set, job.cluster.gpu,
                               {job.cluster.intra_node_bandwidth_bytes_per_s,
                                job.cluster.inter_node_bandwidth_bytes_per_s});
          BuildOptions options;
          options.granularity = granularity;
          VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationGraph g,
                                      BuildIterationGraph(job, lookup, options));
          // W: the tasks labelled backward_weight, one per micro-batch chunk.
          int64_t w_ns = 0, w_count = 0;
          for (const Task& t : g.graph.tasks()) {
            if (g.graph.labels()[t.label] == "backward_weight") {
              w_ns = t.duration_ns;
              ++w_count;
            }
          }
          const int64_t chunks = p * job.plan.virtual_stages;
          const int64_t layers = 8 / chunks;
          EXPECT_GT(w_ns, 0);
          EXPECT_LT(w_ns, layers * unit.LayerBackwardNs());
          VTRAIN_ASSERT_OK_AND_ASSIGN(const SimulationResult r, Simulate(g.graph));
          const double expected = ListMakespan(
              job.plan, static_cast<double>(layers * unit.LayerForwardNs()),
              static_cast<double>(layers * unit.LayerBackwardNs()), static_cast<double>(w_ns));
          EXPECT_EQ(r.makespan_ns, static_cast<int64_t>(expected));
          // The streaming simulator agrees.
          ProfileLookup streaming(set, job.cluster.gpu,
                                  {job.cluster.intra_node_bandwidth_bytes_per_s,
                                   job.cluster.inter_node_bandwidth_bytes_per_s});
          VTRAIN_ASSERT_OK_AND_ASSIGN(const IterationSimulation s,
                                      SimulateIteration(job, streaming, options));
          EXPECT_EQ(s.result.makespan_ns, r.makespan_ns);
          EXPECT_GT(w_count, 0);
        }
      }
    }
  }
}

TEST(SplitScheduleTest, ZbH1BeatsOneFOneBAndDualPipeVHoldsMore) {
  // The target: Llama 3 70B on 64 H100, t4 p8, 64 micro-batches.
  Job job = testing::PresetJob("llama3-70b", 4, 2, 8, 1, 128);
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 64);
  job.plan.dtype = DType::kBf16;
  job.plan.sequence_parallel = true;
  const ProfileSet profiles = DefaultProfileSet(job.cluster.gpu);
  auto predict = [&](PipelineSchedule schedule) {
    Job j = job;
    j.plan.schedule = schedule;
    j.plan.virtual_stages = schedule == PipelineSchedule::kDualPipeV ? 2 : 1;
    absl::StatusOr<Prediction> p = Predict(j, profiles);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : Prediction{};
  };
  const Prediction one = predict(PipelineSchedule::k1F1B);
  const Prediction zb = predict(PipelineSchedule::kZbH1);
  const Prediction v = predict(PipelineSchedule::kDualPipeV);
  EXPECT_LT(zb.iteration_time_ns, one.iteration_time_ns);
  EXPECT_LE(zb.memory.peak_bytes, 1.05 * one.memory.peak_bytes);
  EXPECT_GT(v.iteration_time_ns, 0);
  EXPECT_GT(v.memory.peak_bytes, one.memory.peak_bytes);
}

TEST(SplitScheduleTest, MemoryFollowsThePassLists) {
  // ZB-H1's first stage holds 1F1B's p micro-batches; DualPipe's every stage
  // holds two stages' parameters.
  Job job = testing::PresetJob("gpt3-1.3b", 1, 1, 4, 1, 16);
  job.plan.recompute = Recompute::kNone;
  const MemoryEstimate one = EstimateMemory(job);
  job.plan.schedule = PipelineSchedule::kZbH1;
  const MemoryEstimate zb = EstimateMemory(job);
  EXPECT_EQ(zb.stages[0].micro_batches_in_flight, 4);
  EXPECT_DOUBLE_EQ(zb.stages[0].activations_bytes, one.stages[0].activations_bytes);
  // The last stage: 1 in flight plus 3 weight gradients waiting, each a
  // share of a micro-batch.
  EXPECT_GT(zb.stages[3].activations_bytes, one.stages[3].activations_bytes);
  EXPECT_LT(zb.stages[3].activations_bytes, 4 * one.stages[3].activations_bytes);
  job.plan.schedule = PipelineSchedule::kDualPipe;
  const MemoryEstimate dual = EstimateMemory(job);
  EXPECT_DOUBLE_EQ(dual.stages[1].parameters, 2 * one.stages[1].parameters);
  // Stage 0 holds both ends of the model, like stage 3.
  EXPECT_DOUBLE_EQ(dual.stages[0].parameters, dual.stages[3].parameters);
}

TEST(SplitScheduleTest, ShapesTheReferenceImplementationsRefuseAreRefused) {
  Job job = UnitJob(PipelineSchedule::kDualPipeV, 4, 8);
  job.plan.virtual_stages = 1;
  EXPECT_THAT(ValidateJob(job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("plan.virtual_stages=2"), HasSubstr("dualpipev"))));
  job = UnitJob(PipelineSchedule::kDualPipe, 4, 6);
  EXPECT_THAT(ValidateJob(job), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("at least 2 * plan.pipeline_parallel = 8")));
  job = testing::WithPlan(testing::TinyJob(), 1, 1, 1, 1, 8);
  job.plan.schedule = PipelineSchedule::kDualPipe;
  EXPECT_THAT(ValidateJob(job), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("plan.pipeline_parallel of at least 2")));
  job = UnitJob(PipelineSchedule::kZbH1, 2, 4);
  job.plan.virtual_stages = 2;
  EXPECT_THAT(ValidateJob(job),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("set plan.virtual_stages=1")));
  // One stage: ZB-H1 is gradient accumulation with the W right after its B.
  VTRAIN_EXPECT_OK(ValidateJob(UnitJob(PipelineSchedule::kZbH1, 1, 3)));
  EXPECT_THAT(ParseSchedule("zb-v"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dualpipev")));
}

}  // namespace
}  // namespace vtrain

namespace vtrain {
namespace {

TEST(SplitScheduleTest, DualPipePairsHideTheMoeExchange) {
  Job job = testing::PresetJob("qwen3-30b-a3b", 1, 8, 2, 1, 64);
  job.plan.expert_parallel = 8;
  job.plan.schedule = PipelineSchedule::kDualPipeV;
  job.plan.virtual_stages = 2;
  job.plan.recompute = Recompute::kNone;
  VTRAIN_ASSERT_OK(ValidateJob(job));
  const ProfileSet profiles = DefaultProfileSet(job.cluster.gpu);
  ProfileLookup lookup(
      profiles, job.cluster.gpu,
      {job.cluster.intra_node_bandwidth_bytes_per_s, job.cluster.inter_node_bandwidth_bytes_per_s});
  const std::vector<internal::StageEnds> chunks = internal::JobChunks(job);
  auto label = [](const std::string&) { return 0; };
  const internal::StageTemplates t =
      internal::MakeStageTemplates(job, lookup, Granularity::kOperator, chunks[1], label);
  ASSERT_FALSE(t.paired_forward.segments.empty());
  EXPECT_LT(t.paired_forward.TaskNs(), t.forward.TaskNs());
  EXPECT_LT(t.paired_backward.TaskNs(), t.backward.TaskNs());
  // Only the pairs hide their exchange, whatever moe.overlap says: the
  // unpaired passes have nothing beside them.
  auto predict = [&](bool overlap) {
    Job j = job;
    j.plan.moe.overlap = overlap;
    absl::StatusOr<Prediction> p = Predict(j, profiles);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? p->iteration_time_ns : 0;
  };
  const int64_t paired = predict(false);
  EXPECT_GT(paired, 0);
  EXPECT_EQ(paired, predict(true));
  // A dense model or another schedule has no pairs.
  job.plan.schedule = PipelineSchedule::kZbH1;
  job.plan.virtual_stages = 1;
  EXPECT_TRUE(internal::MakeStageTemplates(job, lookup, Granularity::kOperator,
                                           internal::JobChunks(job)[0], label)
                  .paired_forward.segments.empty());
}

}  // namespace
}  // namespace vtrain

namespace vtrain {
namespace {

TEST(SplitScheduleTest, PeakOfAFewMicroBatchesIsThePeakOfMany) {
  // SplitChunksInFlight walks at most 4p + 4 micro-batches: the peak of the
  // whole list is the same.
  for (PipelineSchedule schedule : kSplit) {
    for (int64_t p : {2, 4, 8}) {
      const ParallelPlan plan = Plan(schedule, p, 20 * p);
      for (int64_t s = 0; s < p; ++s) {
        double held = 0, peak = 0;
        for (const ScheduledPass& x : ScheduledPasses(plan, s)) {
          held += x.kind == PassKind::kForward     ? 1
                  : x.kind == PassKind::kBackward  ? -1
                  : x.kind == PassKind::kInputGrad ? -0.6
                                                   : -0.4;
          peak = std::max(peak, held);
        }
        EXPECT_DOUBLE_EQ(SplitChunksInFlight(plan, s, 0.4), peak)
            << ScheduleName(schedule) << " p=" << p << " stage " << s;
      }
    }
  }
}

TEST(SplitScheduleTest, AHugeBatchIsRefusedBeforeAnyListIsBuilt) {
  Job job = UnitJob(PipelineSchedule::kDualPipeV, 4, int64_t{1} << 30);
  VTRAIN_ASSERT_OK(ValidateJob(job));
  EXPECT_GT(EstimateMemory(job).peak_bytes, 0);
  EXPECT_THAT(Predict(job, testing::UnitProfileSet(job)).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_tasks")));
}

}  // namespace
}  // namespace vtrain
