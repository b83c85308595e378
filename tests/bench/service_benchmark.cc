// The number users see, beside the core loop: one MT-NLG 530B plan (t=8 d=1
// p=105, 1,920 micro-batches) predicted through vtrain::Predict (a shared
// lookup memo, as the server's), through service::Predict (request
// conversion, settings, tables, response), and through the Predict RPC of a
// real server on loopback (the price changes each call, so that the
// prediction cache does not answer). Each reports the answer's own
// simulation.wall_ns as sim_us, and the whole call as the benchmark time.
//
//   build/tests/service_benchmark --benchmark_repetitions=5
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "grpcpp/grpcpp.h"
#include "proto/job_convert.h"
#include "server/allocator.h"
#include "server/server.h"
#include "service/profile_source.h"
#include "service/service.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain {
namespace {

// MT-NLG 530B, t=8 d=1 p=105 on A100s: the paper's run (fp16, full
// recomputation, no overlaps), with flash attention as the core benchmark's.
v1::PredictRequest MtNlgRequest() {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("mtnlg-530b");
  r.mutable_model()->set_attention_impl(v1::ATTENTION_IMPL_FLASH);
  r.mutable_cluster()->set_gpu("a100-sxm4-80gb");
  r.mutable_cluster()->set_num_gpus(840);
  v1::ParallelPlan& p = *r.mutable_plan();
  p.set_settings(v1::SETTINGS_PAPER);
  p.set_tensor_parallel(8);
  p.set_pipeline_parallel(105);
  p.set_global_batch(1920);
  return r;
}

void Report(benchmark::State& state, int64_t sim_ns_total) {
  state.counters["sim_us"] = static_cast<double>(sim_ns_total) * 1e-3 /
                             static_cast<double>(std::max<int64_t>(1, state.iterations()));
}

void BM_Core_MtNlg530B_D1(benchmark::State& state) {
  absl::StatusOr<Job> job = proto::JobFromProto(MtNlgRequest());
  if (!job.ok()) return state.SkipWithError(std::string(job.status().message()).c_str());
  const ProfileSet profiles = DefaultProfileSet(job->cluster.gpu);
  LookupMemo memo(profiles);
  PredictOptions options;
  options.memo = &memo;
  int64_t sim = 0;
  for (auto _ : state) {
    absl::StatusOr<Prediction> p = Predict(*job, profiles, options);
    if (!p.ok()) return state.SkipWithError(std::string(p.status().message()).c_str());
    sim += p->simulation.wall_ns;
  }
  Report(state, sim);
}

void BM_Service_MtNlg530B_D1(benchmark::State& state) {
  const v1::PredictRequest request = MtNlgRequest();
  const service::BuiltinProfiles source;
  int64_t sim = 0;
  for (auto _ : state) {
    absl::StatusOr<v1::PredictResponse> r = service::Predict(request, source);
    if (!r.ok()) return state.SkipWithError(std::string(r.status().message()).c_str());
    sim += r->simulation().wall_ns();
  }
  Report(state, sim);
}

// service::Predict on a new thread each call, as a server's calls may land.
void BM_ServiceNewThread_MtNlg530B_D1(benchmark::State& state) {
  const v1::PredictRequest request = MtNlgRequest();
  const service::BuiltinProfiles source;
  int64_t sim = 0;
  for (auto _ : state) {
    std::thread t([&] {
      absl::StatusOr<v1::PredictResponse> r = service::Predict(request, source);
      if (r.ok()) sim += r->simulation().wall_ns();
    });
    t.join();
  }
  Report(state, sim);
}

void BM_Rpc_MtNlg530B_D1(benchmark::State& state) {
  static std::atomic<int> n{0};
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    absl::StrCat("vtrain_service_bench_", getpid(), "_", n++);
  std::filesystem::create_directories(dir);
  server::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = (dir / "bench.db").string();
  absl::StatusOr<std::unique_ptr<server::Server>> srv = server::Server::Start(o);
  if (!srv.ok()) return state.SkipWithError(std::string(srv.status().message()).c_str());
  auto stub = v1::Simulator::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*srv)->port()),
                                                         grpc::InsecureChannelCredentials()));
  v1::PredictRequest request = MtNlgRequest();
  int64_t sim = 0, price = 0;
  for (auto _ : state) {
    request.mutable_cluster()->set_price_usd_per_gpu_hour(static_cast<double>(++price));
    grpc::ClientContext ctx;
    v1::PredictResponse response;
    grpc::Status s = stub->Predict(&ctx, request, &response);
    if (!s.ok()) return state.SkipWithError(s.error_message().c_str());
    sim += response.simulation().wall_ns();
  }
  Report(state, sim);
  srv->reset();
  std::filesystem::remove_all(dir);
}

BENCHMARK(BM_Core_MtNlg530B_D1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Service_MtNlg530B_D1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ServiceNewThread_MtNlg530B_D1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Rpc_MtNlg530B_D1)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace vtrain

int main(int argc, char** argv) {
  // As vtrain-server does (server/allocator.h); VTRAIN_BENCH_DEFAULT_MALLOC=1
  // keeps glibc's defaults, for the comparison.
  if (std::getenv("VTRAIN_BENCH_DEFAULT_MALLOC") == nullptr) {
    vtrain::server::TuneAllocatorForServing();
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
