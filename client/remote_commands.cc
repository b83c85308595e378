// vtrainctl against a vtrain-server: predict --server, profiles, bench.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/commands.h"
#include "common/flag_parser.h"
#include "client/job_flags.h"
#include "client/measurements.h"
#include "client/prediction_format.h"
#include "common/connection.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "proto/json.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::cli {
namespace {

std::string Time(const google::protobuf::Timestamp& t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixSeconds(t.seconds()),
                          absl::UTCTimeZone());
}

}  // namespace

absl::StatusOr<v1::PredictResponse> PredictRemotely(const common::FlagParser& flags,
                                                    const v1::PredictRequest& request) {
  absl::StatusOr<common::Connection> c = common::Connect(flags);
  if (!c.ok()) return c.status();
  v1::PredictResponse response;
  auto stub = v1::Simulator::NewStub(c->channel);
  grpc::Status s = stub->Predict(c->Context().get(), request, &response);
  if (!s.ok()) return common::FromGrpc(s);
  return response;
}

int RunProfiles(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  constexpr char kHelp[] =
      "usage: vtrainctl profiles ls|show|push|pull|rm [ID|FILE] --server HOST:PORT [flags]\n\n"
      "  ls              list the server's profile sets (--gpu to filter)\n"
      "  show ID         print one set as JSON (the profile-set file format)\n"
      "  push FILE       push a profile-set JSON file (needs --token-file); idempotent\n"
      "  pull ID -o FILE save one set as a JSON file\n"
      "  rm ID           delete a set (needs --token-file)\n\n"
      "examples:\n"
      "  vtrainctl profiles ls --server 127.0.0.1:50051\n"
      "  vtrainctl profiles push a100.json --server 127.0.0.1:50051 --token-file token\n\n"
      "flags:\n";
  common::FlagParser flags("vtrainctl profiles");
  common::AddConnectionFlags(flags);
  flags.AddValue("gpu", "NAME", "ls: only sets of this GPU");
  flags.AddValue("o", "FILE", "pull: where to write the set");
  flags.AddSwitch("json", "ls: print JSON");
  flags.AddSwitch("help", "show this help");
  std::string verb = args.empty() ? "" : args[0];
  std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  std::string operand;
  if (!rest.empty() && rest[0].rfind("--", 0) != 0 && rest[0] != "-o") {
    operand = rest[0];
    rest.erase(rest.begin());
  }
  for (std::string& a : rest) {
    if (a == "-o") a = "--o";
  }
  if (absl::Status s = flags.Parse(rest); !s.ok()) return Fail(err, "profiles", s);
  if (verb.empty() || verb == "--help" || verb == "help" || flags.Switch("help")) {
    out << kHelp << flags.Usage();
    return verb.empty() ? common::kExitBadInput : common::kExitOk;
  }
  absl::StatusOr<common::Connection> c = common::Connect(flags);
  if (!c.ok()) return Fail(err, "profiles", c.status());
  auto stub = v1::ProfileRegistry::NewStub(c->channel);
  auto need_operand = [&](const char* what) -> absl::Status {
    if (operand.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("profiles ", verb, " needs ", what));
    }
    return absl::OkStatus();
  };
  if (verb == "ls") {
    v1::ListProfileSetsRequest req;
    if (auto gpu = flags.Get("gpu")) req.set_gpu(*gpu);
    v1::ListProfileSetsResponse resp;
    grpc::Status s = stub->ListProfileSets(c->Context().get(), req, &resp);
    if (!s.ok()) return Fail(err, "profiles", common::FromGrpc(s));
    if (flags.Switch("json")) {
      out << convert::ToJson(resp);
      return common::kExitOk;
    }
    out << absl::StrFormat("%-73s %-16s %-20s %5s %5s %s\n", "id", "gpu", "created (UTC)", "ops",
                           "colls", "kind");
    for (const v1::ProfileSetSummary& p : resp.profile_sets()) {
      out << absl::StrFormat("%-73s %-16s %-20s %5d %5d %s\n", p.id(), p.gpu(),
                             Time(p.created_at()), p.num_operators(), p.num_collectives(),
                             p.builtin() ? "built-in" : "measured");
    }
    return common::kExitOk;
  }
  if (verb == "show" || verb == "pull") {
    if (absl::Status st = need_operand("a profile-set id"); !st.ok()) return Fail(err, "profiles", st);
    v1::GetProfileSetRequest req;
    req.set_id(operand);
    v1::ProfileSet set;
    grpc::Status s = stub->GetProfileSet(c->Context().get(), req, &set);
    if (!s.ok()) return Fail(err, "profiles", common::FromGrpc(s));
    const std::string json = convert::ToJson(set);
    if (verb == "show") {
      out << json;
      return common::kExitOk;
    }
    std::optional<std::string> path = flags.Get("o");
    if (!path) return Fail(err, "profiles", absl::InvalidArgumentError("profiles pull needs -o FILE"));
    if (absl::Status w = common::WriteFile(*path, json); !w.ok()) return Fail(err, "profiles", w);
    out << "wrote " << operand << " to " << *path << "\n";
    return common::kExitOk;
  }
  if (verb == "push") {
    if (absl::Status st = need_operand("a profile-set JSON file"); !st.ok()) {
      return Fail(err, "profiles", st);
    }
    absl::StatusOr<v1::PushProfileSetRequest> req = common::ReadProfileSetFile(operand);
    if (!req.ok()) return Fail(err, "profiles", req.status());
    v1::PushProfileSetResponse resp;
    grpc::Status s = stub->PushProfileSet(c->Context().get(), *req, &resp);
    if (!s.ok()) return Fail(err, "profiles", common::FromGrpc(s));
    out << resp.id() << (resp.already_present() ? " (already present; nothing changed)" : " (stored)")
        << "\n";
    return common::kExitOk;
  }
  if (verb == "rm") {
    if (absl::Status st = need_operand("a profile-set id"); !st.ok()) return Fail(err, "profiles", st);
    v1::DeleteProfileSetRequest req;
    req.set_id(operand);
    v1::DeleteProfileSetResponse resp;
    grpc::Status s = stub->DeleteProfileSet(c->Context().get(), req, &resp);
    if (!s.ok()) return Fail(err, "profiles", common::FromGrpc(s));
    out << "deleted " << operand << "\n";
    return common::kExitOk;
  }
  return Fail(err, "profiles",
              absl::InvalidArgumentError(absl::StrCat("unknown profiles command '", verb,
                                                      "'; use ls, show, push, pull or rm")));
}

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
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(err, "bench", s);
  if (flags.Switch("help")) {
    out << "usage: vtrainctl bench --server 127.0.0.1:PORT [--method predict|health] "
           "[--concurrency N] [--requests N] [--duration S] [job flags]\n\n"
           "A closed-loop load generator for a vtrain-server on this machine (loopback only):\n"
           "reports throughput, p50/p99 latency and errors.\n\n"
           "example:\n  vtrainctl bench --server 127.0.0.1:50051 --model gpt3-1.3b --gpus 8 --tp 2 "
           "--global-batch 64 --concurrency 8\n\nflags:\n"
        << flags.Usage();
    return common::kExitOk;
  }
  const std::string server = flags.Get("server").value_or("");
  if (server.rfind("127.", 0) != 0 && server.rfind("localhost:", 0) != 0 &&
      server.rfind("[::1]:", 0) != 0) {
    return Fail(err, "bench", absl::InvalidArgumentError(
                                  "bench only targets loopback (127.x.x.x, localhost, [::1])"));
  }
  const std::string method = flags.Get("method").value_or("predict");
  if (method != "predict" && method != "health") {
    return Fail(err, "bench", absl::InvalidArgumentError("--method must be predict or health"));
  }
  auto get_int = [&](const char* name, int64_t dflt, int64_t lo, int64_t hi) -> absl::StatusOr<int64_t> {
    absl::StatusOr<std::optional<int64_t>> v = flags.GetInt(name);
    if (!v.ok()) return v.status();
    const int64_t x = v->value_or(dflt);
    if (x < lo || x > hi) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [", lo, ", ", hi, "]"));
    }
    return x;
  };
  absl::StatusOr<int64_t> concurrency = get_int("concurrency", 8, 1, 1024);
  if (!concurrency.ok()) return Fail(err, "bench", concurrency.status());
  absl::StatusOr<int64_t> requests = get_int("requests", 10000, 1, 100'000'000);
  if (!requests.ok()) return Fail(err, "bench", requests.status());
  absl::StatusOr<std::optional<double>> duration = flags.GetDouble("duration");
  if (!duration.ok()) return Fail(err, "bench", duration.status());
  const double seconds = duration->value_or(10);
  if (seconds <= 0 || seconds > 3600) {
    return Fail(err, "bench", absl::InvalidArgumentError("--duration must be in (0, 3600]"));
  }
  v1::PredictRequest req;
  if (method == "predict") {
    // Checked here once, so that a bad job fails fast instead of 10,000 times.
    absl::StatusOr<Job> job = JobFromFlags(flags);
    if (!job.ok()) return Fail(err, "bench", job.status());
    absl::StatusOr<v1::PredictRequest> request = RequestFromFlags(flags);
    if (!request.ok()) return Fail(err, "bench", request.status());
    req = *std::move(request);
  }
  absl::StatusOr<common::Connection> conn = common::Connect(flags);
  if (!conn.ok()) return Fail(err, "bench", conn.status());

  std::atomic<int64_t> issued{0};
  std::mutex mu;
  std::vector<double> latencies_us;
  int64_t errors = 0;
  std::string first_error;
  const absl::Time start = absl::Now();
  const absl::Time stop = start + absl::Seconds(seconds);
  std::vector<std::thread> clients;
  for (int64_t w = 0; w < *concurrency; ++w) {
    clients.emplace_back([&, w] {
      // One channel per client so that load spreads like separate callers.
      grpc::ChannelArguments args;
      args.SetInt("grpc.channel_id", static_cast<int>(w));
      auto channel = grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
      auto sim = v1::Simulator::NewStub(channel);
      std::vector<double> mine;
      int64_t my_errors = 0;
      std::string my_error;
      while (absl::Now() < stop && issued.fetch_add(1) < *requests) {
        auto ctx = conn->Context();
        const absl::Time t0 = absl::Now();
        grpc::Status s;
        if (method == "predict") {
          v1::PredictResponse resp;
          s = sim->Predict(ctx.get(), req, &resp);
        } else {
          grpc::ByteBuffer response;
          grpc::GenericStub generic(channel);
          // grpc.health.v1.Health/Check with an empty HealthCheckRequest
          // (service ""), whose serialisation is zero bytes.
          grpc::Slice empty("");
          grpc::ByteBuffer request(&empty, 1);
          grpc::CompletionQueue cq;
          auto call = generic.PrepareUnaryCall(ctx.get(), "/grpc.health.v1.Health/Check", request, &cq);
          call->StartCall();
          call->Finish(&response, &s, reinterpret_cast<void*>(1));
          void* tag;
          bool ok;
          cq.Next(&tag, &ok);
          cq.Shutdown();
          while (cq.Next(&tag, &ok)) {
          }
        }
        mine.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
        if (!s.ok()) {
          ++my_errors;
          if (my_error.empty()) my_error = s.error_message();
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies_us.insert(latencies_us.end(), mine.begin(), mine.end());
      errors += my_errors;
      if (first_error.empty()) first_error = my_error;
    });
  }
  for (std::thread& t : clients) t.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  std::sort(latencies_us.begin(), latencies_us.end());
  auto pct = [&](double q) {
    return latencies_us.empty() ? 0.0
                                : latencies_us[std::min(latencies_us.size() - 1,
                                                        static_cast<size_t>(q * latencies_us.size()))];
  };
  const double rps = static_cast<double>(latencies_us.size()) / elapsed;
  if (flags.Switch("json")) {
    out << absl::StrFormat(
        "{\"method\":\"%s\",\"concurrency\":%d,\"requests\":%d,\"errors\":%d,\"seconds\":%.3f,"
        "\"requests_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f}\n",
        method, *concurrency, latencies_us.size(), errors, elapsed, rps, pct(0.5) / 1e3,
        pct(0.99) / 1e3);
  } else {
    out << absl::StrFormat(
        "%s x%d: %d requests in %.2f s = %.1f req/s, p50 %.3f ms, p99 %.3f ms, errors %d%s\n",
        method, *concurrency, latencies_us.size(), elapsed, rps, pct(0.5) / 1e3, pct(0.99) / 1e3,
        errors, first_error.empty() ? "" : absl::StrCat(" (first: ", first_error, ")"));
  }
  return errors == 0 ? common::kExitOk : common::kExitFailure;
}

}  // namespace vtrain::cli
