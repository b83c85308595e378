// vtrainctl bench: a closed-loop load generator for a vtrain-server on this
// machine (Predict or the gRPC health check), with latency percentiles and
// error counts; failed calls are errors, not throughput.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/commands.h"
#include "client/job_flags.h"
#include "common/connection.h"
#include "core/util/status_macros.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::client {
namespace {

constexpr char kBenchHelp[] =
    "usage: vtrainctl bench --server 127.0.0.1:PORT [--method predict|health] "
    "[--concurrency N] [--requests N] [--duration S] [job flags]\n\n"
    "A closed-loop load generator for a vtrain-server on this machine (loopback only):\n"
    "reports throughput of successful calls, p50/p99 latency and errors. TLS and token\n"
    "flags apply to every client.\n\n"
    "example:\n  vtrainctl bench --server 127.0.0.1:50051 --model gpt3-1.3b --gpus 8 --tp 2 "
    "--global-batch 64 --concurrency 8\n\nflags:\n";

struct BenchOptions {
  bool health = false;  // grpc.health.v1.Health/Check instead of Predict
  int64_t concurrency = 8;
  int64_t requests = 10000;
  double seconds = 10;
  v1::PredictRequest request;
};

struct BenchResult {
  std::vector<double> ok_latencies_us;  // successful calls only
  int64_t errors = 0;
  std::string first_error;
  double elapsed_s = 0;
};

absl::StatusOr<int64_t> IntIn(const common::FlagParser& flags, const char* name, int64_t dflt,
                              int64_t lo, int64_t hi) {
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> v, flags.GetInt(name));
  const int64_t x = v.value_or(dflt);
  if (x < lo || x > hi) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [", lo, ", ", hi, "]"));
  }
  return x;
}

absl::StatusOr<BenchOptions> OptionsFromFlags(const common::FlagParser& flags) {
  const std::string server = flags.Get("server").value_or("");
  if (server.rfind("127.", 0) != 0 && server.rfind("localhost:", 0) != 0 &&
      server.rfind("[::1]:", 0) != 0) {
    return absl::InvalidArgumentError("bench only targets loopback (127.x.x.x, localhost, [::1])");
  }
  BenchOptions o;
  const std::string method = flags.Get("method").value_or("predict");
  if (method != "predict" && method != "health") {
    return absl::InvalidArgumentError("--method must be predict or health");
  }
  o.health = method == "health";
  VTRAIN_ASSIGN_OR_RETURN(o.concurrency, IntIn(flags, "concurrency", 8, 1, 1024));
  VTRAIN_ASSIGN_OR_RETURN(o.requests, IntIn(flags, "requests", 10000, 1, 100'000'000));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> duration, flags.GetDouble("duration"));
  o.seconds = duration.value_or(10);
  if (o.seconds <= 0 || o.seconds > 3600) {
    return absl::InvalidArgumentError("--duration must be in (0, 3600]");
  }
  if (!o.health) {
    // Checked here once, so that a bad job fails fast instead of 10,000 times.
    VTRAIN_RETURN_IF_ERROR(JobFromFlags(flags).status());
    VTRAIN_ASSIGN_OR_RETURN(o.request, RequestFromFlags(flags));
  }
  return o;
}

// One unary call of `method` with an already serialised request, through
// the generic stub, its response left unparsed: Predict and the health check
// take the same client path, so that the client's own work (on the same
// machine as the server) is the same for both and the comparison measures
// the server (a call is a success when its status is OK).
grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx,
                          const std::string& method, const grpc::ByteBuffer& request) {
  grpc::GenericStub generic(channel);
  grpc::ByteBuffer response;
  grpc::CompletionQueue cq;
  grpc::Status s;
  auto call = generic.PrepareUnaryCall(ctx, method, request, &cq);
  call->StartCall();
  call->Finish(&response, &s, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return s;
}

BenchResult RunLoad(const common::Connection& conn, const BenchOptions& o) {
  // The health check's request is an empty HealthCheckRequest (service ""),
  // whose serialisation is zero bytes.
  const std::string method =
      o.health ? "/grpc.health.v1.Health/Check" : "/vtrain.v1.Simulator/Predict";
  const std::string bytes = o.health ? "" : o.request.SerializeAsString();
  std::atomic<int64_t> issued{0};
  std::mutex mu;
  BenchResult result;
  const absl::Time start = absl::Now();
  const absl::Time stop = start + absl::Seconds(o.seconds);
  std::vector<std::thread> clients;
  for (int64_t w = 0; w < o.concurrency; ++w) {
    clients.emplace_back([&, w] {
      // One channel per client, with the connection's credentials, so that
      // load spreads like separate callers.
      std::shared_ptr<grpc::Channel> channel = conn.NewChannel(static_cast<int>(w) + 1);
      grpc::Slice slice(bytes);
      const grpc::ByteBuffer request(&slice, 1);
      std::vector<double> mine;
      int64_t my_errors = 0;
      std::string my_error;
      while (absl::Now() < stop && issued.fetch_add(1) < o.requests) {
        auto ctx = conn.Context();
        const absl::Time t0 = absl::Now();
        const grpc::Status s = RawUnaryCall(channel, ctx.get(), method, request);
        if (s.ok()) {
          mine.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
        } else {
          ++my_errors;
          if (my_error.empty()) my_error = s.error_message();
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      result.ok_latencies_us.insert(result.ok_latencies_us.end(), mine.begin(), mine.end());
      result.errors += my_errors;
      if (result.first_error.empty()) result.first_error = my_error;
    });
  }
  for (std::thread& t : clients) t.join();
  result.elapsed_s = absl::ToDoubleSeconds(absl::Now() - start);
  std::sort(result.ok_latencies_us.begin(), result.ok_latencies_us.end());
  return result;
}

std::string Report(const BenchOptions& o, const BenchResult& r, bool json) {
  const std::vector<double>& lat = r.ok_latencies_us;
  auto pct = [&](double q) {
    return lat.empty() ? 0.0 : lat[std::min(lat.size() - 1, static_cast<size_t>(q * lat.size()))];
  };
  const double rps = static_cast<double>(lat.size()) / r.elapsed_s;
  const char* method = o.health ? "health" : "predict";
  if (json) {
    return absl::StrFormat(
        "{\"method\":\"%s\",\"concurrency\":%d,\"requests\":%d,\"errors\":%d,\"seconds\":%.3f,"
        "\"requests_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f}\n",
        method, o.concurrency, lat.size(), r.errors, r.elapsed_s, rps, pct(0.5) / 1e3,
        pct(0.99) / 1e3);
  }
  return absl::StrFormat(
      "%s x%d: %d successful requests in %.2f s = %.1f req/s, p50 %.3f ms, p99 %.3f ms, "
      "errors %d%s\n",
      method, o.concurrency, lat.size(), r.elapsed_s, rps, pct(0.5) / 1e3, pct(0.99) / 1e3,
      r.errors, r.first_error.empty() ? "" : absl::StrCat(" (first: ", r.first_error, ")"));
}

}  // namespace

int RunBench(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl bench");
  common::AddConnectionFlags(flags);
  AddJobFlags(flags);
  flags.AddValue("method", "M", "predict (default) or health");
  flags.AddValue("concurrency", "N", "clients in parallel, each with its own channel (default 8)");
  flags.AddValue("requests", "N", "stop after N requests in all (default 10000)");
  flags.AddValue("duration", "SECONDS", "stop after this long (default 10)");
  flags.AddSwitch("json", "print the result as JSON");
  flags.AddSwitch("help", "show this help");
  if (std::optional<int> done = ParseCommandLine(flags, args, "bench", kBenchHelp, out, err)) {
    return *done;
  }
  absl::StatusOr<BenchOptions> options = OptionsFromFlags(flags);
  if (!options.ok()) return Fail(err, "bench", options.status());
  absl::StatusOr<common::Connection> conn = common::Connect(flags);
  if (!conn.ok()) return Fail(err, "bench", conn.status());
  const BenchResult result = RunLoad(*conn, *options);
  out << Report(*options, result, flags.Switch("json"));
  return result.errors == 0 ? common::kExitOk : common::kExitFailure;
}

}  // namespace vtrain::client
