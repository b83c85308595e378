#include "profiler_agent/agent_commands.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/commands.h"
#include "client/flag_parser.h"
#include "client/measurements.h"
#include "client/remote.h"
#include "profiler_agent/importers.h"
#include "proto/convert.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::agent {
namespace {

using cli::Fail;
using cli::FlagParser;
using cli::kExitBadInput;
using cli::kExitFailure;
using cli::kExitOk;

constexpr char kUsage[] =
    "vtrain-agent: profile GPU nodes and push profile sets to a vtrain registry\n\n"
    "usage:\n"
    "  vtrain-agent import nccl-tests FILE --gpu NAME --ranks N [--scope intra_node|inter_node]\n"
    "                     [--collective all_reduce|all_gather|reduce_scatter|send_recv] -o OUT.json\n"
    "  vtrain-agent import vtrain-trace FILE --gpu NAME --hidden H --heads A --seq-len S\n"
    "                     --micro-batch B --tp T [--ffn F] [--vocab V] -o OUT.json\n"
    "  vtrain-agent push FILE --server HOST:PORT --token-file F [--retries N]\n"
    "  vtrain-agent profile|serve   (need the GPU part: CUPTI, NCCL; not in this build)\n\n"
    "examples:\n"
    "  vtrain-agent import nccl-tests allreduce_8gpu.txt --gpu a100-sxm4-80gb --ranks 8 -o ar8.json\n"
    "  vtrain-agent push ar8.json --server registry:50051 --token-file /etc/vtrain/token\n";

absl::Status WriteSet(const ProfileSet& set, const std::string& path, std::ostream& out) {
  v1::ProfileSet proto = convert::ProfileSetToProto(set);
  proto.set_id(convert::ContentId(proto));
  absl::StatusOr<std::string> json = convert::ToJson(proto);
  if (!json.ok()) return json.status();
  if (absl::Status s = cli::WriteFile(path, *json + "\n"); !s.ok()) return s;
  out << "wrote " << proto.id() << " (" << proto.operators_size() << " operators, "
      << proto.collectives_size() << " collectives) to " << path << "\n";
  return absl::OkStatus();
}

int RunImport(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() < 2 || args[1].rfind("--", 0) == 0) {
    err << kUsage;
    return kExitBadInput;
  }
  const std::string kind = args[0], file = args[1];
  FlagParser flags("vtrain-agent import");
  flags.AddValue("gpu", "NAME", "GPU model the data was measured on");
  flags.AddValue("o", "FILE", "output profile-set JSON");
  flags.AddValue("ranks", "N", "nccl-tests: ranks of the collective");
  flags.AddValue("scope", "S", "nccl-tests: intra_node (default) or inter_node");
  flags.AddValue("collective", "C", "nccl-tests: all_reduce (default), all_gather, ...");
  for (const char* f : {"hidden", "heads", "seq-len", "micro-batch", "tp", "ffn", "vocab"}) {
    flags.AddValue(f, "N", "vtrain-trace: the traced shape");
  }
  if (absl::Status s = flags.Parse({args.begin() + 2, args.end()}); !s.ok()) {
    return Fail(err, "import", s);
  }
  const std::optional<std::string> gpu = flags.Get("gpu");
  const std::optional<std::string> output = flags.Get("o");
  if (!gpu || !output) {
    return Fail(err, "import", absl::InvalidArgumentError("--gpu NAME and -o OUT.json are required"));
  }
  absl::StatusOr<std::string> text = cli::ReadFile(file);
  if (!text.ok()) return Fail(err, "import", text.status());
  absl::StatusOr<ProfileSet> set;
  if (kind == "nccl-tests") {
    absl::StatusOr<std::optional<int64_t>> ranks = flags.GetInt("ranks");
    if (!ranks.ok() || !*ranks) {
      return Fail(err, "import", absl::InvalidArgumentError("--ranks N is required"));
    }
    const std::string scope = flags.Get("scope").value_or("intra_node");
    if (scope != "intra_node" && scope != "inter_node") {
      return Fail(err, "import",
                  absl::InvalidArgumentError("--scope must be intra_node or inter_node"));
    }
    absl::StatusOr<Collective> collective = ParseCollective(flags.Get("collective").value_or("all_reduce"));
    if (!collective.ok()) return Fail(err, "import", collective.status());
    set = ImportNcclTests(*text, file, *gpu, **ranks,
                         scope == "intra_node" ? LinkScope::kIntraNode : LinkScope::kInterNode,
                         *collective);
  } else if (kind == "vtrain-trace") {
    TraceShape shape;
    struct {
      const char* flag;
      int64_t* field;
    } fields[] = {{"hidden", &shape.hidden},          {"heads", &shape.heads},
                  {"seq-len", &shape.seq},            {"micro-batch", &shape.micro_batch},
                  {"tp", &shape.tensor_parallel},     {"ffn", &shape.ffn},
                  {"vocab", &shape.vocab}};
    for (auto& f : fields) {
      absl::StatusOr<std::optional<int64_t>> v = flags.GetInt(f.flag);
      if (!v.ok()) return Fail(err, "import", v.status());
      if (*v) *f.field = **v;
    }
    set = ImportVtrainTrace(*text, file, *gpu, shape);
  } else {
    return Fail(err, "import", absl::InvalidArgumentError(absl::StrCat(
                                   "unknown import kind '", kind, "'; use nccl-tests or vtrain-trace")));
  }
  if (!set.ok()) return Fail(err, "import", set.status());
  if (absl::Status s = WriteSet(*set, *output, out); !s.ok()) return Fail(err, "import", s);
  return kExitOk;
}

int RunPush(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0].rfind("--", 0) == 0) {
    err << kUsage;
    return kExitBadInput;
  }
  FlagParser flags("vtrain-agent push");
  cli::AddConnectionFlags(flags);
  flags.AddValue("retries", "N", "attempts while the registry is unreachable (default 8)");
  if (absl::Status s = flags.Parse({args.begin() + 1, args.end()}); !s.ok()) {
    return Fail(err, "push", s);
  }
  absl::StatusOr<std::string> text = cli::ReadFile(args[0]);
  if (!text.ok()) return Fail(err, "push", text.status());
  v1::PushProfileSetRequest req;
  if (absl::Status s = convert::FromJson(*text, req.mutable_profile_set()); !s.ok()) {
    return Fail(err, "push", absl::InvalidArgumentError(absl::StrCat(args[0], ": ", s.message())));
  }
  absl::StatusOr<cli::Connection> c = cli::Connect(flags);
  if (!c.ok()) return Fail(err, "push", c.status());
  absl::StatusOr<std::optional<int64_t>> retries = flags.GetInt("retries");
  if (!retries.ok()) return Fail(err, "push", retries.status());
  const int64_t attempts = std::max<int64_t>(1, retries->value_or(8));
  auto stub = v1::ProfileRegistry::NewStub(c->channel);
  absl::Duration backoff = absl::Milliseconds(200);
  // Pushes are idempotent (the id is the content hash), so retrying after an
  // unknown outcome is safe.
  for (int64_t attempt = 1;; ++attempt) {
    v1::PushProfileSetResponse resp;
    grpc::Status s = stub->PushProfileSet(c->Context().get(), req, &resp);
    if (s.ok()) {
      out << resp.id() << (resp.already_present() ? " (already present; nothing changed)" : " (stored)")
          << "\n";
      return kExitOk;
    }
    const bool transient = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                           s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    if (!transient || attempt >= attempts) return Fail(err, "push", cli::FromGrpc(s));
    err << "vtrain-agent push: attempt " << attempt << " failed (" << s.error_message()
        << "); retrying in " << absl::FormatDuration(backoff) << "\n";
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(10));
  }
}

}  // namespace

int RunAgent(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << kUsage;
    return kExitBadInput;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "import") return RunImport(rest, out, err);
  if (args[0] == "push") return RunPush(rest, out, err);
  if (args[0] == "help" || args[0] == "--help") {
    out << kUsage;
    return kExitOk;
  }
  if (args[0] == "profile" || args[0] == "serve") {
    err << "vtrain-agent: '" << args[0]
        << "' needs the GPU part (CUPTI, cuBLAS, NCCL), which this build does not have\n";
    return kExitFailure;
  }
  err << "vtrain-agent: unknown command '" << args[0] << "'\n\n" << kUsage;
  return kExitBadInput;
}

}  // namespace vtrain::agent
