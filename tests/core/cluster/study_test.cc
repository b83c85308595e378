#include "core/cluster/study.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

TEST(JobMixTest, ItpMapsTheTracedGpusAsBefore) {
  const LlmJob eight = DrawLlmJob(JobMix::kItp, "x", 8, 1024);
  EXPECT_EQ(eight.preset, "gpt3-6.7b");
  EXPECT_EQ(eight.global_batch, 128);  // 16 x 8
  EXPECT_EQ(eight.gpus, 8);
  EXPECT_TRUE(eight.gpu.empty());  // the cluster's GPU
  EXPECT_EQ(DrawLlmJob(JobMix::kItp, "x", 2, 1024).preset, "gpt3-1.3b");
  EXPECT_EQ(DrawLlmJob(JobMix::kItp, "x", 2, 1024).global_batch, 32);
  EXPECT_EQ(DrawLlmJob(JobMix::kItp, "x", 64, 1024).global_batch, 1024);
  EXPECT_EQ(DrawLlmJob(JobMix::kItp, "x", 512, 1024).global_batch, 1536);
}

TEST(JobMixTest, LlmMixesDrawTheStatedDemandsByIdAlone) {
  // 20,000 ids: each demand's share within 1.5 points of the mix's, the
  // median 32 GPUs; the same id draws the same job every time.
  std::map<int64_t, int> count;
  std::vector<int64_t> demands;
  for (int i = 0; i < 20'000; ++i) {
    const std::string id = absl::StrCat("job-", i);
    const LlmJob a = DrawLlmJob(JobMix::kPaper, id, 1, 1024);
    const LlmJob b = DrawLlmJob(JobMix::kPaper, id, 64, 1024);  // the traced GPUs do not matter
    ASSERT_EQ(a.preset, b.preset);
    ASSERT_EQ(a.gpus, b.gpus);
    EXPECT_EQ(a.gpu, "a100-sxm4-80gb");
    EXPECT_EQ(a.preset.rfind("gpt3-", 0), 0u) << a.preset;
    ++count[a.gpus];
    demands.push_back(a.gpus);
  }
  const std::map<int64_t, double> shares = {{8, 0.20},   {16, 0.20},  {32, 0.20},  {64, 0.15},
                                            {128, 0.10}, {256, 0.08}, {512, 0.05}, {1024, 0.02}};
  for (const auto& [gpus, share] : shares) {
    EXPECT_NEAR(count[gpus] / 20'000.0, share, 0.015) << gpus;
  }
  std::nth_element(demands.begin(), demands.begin() + 10'000, demands.end());
  EXPECT_EQ(demands[10'000], 32);
  // 175B only where it is trained (128 GPUs and more); 2026 on H100.
  for (int i = 0; i < 2'000; ++i) {
    const LlmJob j = DrawLlmJob(JobMix::kPaper, absl::StrCat("j", i), 1, 1024);
    if (j.preset == "gpt3-175b") {
      EXPECT_GE(j.gpus, 128);
    }
    const LlmJob n = DrawLlmJob(JobMix::k2026, absl::StrCat("j", i), 1, 1024);
    EXPECT_EQ(n.gpu, "h100-sxm5-80gb");
    EXPECT_FALSE(n.paper_settings);
    if (n.preset == "deepseek-v3") {
      EXPECT_EQ(n.gpus, 1024);
    }
  }
}

TEST(JobMixTest, ADemandLargerThanTheClusterBecomesTheLargestItHas) {
  for (int i = 0; i < 2'000; ++i) {
    const LlmJob j = DrawLlmJob(JobMix::k2026, absl::StrCat("j", i), 1, 128);
    EXPECT_LE(j.gpus, 128);
    EXPECT_NE(j.preset, "deepseek-v3");
    EXPECT_NE(j.preset, "llama3.1-405b");
  }
}

TEST(StudyTest, CellsMultiplyTheListsWithPerWindowSeeds) {
  StudySpec spec;
  spec.cluster_gpus = {128, 1024};
  spec.target_loads = {0.8, 1.0};
  spec.mixes = {JobMix::kPaper};
  spec.seeds = {1, 2, 3};
  spec.windows = {{.jobs = 128}, {.hours = 400, .seeds = {7}}};
  const std::vector<StudyCell> cells = StudyCells(spec);
  ASSERT_EQ(cells.size(), 2u * 2u * (3u + 1u));
  EXPECT_EQ(cells[0].gpus, 128);
  EXPECT_EQ(cells[0].seed, 1);
  EXPECT_EQ(cells[3].window.hours, 400);
  EXPECT_EQ(cells[3].seed, 7);
  EXPECT_EQ(cells.back().gpus, 1024);
  EXPECT_DOUBLE_EQ(*cells.back().target_load, 1.0);
}

TEST(StudyTest, RunningLoadCountsOnlyTheTimeInsideTheSpan) {
  // 8 GPUs on 16 from 0 to 100 and 4 GPUs from 50 to 250, over [0, 200]:
  // (8 x 100 + 4 x 150) / (16 x 200).
  StudyJob a{"a", 0, 100, 100, {.gpus = 8}};
  StudyJob b{"b", 50, 300, 200, {.gpus = 4}};
  EXPECT_DOUBLE_EQ(RunningLoad({a, b}, 0, 200, 16), (800.0 + 600.0) / 3200.0);
  EXPECT_DOUBLE_EQ(RunningLoad({a, b}, 0, 0, 16), 0);
}

// A trace of `n` jobs an hour apart, each `hours` long on `gpus` GPUs (itp:
// the traced GPUs are asked for), deadline twice the duration.
std::vector<TraceRow> EvenTrace(int n, double hours, int64_t gpus) {
  std::vector<TraceRow> trace;
  for (int i = 0; i < n; ++i) {
    const double t = 3600.0 * i;
    trace.push_back({absl::StrCat("r", i), t, t + 2 * 3600 * hours, 3600 * hours, gpus});
  }
  return trace;
}

TEST(StudyTest, AnHourWindowAtATargetLoadKeepsItsHoursAndReachesTheLoad) {
  StudySpec spec;
  spec.trace = EvenTrace(2'000, 3, 8);
  // 8 GPUs of 64 for 3 h per hour: 0.375 as traced; at 1.0 the arrivals
  // come 2.67 times closer and the 100-hour window holds about 267 jobs.
  StudyCell cell{JobMix::kItp, 64, 1.0, {.hours = 100, .start_s = 0}, 1};
  VTRAIN_ASSERT_OK_AND_ASSIGN(StudyWindow w, BuildWindow(spec, cell));
  EXPECT_EQ(w.first_row, 0);
  EXPECT_NEAR(w.trace_load, 0.375 * (1 - 3.0 / 100 / 2), 0.01);
  EXPECT_NEAR(w.offered_load, 1.0, 0.01);
  EXPECT_DOUBLE_EQ(w.offered_load, w.running_load);
  // A little over 100 / 0.375: the last jobs run partly past the window.
  EXPECT_NEAR(static_cast<double>(w.jobs.size()), 100 / 0.375 + 3, 3);
  for (const StudyJob& j : w.jobs) {
    EXPECT_LT(j.submit_s, 100 * 3600.0);
    EXPECT_NEAR(j.deadline_s - j.submit_s, 2 * 3 * 3600.0, 1e-6);  // slack kept
  }
  // Past what the trace holds: the whole rest of it, the load reported.
  cell.target_load = 50;
  VTRAIN_ASSERT_OK_AND_ASSIGN(StudyWindow all, BuildWindow(spec, cell));
  EXPECT_EQ(all.jobs.size(), spec.trace.size());
  EXPECT_LT(all.offered_load, 50);
  // A deadline slack replaces the deadlines.
  spec.deadline_slack = 1.5;
  cell.target_load.reset();
  VTRAIN_ASSERT_OK_AND_ASSIGN(StudyWindow slack, BuildWindow(spec, cell));
  EXPECT_NEAR(slack.jobs[3].deadline_s - slack.jobs[3].submit_s, 1.5 * 3 * 3600, 1e-6);
  cell.target_load = 0;
  EXPECT_THAT(BuildWindow(spec, cell),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target_load=0")));
}

TEST(StudyTest, AJobWindowIsSeededAndCompressedAsBefore) {
  StudySpec spec;
  spec.trace = EvenTrace(500, 2, 4);
  const StudyCell cell{JobMix::kItp, 64, 0.5, {.jobs = 100}, 3};
  VTRAIN_ASSERT_OK_AND_ASSIGN(StudyWindow a, BuildWindow(spec, cell));
  VTRAIN_ASSERT_OK_AND_ASSIGN(StudyWindow b, BuildWindow(spec, cell));
  EXPECT_EQ(a.first_row, b.first_row);
  ASSERT_EQ(a.jobs.size(), 100u);
  EXPECT_EQ(a.jobs[0].id, spec.trace[static_cast<size_t>(a.first_row)].id);
  EXPECT_NEAR(a.offered_load, 0.5, 1e-9);
  StudyCell other = cell;
  other.seed = 4;
  VTRAIN_ASSERT_OK_AND_ASSIGN(StudyWindow c, BuildWindow(spec, other));
  EXPECT_NE(a.first_row, c.first_row);
}

TEST(StudyTest, SummaryTakesMeansAndWorsts) {
  const StudySummary s = Summarise({{0.9, 1.1, -0.2}, {0.7, 0.95, 0.05}});
  EXPECT_EQ(s.windows, 2);
  EXPECT_DOUBLE_EQ(s.mean_avg_jct_change, -0.075);
  EXPECT_DOUBLE_EQ(s.worst_avg_jct_change, 0.05);
  EXPECT_DOUBLE_EQ(s.mean_deadline_ratio, 1.025);
  EXPECT_DOUBLE_EQ(s.worst_deadline_ratio, 0.95);
  EXPECT_DOUBLE_EQ(s.mean_data_parallel_deadline_satisfaction, 0.8);
}

}  // namespace
}  // namespace vtrain
