// The compact task graph (distinct records, a 4-byte index a task, edges only
// where a task waits on another stream) holds exactly the graph that was
// added, the engine on it equals the engine on an explicit layout (every
// task's record and completion stored), and kGraphBytesPerTask covers what
// real kernel graphs take.
#include <array>
#include <cstdint>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/graph/builder.h"
#include "core/graph/task_graph.h"
#include "core/profile/default_profiles.h"
#include "core/util/status_macros.h"
#include "gtest/gtest.h"
#include "tests/testing/kernel_graph.h"
#include "tests/testing/random.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

// A graph with repeating tasks (drawn from a small pool, as kernel graphs
// repeat their passes) and random parents, and the same graph kept
// explicitly beside it.
struct Explicit {
  TaskGraph graph;
  std::vector<Task> tasks;
  std::vector<std::vector<TaskId>> parents;
};

Explicit RandomRepeatingGraph(uint64_t seed) {
  testing::Random rng(seed);
  Explicit out;
  const auto streams = static_cast<int32_t>(rng.Uniform(1, 5));
  for (int32_t s = 0; s < streams; ++s) out.graph.AddStream(absl::StrCat("s", s));
  std::vector<Task> pool(rng.Uniform(1, 12));
  for (Task& t : pool) {
    t = Task{rng.Uniform(0, 50), rng.Uniform(0, 2) == 0 ? rng.Uniform(0, 9) : 0,
             static_cast<StreamId>(rng.Uniform(0, streams - 1)),
             static_cast<int32_t>(rng.Uniform(0, 3)),
             static_cast<TaskKind>(rng.Uniform(0, kNumTaskKinds - 1))};
  }
  const int64_t n = rng.Uniform(1, 400);
  for (int64_t id = 0; id < n; ++id) {
    // Mostly the pool in order (a repeating pass), sometimes any of it.
    const Task& t =
        pool[rng.Uniform(0, 3) == 0 ? rng.Uniform(0, static_cast<int64_t>(pool.size()) - 1)
                                    : id % static_cast<int64_t>(pool.size())];
    std::vector<TaskId> parents;
    const int64_t num_parents = id == 0 || rng.Uniform(0, 2) > 0 ? 0 : rng.Uniform(1, 3);
    for (int64_t k = 0; k < num_parents; ++k) {
      parents.push_back(static_cast<TaskId>(rng.Uniform(0, id - 1)));
    }
    EXPECT_EQ(out.graph.AddTask(t.stream, t.duration_ns, t.gap_ns, t.kind, t.label, parents), id);
    out.tasks.push_back(t);
    out.parents.push_back(parents);
  }
  return out;
}

TEST(CompactTaskGraphTest, HoldsExactlyTheTasksAndEdgesAdded) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const Explicit e = RandomRepeatingGraph(seed);
    const TaskGraph& g = e.graph;
    ASSERT_EQ(g.num_tasks(), static_cast<int64_t>(e.tasks.size()));
    EXPECT_EQ(g.tasks(), e.tasks);
    std::set<TaskId> parent_tasks;
    for (TaskId id = 0; id < g.num_tasks(); ++id) {
      EXPECT_EQ(g.task(id), e.tasks[id]);
      const absl::Span<const TaskId> parents = g.parents(id);
      EXPECT_EQ(std::vector<TaskId>(parents.begin(), parents.end()), e.parents[id]);
      parent_tasks.insert(e.parents[id].begin(), e.parents[id].end());
    }
    // The is-parent bits mark exactly the tasks some task waits for.
    EXPECT_EQ(g.num_parent_tasks(), static_cast<int64_t>(parent_tasks.size()));
    for (TaskId id = 0; id < g.num_tasks(); ++id) {
      const bool bit = (g.is_parent_bits()[id >> 6] >> (id & 63)) & 1;
      EXPECT_EQ(bit, parent_tasks.count(id) == 1) << id;
    }
    // Records are distinct: one per distinct task.
    const std::set<std::array<int64_t, 5>> distinct = [&] {
      std::set<std::array<int64_t, 5>> d;
      for (const Task& t : e.tasks) {
        d.insert({t.duration_ns, t.gap_ns, t.stream, t.label, static_cast<int64_t>(t.kind)});
      }
      return d;
    }();
    EXPECT_EQ(g.records().size(), distinct.size());
    if (HasFailure()) return;
  }
}

// vTrain's Algorithm 1 on the explicit layout: every task's completion kept,
// parents read from the explicit lists (the engine before the compact graph).
SimulationResult ExplicitSimulate(const Explicit& e) {
  Timeline timeline(e.graph.num_streams());
  std::vector<Completion> done(e.tasks.size());
  for (size_t id = 0; id < e.tasks.size(); ++id) {
    int64_t ready = 0;
    const Completion* binding = nullptr;
    for (TaskId p : e.parents[id]) {
      if (done[p].finish_ns > ready) {
        ready = done[p].finish_ns;
        binding = &done[p];
      }
    }
    const Task& t = e.tasks[id];
    done[id] = timeline.RunAfter(t.stream, t.duration_ns, t.gap_ns, t.kind, ready, binding);
  }
  SimulationResult r = timeline.Finish();
  for (const Completion& c : done) r.finish_ns.push_back(c.finish_ns);
  return r;
}

void ExpectSameResult(const SimulationResult& a, const SimulationResult& b) {
  EXPECT_EQ(a.makespan_ns, b.makespan_ns);
  EXPECT_EQ(a.finish_ns, b.finish_ns);
  ASSERT_EQ(a.streams.size(), b.streams.size());
  for (size_t s = 0; s < a.streams.size(); ++s) {
    SCOPED_TRACE(absl::StrCat("stream ", s));
    EXPECT_EQ(a.streams[s].busy_ns, b.streams[s].busy_ns);
    EXPECT_EQ(a.streams[s].gap_ns, b.streams[s].gap_ns);
    EXPECT_EQ(a.streams[s].exposed_wait_ns, b.streams[s].exposed_wait_ns);
    EXPECT_EQ(a.streams[s].idle_ns, b.streams[s].idle_ns);
    EXPECT_EQ(a.streams[s].last_finish_ns, b.streams[s].last_finish_ns);
    EXPECT_EQ(a.streams[s].num_tasks, b.streams[s].num_tasks);
  }
}

SimulationOptions KeepTaskTimes() {
  SimulationOptions o;
  o.keep_task_times = true;
  return o;
}

TEST(CompactTaskGraphTest, EngineEqualsTheExplicitLayoutOnRandomGraphs) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const Explicit e = RandomRepeatingGraph(seed);
    VTRAIN_ASSERT_OK_AND_ASSIGN(const SimulationResult r, Simulate(e.graph, KeepTaskTimes()));
    ExpectSameResult(r, ExplicitSimulate(e));
    if (HasFailure()) return;
  }
}

TEST(CompactTaskGraphTest, EngineEqualsTheExplicitLayoutOnKernelGraphs) {
  Job gpipe = testing::PresetJob("gpt3-1.3b", 2, 2, 4, 1, 32);
  gpipe.plan.schedule = PipelineSchedule::kGpipe;
  for (const Job& job : {testing::PresetJob("gpt3-1.3b", 2, 4, 4, 1, 64), gpipe,
                         testing::PresetJob("llama2-7b", 2, 2, 8, 1, 64)}) {
    SCOPED_TRACE(job.model.name);
    const IterationGraph built = testing::BuildKernelGraph(job);
    Explicit e;
    e.graph = built.graph;
    e.tasks = built.graph.tasks();
    for (TaskId id = 0; id < built.graph.num_tasks(); ++id) {
      const absl::Span<const TaskId> p = built.graph.parents(id);
      e.parents.emplace_back(p.begin(), p.end());
    }
    VTRAIN_ASSERT_OK_AND_ASSIGN(const SimulationResult r, Simulate(built.graph, KeepTaskTimes()));
    ExpectSameResult(r, ExplicitSimulate(e));
    // Kernel graphs repeat: far fewer records than tasks, few parents.
    EXPECT_LT(built.graph.records().size() * 20, static_cast<size_t>(built.graph.num_tasks()));
  }
}

// The admission estimate (walker.h refuses graphs above max_graph_bytes
// before building them) covers the graph and the engine's completions on
// plans with many micro-batches, where a limit matters (with few, the
// distinct records add up to ~150 bytes each; see kGraphBytesPerTask).
TEST(CompactTaskGraphTest, BytesPerTaskEstimateCoversRealGraphs) {
  for (const Job& job : {testing::PresetJob("gpt3-175b", 8, 4, 16, 6, 1536),
                         testing::PresetJob("gpt3-1.3b", 2, 4, 1, 1, 64),
                         testing::PresetJob("gpt3-13b", 8, 1, 4, 1, 512),
                         testing::PresetJob("llama3-70b", 4, 16, 8, 1, 1024),
                         testing::PresetJob("mtnlg-530b", 8, 12, 35, 1, 1920)}) {
    const IterationGraph built = testing::BuildKernelGraph(job);
    const TaskGraph& g = built.graph;
    const int64_t bytes = g.MemoryBytes() + SimulationMemoryBytes(g);
    SCOPED_TRACE(absl::StrCat(job.model.name, ": ", g.num_tasks(), " tasks, ", g.records().size(),
                              " records, ", g.num_parent_tasks(), " parents, ",
                              static_cast<double>(bytes) / static_cast<double>(g.num_tasks()),
                              " bytes a task"));
    EXPECT_LE(bytes, kGraphBytesPerTask * g.num_tasks());
  }
}

}  // namespace
}  // namespace vtrain
