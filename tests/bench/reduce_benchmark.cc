// Speed of the GPU agent's record-to-table reduction on synthetic
// recordings the size a framework run produces (many repetitions of each
// operator, tens of kernels per operator, launches on one thread).
#include <string>

#include "benchmark/benchmark.h"
#include "profiler_agent/gpu/trace.h"

namespace vtrain::gpu {
namespace {

Trace MakeTrace(int64_t ranges, int kernels_per_range) {
  static const char* const kOps[] = {"attention_fwd", "mlp_fwd", "mlp_bwd", "attention_bwd"};
  Trace t;
  uint64_t clock = 1000;
  uint32_t corr = 1;
  for (int64_t r = 0; r < ranges; ++r) {
    const uint64_t start = clock;
    uint64_t gpu = clock + 500;
    for (int k = 0; k < kernels_per_range; ++k) {
      t.launches.push_back({corr, clock, clock + 5, 1});
      t.kernels.push_back({"kernel_" + std::to_string(k), gpu, gpu + 1000 + (r % 7), 7, corr});
      ++corr;
      clock += 10;
      gpu += 1100;
    }
    t.ranges.push_back({kOps[r % 4], start, clock, 1});
    clock = gpu + 100;
  }
  return t;
}

void BM_Reduce(benchmark::State& state) {
  const Trace trace = MakeTrace(state.range(0), 16);
  for (auto _ : state) {
    ReduceResult r = Reduce(trace);
    benchmark::DoNotOptimize(r);
  }
  state.counters["kernels"] = static_cast<double>(trace.kernels.size());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(trace.kernels.size()));
}
BENCHMARK(BM_Reduce)->Arg(40)->Arg(4000)->Arg(62500)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vtrain::gpu

BENCHMARK_MAIN();
