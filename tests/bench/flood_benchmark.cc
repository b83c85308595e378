// One client's flood against another's predictions (issue 46): a server on
// loopback; a well-behaved client sends operator-granularity predictions one
// after another (each a different request, so the answer cache never
// serves it) and records their latency, first alone, then while a flooder
// sends plan searches from N threads as fast as it can. The two clients
// name themselves (x-vtrain-client metadata), as two programs on one host
// would. Prints the well-behaved client's p50/p99 in both phases, their
// ratio, and the flooder's calls (answered, told to retry).
//
//   build/tests/flood_benchmark [--predictions 400] [--flood-threads 8]
//                               [--max-queued-per-client N] [--reserved-slots N]
//
// Not Google Benchmark: two phases of one run, compared side by side.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "server/server.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain {
namespace {

struct Flags {
  int predictions = 400;
  int flood_threads = 8;
  int reserved_slots = -1;
  int max_queued = 0;
};

Flags Parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--predictions")) f.predictions = v;
    if (!std::strcmp(argv[i], "--flood-threads")) f.flood_threads = v;
    if (!std::strcmp(argv[i], "--reserved-slots")) f.reserved_slots = v;
    if (!std::strcmp(argv[i], "--max-queued-per-client")) f.max_queued = v;
  }
  return f;
}

v1::PredictRequest PredictRequest(int i) {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("gpt3-13b");
  r.mutable_cluster()->set_gpu("a100-sxm4-80gb");
  r.mutable_cluster()->set_num_gpus(64);
  r.mutable_plan()->set_tensor_parallel(8);
  r.mutable_plan()->set_pipeline_parallel(2);
  r.mutable_plan()->set_global_batch(512 + 8 * (i % 512));  // never the same request twice
  return r;
}

v1::SearchRequest SearchRequest() {
  v1::SearchRequest r;
  r.mutable_model()->set_preset("gpt3-13b");
  r.mutable_cluster()->set_gpu("a100-sxm4-80gb");
  r.set_gpus(64);
  r.set_global_batch(512);
  return r;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// The well-behaved client's latencies (ms), `n` predictions in a row, and
// each answer's own simulation time (ms) in `simulated`.
std::vector<double> Predictions(v1::Simulator::Stub& stub, int n, int offset,
                                std::vector<double>* simulated = nullptr) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-vtrain-client", "planner");
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::PredictResponse resp;
    const auto start = std::chrono::steady_clock::now();
    grpc::Status s = stub.Predict(&ctx, PredictRequest(offset + i), &resp);
    const auto end = std::chrono::steady_clock::now();
    if (!s.ok()) {
      std::fprintf(stderr, "predict failed: %s\n", s.error_message().c_str());
      std::exit(1);
    }
    ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    if (simulated != nullptr)
      simulated->push_back(static_cast<double>(resp.simulation().wall_ns()) * 1e-6);
  }
  return ms;
}

int Main(int argc, char** argv) {
  const Flags flags = Parse(argc, argv);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("vtrain_flood_", getpid());
  std::filesystem::create_directories(dir);
  server::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = (dir / "flood.db").string();
  o.reserved_slots = flags.reserved_slots;
  o.max_queued_per_client = flags.max_queued;
  absl::StatusOr<std::unique_ptr<server::Server>> srv = server::Server::Start(o);
  if (!srv.ok()) {
    std::fprintf(stderr, "server: %s\n", std::string(srv.status().message()).c_str());
    return 1;
  }
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*srv)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Simulator::NewStub(channel);
  Predictions(*stub, 50, 100000);  // warm up
  std::vector<double> alone_sim, flooded_sim;
  const std::vector<double> alone = Predictions(*stub, flags.predictions, 0, &alone_sim);

  std::atomic<bool> stop{false};
  std::atomic<int64_t> answered{0}, retry{0}, other{0};
  std::vector<std::thread> flood;
  for (int t = 0; t < flags.flood_threads; ++t) {
    flood.emplace_back([&] {
      auto flood_stub = v1::Simulator::NewStub(channel);
      while (!stop) {
        grpc::ClientContext ctx;
        ctx.AddMetadata("x-vtrain-client", "flooder");
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        auto reader = flood_stub->Search(&ctx, SearchRequest());
        v1::SearchResponse msg;
        while (reader->Read(&msg)) {
        }
        grpc::Status s = reader->Finish();
        if (s.ok()) {
          ++answered;
        } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
          ++retry;
        } else {
          ++other;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the flood is on
  const std::vector<double> flooded = Predictions(*stub, flags.predictions, 1000, &flooded_sim);
  stop = true;
  for (std::thread& t : flood) t.join();
  const double p50a = Quantile(alone, 0.5), p99a = Quantile(alone, 0.99);
  const double p50f = Quantile(flooded, 0.5), p99f = Quantile(flooded, 0.99);
  std::printf("well-behaved client, %d predictions each (gpt3-13b, 64 A100, operator):\n",
              flags.predictions);
  std::printf("  alone:        p50 %.3f ms  p99 %.3f ms\n", p50a, p99a);
  std::printf("  under flood:  p50 %.3f ms  p99 %.3f ms  (p99 %.2fx alone)\n", p50f, p99f,
              p99f / p99a);
  std::printf("  their simulation (the answers' wall_ns): p99 %.3f ms alone, %.3f ms under flood\n",
              Quantile(alone_sim, 0.99), Quantile(flooded_sim, 0.99));
  std::printf("flooder (%d threads of searches): %lld answered, %lld told to retry, %lld failed\n",
              flags.flood_threads, static_cast<long long>(answered.load()),
              static_cast<long long>(retry.load()), static_cast<long long>(other.load()));
  srv->reset();
  std::filesystem::remove_all(dir);
  return other.load() > 0 ? 1 : 0;
}

}  // namespace
}  // namespace vtrain

int main(int argc, char** argv) { return vtrain::Main(argc, argv); }
