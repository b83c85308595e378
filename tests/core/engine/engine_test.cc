#include "core/engine/engine.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/random.h"
#include "tests/testing/reference_scheduler.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::ElementsAre;
using ::vtrain::testing::ReferenceSchedule;
using ::vtrain::testing::ReferenceSimulate;
using ::vtrain::testing::StatusIs;

constexpr int kCompute = static_cast<int>(TaskKind::kCompute);
constexpr int kPipeline = static_cast<int>(TaskKind::kPipeline);
constexpr int kDataParallel = static_cast<int>(TaskKind::kDataParallel);

SimulationOptions KeepTimes() {
  SimulationOptions options;
  options.keep_task_times = true;
  return options;
}

int64_t Sum(const std::array<int64_t, kNumTaskKinds>& a) {
  return std::accumulate(a.begin(), a.end(), int64_t{0});
}

// The identity StreamStats documents, for every stream.
void ExpectBreakdownAddsUp(const SimulationResult& r) {
  for (size_t s = 0; s < r.streams.size(); ++s) {
    SCOPED_TRACE(absl::StrCat("stream ", s));
    const StreamStats& st = r.streams[s];
    EXPECT_GE(st.idle_ns, 0);
    EXPECT_GE(st.gap_ns, 0);
    for (int k = 0; k < kNumTaskKinds; ++k) EXPECT_GE(st.exposed_wait_ns[k], 0);
    EXPECT_EQ(Sum(st.busy_ns) + st.gap_ns + Sum(st.exposed_wait_ns) + st.idle_ns, r.makespan_ns);
  }
}

TEST(SimulateTest, EmptyGraph) {
  TaskGraph g;
  g.AddStream("s");
  absl::StatusOr<SimulationResult> r = Simulate(g);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->makespan_ns, 0);
  ASSERT_EQ(r->streams.size(), 1u);
  EXPECT_EQ(r->streams[0].num_tasks, 0);
  EXPECT_TRUE(r->finish_ns.empty());
}

TEST(SimulateTest, OneStreamRunsBackToBackWithGaps) {
  TaskGraph g;
  const StreamId s = g.AddStream("compute");
  g.AddTask(s, 100, 10, TaskKind::kCompute, 0, {});
  g.AddTask(s, 50, 5, TaskKind::kCompute, 0, {});
  g.AddTask(s, 30, 7, TaskKind::kCompute, 0, {});  // its gap lies past the end
  absl::StatusOr<SimulationResult> r = Simulate(g, KeepTimes());
  ASSERT_TRUE(r.ok()) << r.status();
  // 100 | gap 10 | 50 | gap 5 | 30 -> finishes 100, 160, 195.
  EXPECT_THAT(r->finish_ns, ElementsAre(100, 160, 195));
  EXPECT_EQ(r->makespan_ns, 195);
  const StreamStats& st = r->streams[0];
  EXPECT_EQ(st.busy_ns[kCompute], 180);
  EXPECT_EQ(st.gap_ns, 15);  // the trailing 7 is not counted
  EXPECT_EQ(st.idle_ns, 0);
  EXPECT_EQ(st.num_tasks, 3);
  EXPECT_EQ(st.last_finish_ns, 195);
  ExpectBreakdownAddsUp(*r);
}

TEST(SimulateTest, GapHoldsTheStreamEvenWhenParentsAreReady) {
  TaskGraph g;
  const StreamId a = g.AddStream("a");
  const StreamId b = g.AddStream("b");
  g.AddTask(a, 100, 50, TaskKind::kCompute, 0, {});                  // 0: [0, 100), a free at 150
  const TaskId t1 = g.AddTask(b, 10, 0, TaskKind::kCompute, 0, {});  // 1: [0, 10)
  g.AddTask(a, 10, 0, TaskKind::kCompute, 0, {t1});  // 2: max(150, 10) -> [150, 160)
  absl::StatusOr<SimulationResult> r = Simulate(g, KeepTimes());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->finish_ns, ElementsAre(100, 10, 160));
  EXPECT_EQ(r->makespan_ns, 160);
  // Stream b: busy 10, then idle until the makespan: 150.
  EXPECT_EQ(r->streams[b].idle_ns, 150);
  ExpectBreakdownAddsUp(*r);
}

TEST(SimulateTest, CrossStreamWaitIsExposedCommunication) {
  TaskGraph g;
  const StreamId compute = g.AddStream("compute");
  const StreamId comm = g.AddStream("comm");
  const TaskId t0 = g.AddTask(compute, 100, 10, TaskKind::kCompute, 0, {});
  const TaskId t1 = g.AddTask(comm, 40, 0, TaskKind::kPipeline, 0, {t0});
  g.AddTask(compute, 20, 0, TaskKind::kCompute, 0, {});
  const TaskId t3 = g.AddTask(compute, 50, 0, TaskKind::kCompute, 0, {t1});
  g.AddTask(comm, 30, 0, TaskKind::kDataParallel, 0, {t3});
  absl::StatusOr<SimulationResult> r = Simulate(g, KeepTimes());
  ASSERT_TRUE(r.ok()) << r.status();
  // t0 [0, 100) then gap to 110; t1 [100, 140); t2 [110, 130);
  // t3 waits for t1: [140, 190); t4 [190, 220).
  EXPECT_THAT(r->finish_ns, ElementsAre(100, 140, 130, 190, 220));
  EXPECT_EQ(r->makespan_ns, 220);
  // Compute: busy 170 + gap 10 + exposed pipeline 10 (130 -> 140, while the
  // transfer that began at 100 ran) + idle 30 (190 -> 220) = 220.
  const StreamStats& c = r->streams[compute];
  EXPECT_EQ(c.busy_ns[kCompute], 170);
  EXPECT_EQ(c.gap_ns, 10);
  EXPECT_EQ(c.exposed_wait_ns[kPipeline], 10);
  EXPECT_EQ(c.idle_ns, 30);
  // Comm: busy 40 + 30, waits on compute parents are idle: 100 + 50.
  const StreamStats& m = r->streams[comm];
  EXPECT_EQ(m.busy_ns[kPipeline], 40);
  EXPECT_EQ(m.busy_ns[kDataParallel], 30);
  EXPECT_EQ(Sum(m.exposed_wait_ns), 0);
  EXPECT_EQ(m.idle_ns, 150);
  ExpectBreakdownAddsUp(*r);
}

TEST(SimulateTest, WaitOnAChainOfTransfersIsExposedInFull) {
  TaskGraph g;
  const StreamId compute = g.AddStream("compute");
  const StreamId dp = g.AddStream("dp");
  const TaskId c0 = g.AddTask(compute, 100, 0, TaskKind::kCompute, 0, {});
  g.AddTask(dp, 50, 0, TaskKind::kDataParallel, 0, {c0});                  // [100, 150)
  const TaskId d2 = g.AddTask(dp, 60, 0, TaskKind::kDataParallel, 0, {});  // [150, 210)
  g.AddTask(compute, 10, 0, TaskKind::kCompute, 0, {});                    // [100, 110)
  g.AddTask(compute, 10, 0, TaskKind::kCompute, 0, {d2});                  // [210, 220)
  absl::StatusOr<SimulationResult> r = Simulate(g, KeepTimes());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->finish_ns, ElementsAre(100, 150, 210, 110, 220));
  // The compute stream waits 110 -> 210; the DP stream was busy without a
  // break from 100 to 210, so all 100 ns are exposed DP time, none idle.
  const StreamStats& c = r->streams[compute];
  EXPECT_EQ(c.exposed_wait_ns[kDataParallel], 100);
  EXPECT_EQ(c.idle_ns, 0);
  ExpectBreakdownAddsUp(*r);
}

TEST(SimulateTest, WaitBeforeTheTransferBeganIsIdle) {
  TaskGraph g;
  const StreamId compute = g.AddStream("compute");
  const StreamId dp = g.AddStream("dp");
  const StreamId other = g.AddStream("other");
  const TaskId x = g.AddTask(other, 150, 0, TaskKind::kCompute, 0, {});    // [0, 150)
  const TaskId d = g.AddTask(dp, 60, 0, TaskKind::kDataParallel, 0, {x});  // [150, 210)
  g.AddTask(compute, 110, 0, TaskKind::kCompute, 0, {});                   // [0, 110)
  g.AddTask(compute, 10, 0, TaskKind::kCompute, 0, {d});                   // [210, 220)
  absl::StatusOr<SimulationResult> r = Simulate(g, KeepTimes());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->makespan_ns, 220);
  // Compute waits 110 -> 210: 110 -> 150 nothing was being sent (idle 40),
  // 150 -> 210 the all-reduce ran (exposed 60).
  const StreamStats& c = r->streams[compute];
  EXPECT_EQ(c.exposed_wait_ns[kDataParallel], 60);
  EXPECT_EQ(c.idle_ns, 40);
  EXPECT_EQ(c.busy_ns[kCompute], 120);
  ExpectBreakdownAddsUp(*r);
}

TEST(SimulateTest, LatestParentBindsAndZeroDurationTasksWork) {
  TaskGraph g;
  const StreamId a = g.AddStream("a");
  const StreamId b = g.AddStream("b");
  const StreamId c = g.AddStream("c");
  const TaskId p0 = g.AddTask(a, 70, 0, TaskKind::kCompute, 0, {});
  const TaskId p1 = g.AddTask(b, 90, 0, TaskKind::kCompute, 0, {});
  const TaskId z = g.AddTask(c, 0, 0, TaskKind::kCompute, 0, {p0, p1});  // [90, 90)
  g.AddTask(a, 5, 3, TaskKind::kCompute, 0, {z});                        // [90, 95)
  g.AddTask(a, 5, 0, TaskKind::kCompute, 0, {});                         // [98, 103)
  absl::StatusOr<SimulationResult> r = Simulate(g, KeepTimes());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->finish_ns, ElementsAre(70, 90, 90, 95, 103));
  EXPECT_EQ(r->makespan_ns, 103);
  ExpectBreakdownAddsUp(*r);
}

// A random graph: parents drawn among earlier ids, so ids are topological.
// Deterministic for a seed with any standard library (no distributions).
TaskGraph RandomGraph(uint64_t seed) {
  testing::Random rng(seed);
  TaskGraph g;
  const int32_t streams = static_cast<int32_t>(rng.Uniform(1, 6));
  for (int32_t s = 0; s < streams; ++s) g.AddStream(absl::StrCat("s", s));
  const int64_t n = rng.Uniform(1, 250);
  const int64_t max_duration = rng.Uniform(0, 3) == 0 ? 3 : 1000;  // small values make ties
  for (int64_t id = 0; id < n; ++id) {
    std::vector<TaskId> parents;
    const int64_t num_parents = id == 0 ? 0 : rng.Uniform(0, std::min<int64_t>(id, 4));
    for (int64_t k = 0; k < num_parents; ++k) {
      // Mostly recent tasks, sometimes any earlier one.
      const int64_t lo = rng.Uniform(0, 1) == 0 ? std::max<int64_t>(0, id - 8) : 0;
      parents.push_back(static_cast<TaskId>(rng.Uniform(lo, id - 1)));
    }
    const auto stream = static_cast<StreamId>(rng.Uniform(0, streams - 1));
    const int64_t duration = rng.Uniform(0, max_duration);
    const int64_t gap = rng.Uniform(0, 2) == 0 ? rng.Uniform(0, 200) : 0;
    const auto kind = static_cast<TaskKind>(rng.Uniform(0, kNumTaskKinds - 1));
    g.AddTask(stream, duration, gap, kind, 0, parents);
  }
  return g;
}

TEST(SimulateDifferentialTest, MatchesTheReferenceSchedulerOnRandomGraphs) {
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const TaskGraph g = RandomGraph(seed);
    absl::StatusOr<SimulationResult> engine = Simulate(g, KeepTimes());
    absl::StatusOr<ReferenceSchedule> reference = ReferenceSimulate(g);
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_TRUE(reference.ok()) << reference.status();
    ASSERT_EQ(engine->makespan_ns, reference->makespan_ns);
    ASSERT_EQ(engine->finish_ns, reference->finish_ns);
    ASSERT_NO_FATAL_FAILURE(ExpectBreakdownAddsUp(*engine));
    if (HasFailure()) return;
  }
}

TEST(SimulateDifferentialTest, BusyAndTaskCountsMatchTheGraph) {
  for (uint64_t seed = 1000; seed < 1100; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const TaskGraph g = RandomGraph(seed);
    absl::StatusOr<SimulationResult> r = Simulate(g, KeepTimes());
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<std::array<int64_t, kNumTaskKinds>> busy(g.num_streams());
    std::vector<int64_t> count(g.num_streams(), 0);
    std::vector<int64_t> last_finish(g.num_streams(), 0);
    for (TaskId id = 0; id < g.num_tasks(); ++id) {
      const Task& t = g.task(id);
      busy[t.stream][static_cast<int>(t.kind)] += t.duration_ns;
      ++count[t.stream];
      last_finish[t.stream] = r->finish_ns[id];
    }
    for (int32_t s = 0; s < g.num_streams(); ++s) {
      EXPECT_EQ(r->streams[s].busy_ns, busy[s]);
      EXPECT_EQ(r->streams[s].num_tasks, count[s]);
      EXPECT_EQ(r->streams[s].last_finish_ns, last_finish[s]);
    }
    if (HasFailure()) return;
  }
}

TEST(ReferenceSchedulerTest, HandGoldenGraph) {
  // The reference must itself be right for the differential test to mean
  // anything: the graph of CrossStreamWaitIsExposedCommunication.
  TaskGraph g;
  const StreamId compute = g.AddStream("compute");
  const StreamId comm = g.AddStream("comm");
  const TaskId t0 = g.AddTask(compute, 100, 10, TaskKind::kCompute, 0, {});
  const TaskId t1 = g.AddTask(comm, 40, 0, TaskKind::kPipeline, 0, {t0});
  g.AddTask(compute, 20, 0, TaskKind::kCompute, 0, {});
  const TaskId t3 = g.AddTask(compute, 50, 0, TaskKind::kCompute, 0, {t1});
  g.AddTask(comm, 30, 0, TaskKind::kDataParallel, 0, {t3});
  absl::StatusOr<ReferenceSchedule> r = ReferenceSimulate(g);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->finish_ns, ElementsAre(100, 140, 130, 190, 220));
  EXPECT_EQ(r->makespan_ns, 220);
}

// 70,000 one-nanosecond tasks on one stream: the engine polls the callback
// at tasks 0 and 65,536.
TaskGraph LongChain() {
  TaskGraph g;
  const StreamId s = g.AddStream("s");
  g.Reserve(70'000, 0);
  for (int i = 0; i < 70'000; ++i) g.AddTask(s, 1, 0, TaskKind::kCompute, 0, {});
  return g;
}

TEST(SimulateCancellationTest, CancelledCallbackStopsTheSimulation) {
  const TaskGraph g = LongChain();
  SimulationOptions options;
  options.cancelled = [] { return true; };
  EXPECT_THAT(Simulate(g, options), StatusIs(absl::StatusCode::kCancelled));
}

TEST(SimulateCancellationTest, CancellationLaterInTheGraphIsSeen) {
  const TaskGraph g = LongChain();
  int calls = 0;
  SimulationOptions options;
  options.cancelled = [&calls] { return ++calls >= 2; };  // cancel at task 65,536
  EXPECT_THAT(Simulate(g, options), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(calls, 2);
}

TEST(SimulateCancellationTest, NotCancelledRunsToTheEnd) {
  const TaskGraph g = LongChain();
  int calls = 0;
  SimulationOptions options;
  options.cancelled = [&calls] {
    ++calls;
    return false;
  };
  absl::StatusOr<SimulationResult> r = Simulate(g, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->makespan_ns, 70'000);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace vtrain
