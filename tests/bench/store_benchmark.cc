// What durability costs: pushes per second into the profile store (a real
// SQLite file in a temporary directory) with synchronous=FULL, the default,
// against synchronous=NORMAL, which a power cut may roll back
// (docs/deployment.md#durability).
//
//   build/tests/store_benchmark --benchmark_repetitions=5
#include <atomic>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/profile_store.h"

namespace vtrain::server {
namespace {

std::atomic<int> dir_counter{0};

void BM_Push(benchmark::State& state) {
  const auto durability = state.range(0) == 0 ? ProfileStore::Durability::kPowerLoss
                                              : ProfileStore::Durability::kProcessCrash;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      absl::StrCat("vtrain_store_bench_", getpid(), "_", dir_counter.fetch_add(1));
  std::filesystem::create_directories(dir);
  auto store = ProfileStore::Open((dir / "bench.db").string(), durability);
  if (!store.ok()) {
    state.SkipWithError(std::string(store.status().message()).c_str());
    return;
  }
  v1::ProfileSet set;
  set.set_gpu("a100-sxm4-80gb");
  set.set_name("bench");
  set.mutable_created_at()->set_seconds(1'700'000'000);
  int64_t n = 0;
  for (auto _ : state) {
    set.set_id(absl::StrCat("sha256:bench", n++));
    auto put = (*store)->Put(set, /*builtin=*/false);
    if (!put.ok()) state.SkipWithError(std::string(put.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
  store->reset();
  std::filesystem::remove_all(dir);
}
// 0: synchronous=FULL (acknowledged survives a power cut), 1: NORMAL.
BENCHMARK(BM_Push)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace
}  // namespace vtrain::server

BENCHMARK_MAIN();
