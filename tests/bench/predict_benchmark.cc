// Speed of one prediction end to end (graph build + simulation) at kernel and
// operator granularity, on the plans the foundation issue names.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/cluster/scheduler.h"
#include "core/engine/engine.h"
#include "core/graph/builder.h"
#include "core/plan/curve.h"
#include "core/plan/search.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "core/spec/settings.h"
#include "core/util/status_macros.h"
#include "tests/testing/kernel_graph.h"
#include "tests/testing/spec_builders.h"

namespace vtrain {
namespace {

// `periodic`: jump over repeating periods (engine/periodic.h), or step every
// pipeline action (the same result; run side by side for the ratio).
// `memo`: share operator resolutions across predictions, as the server and
// searches do (profile/lookup.h), or resolve them afresh in each.
void RunPredict(benchmark::State& state, const Job& job, Granularity granularity,
                bool periodic = true, bool memo = false) {
  const ProfileSet profiles = DefaultProfileSet(job.cluster.gpu);
  LookupMemo shared(profiles);
  PredictOptions options;
  options.granularity = granularity;
  options.periodic = periodic;
  if (memo) options.memo = &shared;
  int64_t tasks = 0, bytes = 0;
  SimulationCost cost;
  for (auto _ : state) {
    absl::StatusOr<Prediction> p = Predict(job, profiles, options);
    VTRAIN_CHECK(p.ok());
    tasks = p->num_tasks;
    cost = p->simulation;
    bytes = p->graph_bytes;
    benchmark::DoNotOptimize(p->iteration_time_ns);
  }
  if (granularity == Granularity::kKernel) {
    // The engine's completions beside the graph, measured on a graph built
    // once more outside the timed loop.
    const IterationGraph graph = testing::BuildKernelGraph(job);
    VTRAIN_CHECK(graph.graph.MemoryBytes() == bytes);
    bytes += SimulationMemoryBytes(graph.graph);
    state.counters["parents_per_task"] =
        static_cast<double>(graph.graph.num_parent_tasks()) / static_cast<double>(tasks);
  }
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["actions"] = static_cast<double>(cost.actions);
  state.counters["skipped"] = static_cast<double>(cost.actions_skipped);
  state.counters["bytes_per_task"] = static_cast<double>(bytes) / static_cast<double>(tasks);
  state.counters["ns_per_task"] =
      benchmark::Counter(static_cast<double>(tasks) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The plan of the server load benchmark (vtrainctl bench): gpt3-1.3b on one
// 8-GPU node, t=2, global batch 64.
void BM_Gpt13B_Operator(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("gpt3-1.3b", 2, 4, 1, 1, 64), Granularity::kOperator);
}
// The same with a lookup memo, as the server predicts.
void BM_Gpt13B_Operator_Memo(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("gpt3-1.3b", 2, 4, 1, 1, 64), Granularity::kOperator, true,
             true);
}

// DeepSeek-V3 at NVIDIA's H100 recipe plan (issue 43's speed target: at
// most 1 ms warm): 1,024 H100, t=2 p=8 V=4 ep=64, fp8, global batch 8192,
// the recipe's settings (flex dispatcher, recompute mla_up_proj and mlp),
// its 61 layers in the recipe's uneven layout; with a memo, as the server.
Job DeepSeekV3Recipe() {
  Job job;
  job.model = *ModelPreset("deepseek-v3");
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 1024);
  job.plan.tensor_parallel = 2;
  job.plan.pipeline_parallel = 8;
  job.plan.virtual_stages = 4;
  job.plan.data_parallel = 64;
  job.plan.expert_parallel = 64;
  job.plan.global_batch = 8192;
  job.plan.dtype = DType::kFp8;
  FillSettings({.dtype = true}, job);  // the recipe's (plan.settings is tuned)
  VTRAIN_CHECK(ValidateJob(job).ok());
  return job;
}
void BM_DeepSeekV3_Operator_Memo(benchmark::State& state) {
  RunPredict(state, DeepSeekV3Recipe(), Granularity::kOperator, true, true);
}

// GPT-3 175B, t=8 d=4 p=16, micro-batch 6, global batch 1536 (512 GPUs):
// the reference Python implementation takes 3.2 s at kernel granularity.
void BM_Gpt175B_Kernel(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("gpt3-175b", 8, 4, 16, 6, 1536), Granularity::kKernel);
}
void BM_Gpt175B_Operator(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("gpt3-175b", 8, 4, 16, 6, 1536), Granularity::kOperator);
}
// MT-NLG 530B, t=16 d=2 p=105, micro-batch 1, global batch 1920: the
// reference takes 53 s and 5.4 GB at kernel granularity.
void BM_MtNlg530B_Kernel(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("mtnlg-530b", 16, 2, 105, 1, 1920), Granularity::kKernel);
}
void BM_MtNlg530B_Operator(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("mtnlg-530b", 16, 2, 105, 1, 1920), Granularity::kOperator);
}
// The largest operator graph of the 530B search space: one replica, 105
// stages, 1920 micro-batches.
void BM_MtNlg530B_Operator_D1(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("mtnlg-530b", 8, 1, 105, 1, 1920), Granularity::kOperator);
}
// GPT-3 175B on 16,384 GPUs (t=8 d=64 p=32), on a flat fabric (Arg 0) and
// spread over 16-node leaves at 2:1 (Arg 1): the cost of the spine load,
// which walks every rank once per group kind and once per stage pair.
void BM_Gpt175B_16kGpus_Fabric(benchmark::State& state) {
  Job job = testing::PresetJob("gpt3-175b", 8, 64, 32, 1, 4096);
  if (state.range(0) == 1) {
    job.cluster.fabric.nodes_per_leaf = 16;
    job.cluster.fabric.oversubscription = 2;
    job.cluster.fabric.placement = Placement::kSpread;
  }
  RunPredict(state, job, Granularity::kOperator);
}
// Baseline plan of the paper's case study (t=8, d=4, p=105).
void BM_MtNlg530B_Operator_Baseline(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("mtnlg-530b", 8, 4, 105, 1, 1920), Granularity::kOperator);
}
// t=16 d=2 p=105 under GPipe: forwards, then backwards, each periodic.
void BM_MtNlg530B_Operator_Gpipe(benchmark::State& state) {
  Job job = testing::PresetJob("mtnlg-530b", 16, 2, 105, 1, 1920);
  job.plan.schedule = PipelineSchedule::kGpipe;
  RunPredict(state, job, Granularity::kOperator);
}
// The three 530B plans again, stepping every action (no periodic jumps).
void BM_MtNlg530B_Operator_Stepped(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("mtnlg-530b", 16, 2, 105, 1, 1920), Granularity::kOperator,
             false);
}
void BM_MtNlg530B_Operator_D1_Stepped(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("mtnlg-530b", 8, 1, 105, 1, 1920), Granularity::kOperator,
             false);
}
void BM_MtNlg530B_Operator_Baseline_Stepped(benchmark::State& state) {
  RunPredict(state, testing::PresetJob("mtnlg-530b", 8, 4, 105, 1, 1920), Granularity::kOperator,
             false);
}

// t=16 d=2 p=105 under ZB-H1: the split-backward walk (always stepped), to
// set against BM_MtNlg530B_Operator_Stepped (1F1B, stepped).
void BM_MtNlg530B_Operator_ZbH1(benchmark::State& state) {
  Job job = testing::PresetJob("mtnlg-530b", 16, 2, 105, 1, 1920);
  job.plan.schedule = PipelineSchedule::kZbH1;
  RunPredict(state, job, Granularity::kOperator);
}

// The scheduler of the cluster study alone (core/cluster/scheduler.h), on
// 10,000 GPUs in nodes of 8 with 1,000 jobs of 1 to 128 GPUs arriving a
// minute apart, each shape's table sublinear (g^0.9) over the counts the
// service draws (every node to 1,024 GPUs, then 64 counts per doubling).
// Arg 0: one flat fabric; 1: leaves of 32 nodes at 4:1, with fragmented
// placements at 0.8x and a leaf's uplinks full at 0.6x (packed) and 0.5x
// (fragmented), so jobs crossing the same uplinks share them.
void BM_ClusterSim_10kGpus_1kJobs(benchmark::State& state) {
  std::vector<int64_t> counts = {1, 2, 4};
  for (int64_t g = 8, step = 8; g <= 10'000; g += step) {
    counts.push_back(g);
    if (g >= 128 * step) step *= 2;
  }
  const bool leaves = state.range(0) == 1;
  std::vector<PlacementTables> tables;
  for (int k = 0; k < 8; ++k) {
    // Packed, spread, and both with full uplinks: 1, 0.8, 0.6 and 0.5 of a
    // curve rising as g^0.9.
    std::vector<ThroughputTable> figures;
    for (double factor : {1.0, 0.8, 0.6, 0.5}) {
      ThroughputTable t;
      for (int64_t g : counts) {
        t.gpus.push_back(g);
        t.iterations_per_s.push_back(factor * std::pow(static_cast<double>(g), 0.9) / (1 << k));
      }
      figures.push_back(std::move(t));
    }
    PlacementTables p(figures[0]);
    if (leaves) {
      p.spread = figures[1];
      p.packed_contended = figures[2];
      p.spread_contended = figures[3];
    }
    tables.push_back(std::move(p));
  }
  std::vector<ClusterJob> jobs;
  for (int i = 0; i < 1000; ++i) {
    const int k = i % 8;
    const double duration = 1800.0 * (1 + (i * 7) % 13);
    const double iterations = duration * tables[k].packed.At(int64_t{1} << k);
    jobs.push_back({std::to_string(i), 60.0 * i, iterations, 60.0 * i + 2 * duration, k});
  }
  const ClusterSimOptions options = {.total_gpus = 10'000,
                                     .gpus_per_node = 8,
                                     .nodes_per_leaf = leaves ? 32 : 0,
                                     .contended_background = leaves ? 8.0 : 0.0};
  for (auto _ : state) {
    absl::StatusOr<ClusterOutcome> out = SimulateCluster(jobs, tables, options);
    VTRAIN_CHECK(out.ok());
    benchmark::DoNotOptimize(out->avg_jct_s);
  }
}

// The MT-NLG 530B search of docs/accuracy.md (8,789 plans, 303 that fit) on one thread
// (arg 0: stepping every action, 1: periodic jumps).
void BM_MtNlg530B_Search(benchmark::State& state) {
  SearchSpace space;
  space.model = *ModelPreset("mtnlg-530b");
  space.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  space.cluster.price_usd_per_gpu_hour = 4.09625;
  space.global_batch = 1920;
  space.max_gpus = 3360;
  space.tensor_parallel = {1, 2, 4, 8, 16};
  space.max_data_parallel = 32;
  space.train_tokens = 270e9;
  const ProfileSet profiles = DefaultProfileSet(space.cluster.gpu);
  SearchOptions options;
  options.objective = Objective::kCost;
  options.periodic = state.range(0) == 1;
  int64_t plans = 0, actions = 0;
  for (auto _ : state) {
    absl::StatusOr<SearchResult> r = Search(space, profiles, options);
    VTRAIN_CHECK(r.ok());
    plans = r->considered;
    actions = r->simulation.actions;
  }
  state.counters["plans"] = static_cast<double>(plans);
  state.counters["actions"] = static_cast<double>(actions);
}

// Issue 13's scheduler curve: GPT-3 175B, global batch 1536, every multiple
// of 8 GPUs up to 1,024, under one policy (first arg 0: best, 1:
// data-parallel), on the second arg's threads (the target: both policies in
// under 100 ms on 2 cores).
void BM_Gpt175B_Curve(benchmark::State& state) {
  CurveSpec spec;
  spec.model = *ModelPreset("gpt3-175b");
  spec.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  spec.global_batch = 1536;
  for (int64_t g = 8; g <= 1024; g += 8) spec.gpu_counts.push_back(g);
  spec.policy = state.range(0) == 0 ? CurvePolicy::kBest : CurvePolicy::kDataParallel;
  const ProfileSet profiles = DefaultProfileSet(spec.cluster.gpu);
  CurveOptions options;
  options.threads = static_cast<int>(state.range(1));
  int64_t fits = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<CurvePoint>> curve = ThroughputCurve(spec, profiles, options);
    if (!curve.ok()) state.SkipWithError(std::string(curve.status().message()).c_str());
    fits = 0;
    for (const CurvePoint& p : *curve) fits += p.fits ? 1 : 0;
  }
  state.counters["counts_with_a_plan"] = static_cast<double>(fits);
}

BENCHMARK(BM_Gpt175B_Curve)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 2})
    ->Args({1, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_MtNlg530B_Search)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gpt13B_Operator)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Gpt13B_Operator_Memo)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DeepSeekV3_Operator_Memo)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Gpt175B_Kernel)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gpt175B_Operator)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MtNlg530B_Kernel)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_MtNlg530B_Operator)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MtNlg530B_Operator_D1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MtNlg530B_Operator_Baseline)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MtNlg530B_Operator_Gpipe)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MtNlg530B_Operator_Stepped)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MtNlg530B_Operator_D1_Stepped)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MtNlg530B_Operator_Baseline_Stepped)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MtNlg530B_Operator_ZbH1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ClusterSim_10kGpus_1kJobs)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gpt175B_16kGpus_Fabric)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vtrain

BENCHMARK_MAIN();
