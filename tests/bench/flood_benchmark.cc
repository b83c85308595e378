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
//                               [--rounds 1] [--flooder-process 0|1]
//                               [--flooder-nice N]
//                               [--max-queued-per-client N] [--reserved-slots N]
//
// --rounds R alternates the two phases R times and prints the median of the
// rounds' ratios. --flooder-process 1 runs the flooder as a process of its
// own (this binary again, `--flood-only HOST:PORT`), as a client on another
// host would be; --flooder-nice N lowers that process's CPU priority, which
// stands in for its client-side work running on another machine (the
// server's own work for its calls keeps the server's priorities).
//
// Not Google Benchmark: two phases of one run, compared side by side.
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
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
#include "server/allocator.h"
#include "server/server.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain {
namespace {

struct Flags {
  int predictions = 400;
  int flood_threads = 8;
  int reserved_slots = -1;
  int max_queued = 0;
  int rounds = 1;
  bool flooder_process = false;
  int flooder_nice = 0;
  std::string flood_only;  // HOST:PORT: be the flooder process only
  std::string search_model = "gpt3-13b";
  int search_gpus = 64;
};

Flags Parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--predictions")) f.predictions = v;
    if (!std::strcmp(argv[i], "--flood-threads")) f.flood_threads = v;
    if (!std::strcmp(argv[i], "--reserved-slots")) f.reserved_slots = v;
    if (!std::strcmp(argv[i], "--max-queued-per-client")) f.max_queued = v;
    if (!std::strcmp(argv[i], "--rounds")) f.rounds = std::max(1, v);
    if (!std::strcmp(argv[i], "--flooder-process")) f.flooder_process = v != 0;
    if (!std::strcmp(argv[i], "--flooder-nice")) f.flooder_nice = v;
    if (!std::strcmp(argv[i], "--flood-only")) f.flood_only = argv[i + 1];
    if (!std::strcmp(argv[i], "--search-model")) f.search_model = argv[i + 1];
    if (!std::strcmp(argv[i], "--search-gpus")) f.search_gpus = v;
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

v1::SearchRequest SearchRequest(const Flags& flags) {
  v1::SearchRequest r;
  r.mutable_model()->set_preset(flags.search_model);
  r.mutable_cluster()->set_gpu("a100-sxm4-80gb");
  r.set_gpus(flags.search_gpus);
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

// Searches from `threads` threads as fast as the server answers, until
// Stop(); counts what came back.
class Flood {
 public:
  Flood(const std::shared_ptr<grpc::Channel>& channel, const Flags& flags) {
    for (int t = 0; t < flags.flood_threads; ++t) {
      threads_.emplace_back([this, channel, request = SearchRequest(flags)] {
        auto stub = v1::Simulator::NewStub(channel);
        while (!stop_) {
          grpc::ClientContext ctx;
          ctx.AddMetadata("x-vtrain-client", "flooder");
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
          auto reader = stub->Search(&ctx, request);
          v1::SearchResponse msg;
          while (reader->Read(&msg)) {
          }
          const grpc::Status s = reader->Finish();
          if (s.ok()) {
            ++answered_;
          } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
            ++retry_;
          } else {
            ++other_;
          }
        }
      });
    }
  }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  ~Flood() { Stop(); }
  int64_t answered() const { return answered_; }
  int64_t retry() const { return retry_; }
  int64_t other() const { return other_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> answered_{0}, retry_{0}, other_{0};
  std::vector<std::thread> threads_;
};

// The flooder process (--flood-only HOST:PORT): floods until SIGTERM, then
// prints its counts ("answered retry failed") on stdout.
int FloodOnly(const Flags& flags) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);  // before any thread starts
  if (flags.flooder_nice != 0) setpriority(PRIO_PROCESS, 0, flags.flooder_nice);
  auto channel = grpc::CreateChannel(flags.flood_only, grpc::InsecureChannelCredentials());
  Flood flood(channel, flags);
  int sig = 0;
  sigwait(&term, &sig);
  flood.Stop();
  std::printf("%lld %lld %lld\n", static_cast<long long>(flood.answered()),
              static_cast<long long>(flood.retry()), static_cast<long long>(flood.other()));
  return 0;
}

// A flooder in a process of its own; Stop() ends it and reads its counts.
class FlooderProcess {
 public:
  FlooderProcess(const Flags& flags, int port) {
    const std::string threads = std::to_string(flags.flood_threads);
    const std::string nice = std::to_string(flags.flooder_nice);
    const std::string addr = absl::StrCat("127.0.0.1:", port);
    std::vector<std::string> args = {"flood_benchmark",
                                     "--flood-only",
                                     addr,
                                     "--flood-threads",
                                     threads,
                                     "--flooder-nice",
                                     nice,
                                     "--search-model",
                                     flags.search_model,
                                     "--search-gpus",
                                     std::to_string(flags.search_gpus)};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) std::exit(1);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    if (posix_spawn(&pid_, "/proc/self/exe", &actions, nullptr, argv.data(), environ) != 0) {
      std::fprintf(stderr, "could not start the flooder process\n");
      std::exit(1);
    }
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fds[0];
  }
  // Ends the flood; "answered retry failed" as the child printed them.
  std::string Stop() {
    kill(pid_, SIGTERM);
    std::string text;
    char buf[256];
    for (ssize_t n; (n = read(out_, buf, sizeof buf)) > 0;)
      text.append(buf, static_cast<size_t>(n));
    close(out_);
    int status = 0;
    waitpid(pid_, &status, 0);
    return text;
  }

 private:
  pid_t pid_ = 0;
  int out_ = -1;
};

struct Round {
  std::vector<double> alone, flooded, alone_sim, flooded_sim;
  std::string flooder;  // its counts
  bool failed = false;
};

Round RunRound(const Flags& flags, int port, const std::shared_ptr<grpc::Channel>& channel,
               v1::Simulator::Stub& stub, int r) {
  Round round;
  round.alone = Predictions(stub, flags.predictions, 2 * r * flags.predictions, &round.alone_sim);
  std::unique_ptr<Flood> flood;
  std::unique_ptr<FlooderProcess> process;
  if (flags.flooder_process) {
    process = std::make_unique<FlooderProcess>(flags, port);
  } else {
    flood = std::make_unique<Flood>(channel, flags);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the flood is on
  round.flooded =
      Predictions(stub, flags.predictions, (2 * r + 1) * flags.predictions, &round.flooded_sim);
  if (process != nullptr) {
    round.flooder = process->Stop();
    long long answered = 0, retry = 0, other = 0;
    round.failed =
        std::sscanf(round.flooder.c_str(), "%lld %lld %lld", &answered, &retry, &other) != 3 ||
        other > 0;
    round.flooder =
        absl::StrCat(answered, " answered, ", retry, " told to retry, ", other, " failed");
  } else {
    flood->Stop();
    round.failed = flood->other() > 0;
    round.flooder = absl::StrCat(flood->answered(), " answered, ", flood->retry(),
                                 " told to retry, ", flood->other(), " failed");
  }
  return round;
}

int Main(int argc, char** argv) {
  const Flags flags = Parse(argc, argv);
  if (!flags.flood_only.empty()) return FloodOnly(flags);
  server::TuneAllocatorForServing();  // as vtrain-server's main does
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
  const int port = (*srv)->port();
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  auto stub = v1::Simulator::NewStub(channel);
  Predictions(*stub, 50, 1000000);  // warm up
  std::printf(
      "well-behaved client, %d predictions a phase (gpt3-13b, 64 A100, operator); "
      "flooder: %d threads of searches (%s, %d GPUs)%s\n",
      flags.predictions, flags.flood_threads, flags.search_model.c_str(), flags.search_gpus,
      flags.flooder_process
          ? absl::StrCat(" in a process of its own at nice ", flags.flooder_nice).c_str()
          : " in this process");
  std::vector<double> ratios, p99s_alone, p99s_flooded;
  bool failed = false;
  for (int r = 0; r < flags.rounds; ++r) {
    const Round round = RunRound(flags, port, channel, *stub, r);
    const double p99a = Quantile(round.alone, 0.99), p99f = Quantile(round.flooded, 0.99);
    ratios.push_back(p99f / p99a);
    p99s_alone.push_back(p99a);
    p99s_flooded.push_back(p99f);
    failed = failed || round.failed;
    std::printf("round %d\n", r + 1);
    std::printf("  alone:        p50 %.3f ms  p99 %.3f ms\n", Quantile(round.alone, 0.5), p99a);
    std::printf("  under flood:  p50 %.3f ms  p99 %.3f ms  (p99 %.2fx alone)\n",
                Quantile(round.flooded, 0.5), p99f, p99f / p99a);
    std::printf("  their simulation (the answers' wall_ns): p99 %.3f ms alone, %.3f ms flooded\n",
                Quantile(round.alone_sim, 0.99), Quantile(round.flooded_sim, 0.99));
    std::printf("  flooder: %s\n", round.flooder.c_str());
  }
  if (flags.rounds > 1) {
    std::sort(ratios.begin(), ratios.end());
    std::printf("median p99 over %d rounds: %.3f ms alone, %.3f ms under flood (%.2fx)\n",
                flags.rounds, Quantile(p99s_alone, 0.5), Quantile(p99s_flooded, 0.5),
                Quantile(p99s_flooded, 0.5) / Quantile(p99s_alone, 0.5));
    std::printf("p99 under flood / alone over %d rounds: median %.2fx (%.2fx to %.2fx)\n",
                flags.rounds, Quantile(ratios, 0.5), ratios.front(), ratios.back());
  }
  srv->reset();
  std::filesystem::remove_all(dir);
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace vtrain

int main(int argc, char** argv) { return vtrain::Main(argc, argv); }
