#include "profiler_agent/agent_commands.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/connection.h"
#include "common/exit_codes.h"
#include "common/files.h"
#include "common/flag_parser.h"
#include "common/nccl_tests.h"
#include "core/spec/gpu.h"
#include "core/util/status_macros.h"
#include "profiler_agent/importers.h"
#include "profiler_agent/work.h"
#include "proto/convert.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::agent {
namespace {

// Prints "vtrain-agent COMMAND: message" and returns the status's exit code.
int Fail(std::ostream& err, absl::string_view command, const absl::Status& status) {
  err << "vtrain-agent " << command << ": " << status.message() << "\n";
  return common::ExitCodeFor(status);
}
using common::FlagParser;
using common::kExitBadInput;
using common::kExitFailure;
using common::kExitOk;

constexpr char kUsage[] =
    "vtrain-agent: profile GPU nodes and push profile sets to a vtrain registry\n\n"
    "usage:\n"
    "  vtrain-agent import nccl-tests FILE... --gpu NAME [--ranks N] [--scope "
    "intra_node|inter_node]\n"
    "                     [--collective all_reduce|all_gather|reduce_scatter|send_recv|all_to_all] "
    "-o "
    "OUT.json\n"
    "  vtrain-agent import vtrain-trace FILE --gpu NAME --hidden H --heads A --seq-len S\n"
    "                     --micro-batch B --tp T [--ffn F] [--vocab V] -o OUT.json\n"
    "  vtrain-agent push FILE --server HOST:PORT --token-file F [--retries N]\n"
    "  vtrain-agent info | profile ... | nccl ... | reduce ... | selftest   (run vtrain-agent-gpu, "
    "the CUDA "
    "part;\n"
    "                     see `vtrain-agent-gpu help`)\n"
    "  vtrain-agent serve --server HOST:PORT --token-file F [--gpu NAME] [--gpus N] [--once]\n"
    "                     [--interval SECONDS] [--max-items N] [--work-dir DIR]\n\n"
    "examples:\n"
    "  vtrain-agent import nccl-tests allreduce_8gpu.txt --gpu a100-sxm4-80gb --ranks 8 -o "
    "ar8.json\n"
    "  vtrain-agent push ar8.json --server registry:50051 --token-file /etc/vtrain/token\n"
    "  vtrain-agent profile --hidden 2048 --heads 16 --seq-len 2048 --micro-batch 1 -o layer.json\n"
    "  vtrain-agent serve --server registry:50051 --token-file /etc/vtrain/token \\\n"
    "                     --gpu h200-sxm-141gb --gpus 8\n";

// vtrain-agent-gpu: $VTRAIN_AGENT_GPU, else beside this binary (installed)
// or in gpu/ under it (build tree); "" when absent.
std::string FindAgentGpu() {
  if (const char* env = std::getenv("VTRAIN_AGENT_GPU"); env != nullptr && *env != '\0') {
    return env;
  }
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.rfind('/') + 1);
  for (const std::string& candidate : {dir + "vtrain-agent-gpu", dir + "gpu/vtrain-agent-gpu"}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

constexpr char kNoGpuPart[] =
    "needs vtrain-agent-gpu (the CUDA part: CUPTI, cuBLASLt, NCCL), which is not beside this "
    "binary; build on a machine with the CUDA Toolkit (or `cmake -S profiler_agent/gpu`) or set "
    "VTRAIN_AGENT_GPU";

// Runs `binary args...` with this process's stderr and, unless `captured`
// is given, its stdout; returns its exit code (128 + signal when killed, -1
// when it could not start).
int RunChild(const std::string& binary, const std::vector<std::string>& args,
             std::string* captured = nullptr) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  int pipe_fds[2] = {-1, -1};
  if (captured != nullptr && pipe(pipe_fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) {
    if (captured != nullptr) {
      close(pipe_fds[0]);
      close(pipe_fds[1]);
    }
    return -1;
  }
  if (pid == 0) {
    if (captured != nullptr) {
      dup2(pipe_fds[1], 1);
      close(pipe_fds[0]);
      close(pipe_fds[1]);
    }
    execv(binary.c_str(), argv.data());
    const std::string msg =
        "vtrain-agent: cannot run " + binary + ": " + std::strerror(errno) + "\n";
    [[maybe_unused]] ssize_t n = write(2, msg.data(), msg.size());
    _exit(127);
  }
  if (captured != nullptr) {
    close(pipe_fds[1]);
    char buf[4096];
    for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof(buf))) != 0;) {
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      captured->append(buf, static_cast<size_t>(n));
    }
    close(pipe_fds[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

absl::Status WriteSet(const ProfileSet& set, const std::string& path, std::ostream& out) {
  v1::ProfileSet proto = proto::ProfileSetToProto(set);
  proto.set_id(proto::ContentId(proto));
  if (absl::Status s = common::WriteFile(path, proto::ToJson(proto)); !s.ok()) return s;
  out << "wrote " << proto.id() << " (" << proto.operators_size() << " operators, "
      << proto.collectives_size() << " collectives) to " << path << "\n";
  return absl::OkStatus();
}

namespace {

// The flags of import (both importers).
void AddImportFlags(common::FlagParser& flags) {
  flags.AddValue("gpu", "NAME", "GPU model the data was measured on");
  flags.AddValue("o", "FILE", "output profile-set JSON");
  flags.AddValue("ranks", "N", "nccl-tests: ranks of the collective (default: from the file)");
  flags.AddValue("scope", "S", "nccl-tests: intra_node (default) or inter_node");
  flags.AddValue("collective", "C",
                 "nccl-tests: all_reduce, all_gather, reduce_scatter, send_recv or all_to_all "
                 "(default: what "
                 "each file says, else all_reduce)");
  for (const char* f : {"hidden", "heads", "seq-len", "micro-batch", "tp", "ffn", "vocab"}) {
    flags.AddValue(f, "N", "vtrain-trace: the traced shape");
  }
}

// A vTrain CUPTI trace of the shape the flags give, each dimension checked
// against the range a job may have (core/spec/job.cc) before it is stored.
absl::StatusOr<ProfileSet> ImportTraceFile(const std::vector<std::string>& files,
                                           const std::string& gpu,
                                           const common::FlagParser& flags) {
  if (files.size() != 1) return absl::InvalidArgumentError("vtrain-trace imports one trace file");
  VTRAIN_ASSIGN_OR_RETURN(std::string text, common::ReadFile(files[0]));
  TraceShape shape;
  struct {
    const char* flag;
    int64_t* field;
    int64_t max;
  } fields[] = {
      {"hidden", &shape.hidden, 1 << 18},      {"heads", &shape.heads, 1 << 14},
      {"seq-len", &shape.seq, 1 << 20},        {"micro-batch", &shape.micro_batch, 1 << 16},
      {"tp", &shape.tensor_parallel, 1 << 20}, {"ffn", &shape.ffn, 1 << 20},
      {"vocab", &shape.vocab, 1 << 24}};
  for (auto& f : fields) {
    VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> v, flags.GetIntIn(f.flag, 1, f.max));
    if (v) *f.field = *v;
  }
  return ImportVtrainTrace(text, files[0], gpu, shape);
}

}  // namespace

int RunImport(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() < 2 || args[1].rfind("--", 0) == 0) {
    err << kUsage;
    return common::kExitBadInput;
  }
  const std::string kind = args[0];
  // The input files: every argument before the first flag.
  size_t first_flag = 1;
  while (first_flag < args.size() && args[first_flag].rfind("-", 0) != 0) ++first_flag;
  const std::vector<std::string> files(args.begin() + 1, args.begin() + first_flag);
  common::FlagParser flags("vtrain-agent import");
  AddImportFlags(flags);
  if (absl::Status s = flags.Parse({args.begin() + first_flag, args.end()}); !s.ok()) {
    return Fail(err, "import", s);
  }
  const std::optional<std::string> gpu = flags.Get("gpu");
  const std::optional<std::string> output = flags.Get("o");
  if (!gpu || !output) {
    return Fail(err, "import",
                absl::InvalidArgumentError("--gpu NAME and -o OUT.json are required"));
  }
  absl::StatusOr<ProfileSet> set;
  if (kind == "nccl-tests") {
    // The ranks a collective can span: every GPU of the largest cluster
    // vtrain predicts (2^24).
    absl::StatusOr<std::optional<int64_t>> ranks = flags.GetIntIn("ranks", 2, int64_t{1} << 24);
    if (!ranks.ok()) return Fail(err, "import", ranks.status());
    const std::string scope = flags.Get("scope").value_or("intra_node");
    if (scope != "intra_node" && scope != "inter_node") {
      return Fail(err, "import",
                  absl::InvalidArgumentError("--scope must be intra_node or inter_node"));
    }
    // --collective names the collective of every file; without it each
    // file says (its "Collective test starting" line or its name), and
    // all_reduce is the default.
    std::optional<Collective> forced;
    if (std::optional<std::string> c = flags.Get("collective")) {
      absl::StatusOr<Collective> parsed = ParseCollective(*c);
      if (!parsed.ok()) return Fail(err, "import", parsed.status());
      forced = *parsed;
    }
    // Each file is one curve; several files (say 2..8 GPUs) make one set.
    for (const std::string& file : files) {
      absl::StatusOr<std::string> text = common::ReadFile(file);
      if (!text.ok()) return Fail(err, "import", text.status());
      const std::optional<int64_t> file_ranks =
          ranks->has_value() ? **ranks : InferNcclRanks(*text, file);
      if (!file_ranks) {
        return Fail(err, "import",
                    absl::InvalidArgumentError(
                        absl::StrCat(file,
                                     ": cannot tell the rank count (no \"nGpus N\" or "
                                     "\"Rank\" lines, no NgpuN in the name); pass --ranks N")));
      }
      const Collective collective = forced.value_or(
          common::InferNcclCollective(*text, file).value_or(Collective::kAllReduce));
      absl::StatusOr<ProfileSet> one = ImportNcclTests(
          *text, file, *gpu, *file_ranks,
          scope == "intra_node" ? LinkScope::kIntraNode : LinkScope::kInterNode, collective);
      if (!one.ok()) return Fail(err, "import", one.status());
      if (!set.ok()) {
        set = std::move(one);
        continue;
      }
      for (auto& [key, curve] : one->collectives) {
        if (set->collectives.count(key)) {
          return Fail(
              err, "import",
              absl::InvalidArgumentError(absl::StrCat(file, ": a second curve for ", key.ToString(),
                                                      "; give each rank count once")));
        }
        set->collectives.insert_or_assign(key, curve);
      }
      absl::StrAppend(&set->provenance, "; ", one->provenance);
    }
    if (files.size() > 1) set->name = absl::StrCat("nccl-tests ", files.size(), " files");
  } else if (kind == "vtrain-trace") {
    set = ImportTraceFile(files, *gpu, flags);
  } else {
    return Fail(err, "import",
                absl::InvalidArgumentError(absl::StrCat("unknown import kind '", kind,
                                                        "'; use nccl-tests or vtrain-trace")));
  }
  if (!set.ok()) return Fail(err, "import", set.status());
  if (absl::Status s = WriteSet(*set, *output, out); !s.ok()) return Fail(err, "import", s);
  return common::kExitOk;
}

// Pushes with retries while the registry is unreachable. Pushes are
// idempotent (the id is the content hash), so retrying after an unknown
// outcome is safe.
int PushWithRetries(const v1::PushProfileSetRequest& req, const common::Connection& c,
                    int64_t attempts, std::ostream& out, std::ostream& err) {
  auto stub = v1::ProfileRegistry::NewStub(c.channel);
  absl::Duration backoff = absl::Milliseconds(200);
  for (int64_t attempt = 1;; ++attempt) {
    v1::PushProfileSetResponse resp;
    grpc::Status s = stub->PushProfileSet(c.Context().get(), req, &resp);
    if (s.ok()) {
      out << common::PushSummary(resp);
      return common::kExitOk;
    }
    const bool transient = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                           s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    if (!transient || attempt >= attempts) return Fail(err, "push", common::FromGrpc(s));
    err << "vtrain-agent push: attempt " << attempt << " failed (" << s.error_message()
        << "); retrying in " << absl::FormatDuration(backoff) << "\n";
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(10));
  }
}

int RunPush(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0].rfind("--", 0) == 0) {
    err << kUsage;
    return common::kExitBadInput;
  }
  common::FlagParser flags("vtrain-agent push");
  common::AddConnectionFlags(flags);
  flags.AddValue("retries", "N", "attempts while the registry is unreachable (default 8)");
  if (absl::Status s = flags.Parse({args.begin() + 1, args.end()}); !s.ok()) {
    return Fail(err, "push", s);
  }
  absl::StatusOr<v1::PushProfileSetRequest> req = common::ReadProfileSetFile(args[0]);
  if (!req.ok()) return Fail(err, "push", req.status());
  absl::StatusOr<common::Connection> c = common::Connect(flags);
  if (!c.ok()) return Fail(err, "push", c.status());
  absl::StatusOr<std::optional<int64_t>> retries = flags.GetInt("retries");
  if (!retries.ok()) return Fail(err, "push", retries.status());
  return PushWithRetries(*req, *c, std::max<int64_t>(1, retries->value_or(8)), out, err);
}

// One poll of `serve`: asks for work, runs vtrain-agent-gpu for it, pushes
// what it measured. Returns the number of failed runs, or an error status
// when the registry could not be asked.
absl::StatusOr<int> ServeOnce(const common::Connection& c, const std::string& gpu_binary,
                              const std::string& gpu, int local_gpus, int max_items,
                              const std::string& work_dir, const std::atomic<bool>& stop,
                              std::ostream& out, std::ostream& err) {
  auto stub = v1::ProfileRegistry::NewStub(c.channel);
  v1::NextProfilingWorkRequest req;
  req.set_gpu(gpu);
  req.set_max_items(max_items);
  v1::NextProfilingWorkResponse resp;
  if (grpc::Status s = stub->NextProfilingWork(c.Context().get(), req, &resp); !s.ok()) {
    return common::FromGrpc(s);
  }
  std::vector<std::string> keys;
  for (const v1::ProfilingWork& w : resp.work()) keys.push_back(w.key());
  const WorkPlan plan = PlanProfilingWork(keys, gpu, local_gpus);
  out << "serve: " << keys.size() << " work items, " << plan.runs.size() << " runs, "
      << plan.skipped.size() << " skipped\n";
  for (const std::string& s : plan.skipped) out << "serve: skipped " << s << "\n";
  int failed = 0;
  for (size_t i = 0; i < plan.runs.size() && !stop; ++i) {
    const ProfilingRun& run = plan.runs[i];
    const std::string file = absl::StrCat(work_dir, "/vtrain-agent-", getpid(), "-", i, ".json");
    std::vector<std::string> args = run.args;
    args.push_back("-o");
    args.push_back(file);
    out << "serve: run " << i + 1 << "/" << plan.runs.size() << ": vtrain-agent-gpu "
        << absl::StrJoin(args, " ") << "\n";
    const int rc = RunChild(gpu_binary, args);
    if (rc != 0) {
      err << "serve: run " << i + 1 << " failed (exit " << rc << "); its " << run.keys.size()
          << " keys stay queued\n";
      ++failed;
      continue;
    }
    absl::StatusOr<v1::PushProfileSetRequest> push = common::ReadProfileSetFile(file);
    if (!push.ok() || PushWithRetries(*push, c, 8, out, err) != common::kExitOk) {
      if (!push.ok()) err << "serve: " << push.status().message() << "\n";
      ++failed;
    }
    std::remove(file.c_str());
  }
  return failed;
}

int RunServe(const std::vector<std::string>& args, const std::atomic<bool>& stop, std::ostream& out,
             std::ostream& err) {
  common::FlagParser flags("vtrain-agent serve");
  common::AddConnectionFlags(flags);
  flags.AddValue("gpu", "NAME", "the GPU model of this node (default: what `info` detects)");
  flags.AddValue("gpus", "N", "GPUs on this node, for NCCL work (default: what `info` counts)");
  flags.AddValue("interval", "SECONDS", "pause between polls (default 60)");
  flags.AddValue("max-items", "N", "work items per poll (default 10)");
  flags.AddValue("work-dir", "DIR", "where measured files are written before the push (/tmp)");
  flags.AddSwitch("once", "poll once, run the work, exit (non-zero if a run failed)");
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(err, "serve", s);
  const std::string gpu_binary = FindAgentGpu();
  if (gpu_binary.empty()) {
    err << "vtrain-agent serve: " << kNoGpuPart << "\n";
    return common::kExitFailure;
  }
  // What flags leave open comes from `vtrain-agent-gpu info`, which prints
  // "gpus N" and "vtrain name NAME" lines.
  std::string info;
  const bool detect = !flags.Has("gpu") || !flags.Has("gpus");
  const int info_rc = detect ? RunChild(gpu_binary, {"info"}, &info) : 0;
  auto info_value = [&](const std::string& key) -> std::string {
    const std::string text = "\n" + info, prefix = "\n" + key + " ";
    const size_t at = text.find(prefix);
    if (info_rc != 0 || at == std::string::npos) return "";
    const size_t begin = at + prefix.size();
    return text.substr(begin, text.find('\n', begin) - begin);
  };
  std::optional<std::string> gpu = flags.Get("gpu");
  if (!gpu) {
    gpu = info_value("vtrain name");
    if (gpu->empty()) {
      return Fail(err, "serve",
                  absl::FailedPreconditionError(
                      "cannot tell this node's GPU model (vtrain-agent-gpu info); "
                      "pass --gpu NAME"));
    }
  }
  if (!GpuByName(*gpu).ok()) {
    return Fail(err, "serve",
                absl::InvalidArgumentError(absl::StrCat("--gpu '", *gpu, "' is unknown")));
  }
  int64_t detected_gpus = 1;
  if (!flags.Has("gpus") && !absl::SimpleAtoi(info_value("gpus"), &detected_gpus))
    detected_gpus = 1;
  int64_t values[3] = {detected_gpus, 60, 10};
  const char* names[3] = {"gpus", "interval", "max-items"};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::optional<int64_t>> v = flags.GetInt(names[i]);
    if (!v.ok()) return Fail(err, "serve", v.status());
    if (*v) values[i] = **v;
    if (values[i] < (i == 1 ? 0 : 1) || values[i] > 100000) {
      return Fail(err, "serve",
                  absl::InvalidArgumentError(
                      absl::StrCat("--", names[i], "=", values[i], " is out of range")));
    }
  }
  absl::StatusOr<common::Connection> c = common::Connect(flags);
  if (!c.ok()) return Fail(err, "serve", c.status());
  const std::string work_dir = flags.Get("work-dir").value_or("/tmp");
  out << "serve: asking for " << *gpu << " work; " << values[0] << " GPU(s) here\n";
  const bool once = flags.Has("once");
  while (!stop) {
    absl::StatusOr<int> failed = ServeOnce(*c, gpu_binary, *gpu, static_cast<int>(values[0]),
                                           static_cast<int>(values[2]), work_dir, stop, out, err);
    if (!failed.ok()) {
      if (once) return Fail(err, "serve", failed.status());
      err << "vtrain-agent serve: " << failed.status().message() << "; retrying\n";
    }
    if (once) return failed.ok() && *failed == 0 ? common::kExitOk : common::kExitFailure;
    for (int64_t s = 0; s < values[1] * 10 && !stop; ++s) absl::SleepFor(absl::Milliseconds(100));
  }
  out << "serve: stopped\n";
  return common::kExitOk;
}

}  // namespace

int RunAgent(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::atomic<bool> never{false};
  return RunAgent(args, never, out, err);
}

int RunAgent(const std::vector<std::string>& args, const std::atomic<bool>& stop, std::ostream& out,
             std::ostream& err) {
  if (args.empty()) {
    err << kUsage;
    return common::kExitBadInput;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "import") return RunImport(rest, out, err);
  if (args[0] == "push") return RunPush(rest, out, err);
  if (args[0] == "help" || args[0] == "--help") {
    out << kUsage;
    return common::kExitOk;
  }
  if (args[0] == "serve") return RunServe(rest, stop, out, err);
  if (args[0] == "profile" || args[0] == "nccl" || args[0] == "info" || args[0] == "reduce" ||
      args[0] == "selftest") {
    const std::string gpu_binary = FindAgentGpu();
    if (gpu_binary.empty()) {
      err << "vtrain-agent " << args[0] << ": " << kNoGpuPart << "\n";
      return common::kExitFailure;
    }
    return RunChild(gpu_binary, args);
  }
  err << "vtrain-agent: unknown command '" << args[0] << "'\n\n" << kUsage;
  return common::kExitBadInput;
}

}  // namespace vtrain::agent
